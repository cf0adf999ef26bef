"""Kueue v0.19.2 test/e2e/certmanager/metrics_test.go, ported: the controller's /metrics served
with the certificate cert-manager issued into kueue-metrics-server-cert, mounted as
--metrics-cert-dir (tests/e2e/kueue/certmanager.py plays cert-manager and the kubelet's
volume). Kueue's curl pod, which mounts the Secret's ca.crt and verifies the server with it,
is this machine with the same mounted folder and a kueue-metrics-reader token; Prometheus
(Debian's, as in the prometheus cases) scrapes with that CA too."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.certmanager import CertManager, restart_controller_with, verified_get
from tests.e2e.kueue.test_singlecluster_baseline_metrics import (
    generated,
    make_workload,
)
from tests.e2e.kueue.test_singlecluster_baseline_prometheus import JOB, Prometheus, _token
from tests.e2e.kueue.util import (
    KUEUE_NS,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    TIMEOUT,
    Cluster,
    Tower,
    eventually,
    free_port,
    is_admitted,
    make_cluster_queue,
    make_flavor_quotas,
    make_local_queue,
    make_resource_flavor,
)

pytestmark = pytest.mark.e2e
GO = "certmanager/metrics_test.go"
DESCRIBE = "Metrics workload is admitted "
SECRET = "kueue-metrics-server-cert"
VERY_LONG_TIMEOUT = 300.0  # util.VeryLongTimeout


@pytest.fixture(scope="module")
def metrics_cert(tower: Tower, api_client: client.ApiClient, user_roles: None) -> Iterator[Path]:
    """The Certificate's Secret, mounted where the controller reads its metrics certificate;
    the suite's controller (its own self-signed certificate) put back afterwards."""
    issued = CertManager(
        client.CoreV1Api(api_client), KUEUE_NS, SECRET, tower.tmp / "metrics-certs", ip="127.0.0.1"
    ).start()
    restart_controller_with(tower, "--metrics-cert-dir", str(issued.folder))
    yield issued.folder
    tower.restart_controller((tower.tmp / "config.yaml").read_text())
    issued.stop()


@pytest.fixture
def token(metrics_cert: Path, api_client: client.ApiClient) -> Iterator[str]:
    """The metrics-reader binding of Kueue's ServiceAccount, and a token of it."""
    tokens = _token(api_client)
    yield next(tokens)
    tokens.close()


@pytest.fixture
def admitted(cluster: Cluster, ns: str, metrics_cert: Path) -> Iterator[str]:
    """BeforeEach: flavor, a generated ClusterQueue (1 cpu, 1Gi) and LocalQueue, a Workload."""
    cluster.create("resourceflavors", make_resource_flavor("test-flavor"))
    cq, lq = generated("test-cq-"), generated("test-lq-")
    cluster.create_active(
        "clusterqueues",
        make_cluster_queue(cq, make_flavor_quotas("test-flavor", cpu="1", memory="1Gi")),
    )
    cluster.create_active("localqueues", make_local_queue(lq, ns, cq), ns)
    cluster.create("workloads", make_workload("test-workload", ns, lq, "1"), ns)
    eventually(
        lambda: is_admitted(cluster.workload("test-workload", ns)), TIMEOUT, "the workload admitted"
    )
    yield cq
    cluster.delete("workloads", "test-workload", ns, strip_finalizers=True)
    cluster.delete_namespace(ns)
    cluster.expect_deleted("clusterqueues", cq)
    cluster.expect_deleted("resourceflavors", "test-flavor")


def expect_metrics(
    tower: Tower, token: str, ca: Path, metrics: list[list[str]], timeout: float = TIMEOUT
) -> None:
    """expectMetricsToBeAvailableWithTimeout: curl --cacert ca.crt with the reader's token."""

    def check() -> bool:
        status, body = verified_get(tower.metrics_port, "/metrics", token, ca)
        assert status == 200, f"GET /metrics: {status} {body[:200]}"
        lines = [ln for ln in body.splitlines() if not ln.startswith("#")]
        missing = [m for m in metrics if not any(all(s in ln for s in m) for ln in lines)]
        assert not missing, f"metrics missing: {missing}"
        return True

    eventually(check, timeout, "the metrics over verified TLS")


@kueue_case(GO, DESCRIBE + "should expose quota reserved workload metric")
def test_the_quota_reserved_metric_over_cert_managers_tls(
    tower: Tower, token: str, metrics_cert: Path, admitted: str
) -> None:
    expect_metrics(
        tower, token, metrics_cert / "ca.crt", [["kueue_quota_reserved_workloads_total", admitted]]
    )


@pytest.fixture
def prometheus(
    tower: Tower, token: str, metrics_cert: Path, tmp_path: Path
) -> Iterator[Prometheus]:
    """Prometheus scraping the controller with the Secret's CA (the ServiceMonitor's tlsConfig
    ca from kueue-metrics-server-cert), under Kueue's job and namespace labels."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("no Prometheus server here: apt-get install prometheus")
    (tmp_path / "token").write_text(token)
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{
            "job_name": JOB, "scheme": "https",
            "tls_config": {"ca_file": str(metrics_cert / "ca.crt")},
            "authorization": {"credentials_file": str(tmp_path / "token")},
            "static_configs": [{"targets": [f"127.0.0.1:{tower.metrics_port}"],
                                "labels": {"namespace": KUEUE_NS}}],
        }],
    }  # fmt: skip
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port("127.0.0.1")
    with open(tmp_path / "prometheus.log", "ab") as log:
        server = subprocess.Popen(
            [binary, f"--config.file={tmp_path / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        api = Prometheus(port)
        eventually(lambda: api.targets() is not None, 60, "Prometheus to answer")
        yield api
    finally:
        server.terminate()
        server.wait(timeout=20)


@kueue_case(GO, DESCRIBE + "should scrape metrics via Prometheus with TLS endpoint")
def test_prometheus_scrapes_over_cert_managers_tls(prometheus: Prometheus, admitted: str) -> None:
    def up() -> bool:
        """util.ExpectPrometheusTargetForKueue: the job's target, up."""
        targets = [t for t in prometheus.targets() if t["labels"].get("job") == JOB]
        assert targets, "no Kueue target"
        assert targets[0]["health"] == "up", targets[0].get("lastError")
        return True

    eventually(up, LONG_TIMEOUT, "the Kueue target up")

    def admitted_metric() -> bool:
        found = prometheus.query(f'kueue_admitted_workloads_total{{cluster_queue="{admitted}"}}')
        assert found["result"], found
        return True

    eventually(admitted_metric, MEDIUM_TIMEOUT, "kueue_admitted_workloads_total in Prometheus")


@kueue_case(GO, DESCRIBE + "should continue to expose metrics after the secret is re-created")
def test_metrics_follow_a_recreated_secret(
    tower: Tower, cluster: Cluster, token: str, metrics_cert: Path, admitted: str
) -> None:
    initial = cluster.core.read_namespaced_secret(SECRET, KUEUE_NS)
    mounted = metrics_cert / "ca.crt"
    first = mounted.read_bytes()
    assert first
    cluster.core.delete_namespaced_secret(SECRET, KUEUE_NS)

    def recreated() -> bool:
        try:
            secret = cluster.core.read_namespaced_secret(SECRET, KUEUE_NS)
        except client.ApiException as err:
            raise AssertionError(f"the Secret: {err.status}") from None
        assert secret.metadata.uid != initial.metadata.uid, "Secret not recreated"
        return True

    eventually(recreated, TIMEOUT, "the Secret re-created")
    eventually(lambda: mounted.read_bytes() not in (b"", first), VERY_LONG_TIMEOUT,
               "the mounted ca.crt changed")  # fmt: skip
    expect_metrics(
        tower, token, mounted, [["kueue_quota_reserved_workloads_total", admitted]],
        VERY_LONG_TIMEOUT,
    )  # fmt: skip
