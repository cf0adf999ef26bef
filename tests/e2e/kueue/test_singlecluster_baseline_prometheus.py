"""Kueue v0.19.2 test/e2e/singlecluster/baseline/prometheus_test.go, ported case by case.

Kueue's suite installs the Prometheus operator, whose ServiceMonitor makes Prometheus scrape
the controller's metrics Service (job `kueue-controller-manager-metrics-service`, label
`namespace` = Kueue's namespace). Tower's controller runs on this machine, so a Prometheus
server runs here too (Debian's `prometheus`, skipped where it is not installed), scraping it
over HTTPS with a token of the ServiceAccount bound to kueue-metrics-reader, under the same
job and namespace labels. The cases then ask Prometheus, as Kueue's do, over its HTTP API.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.util import (
    KUEUE_NS,
    LONG_TIMEOUT,
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
GO = "singlecluster/baseline/prometheus_test.go"
JOB = "kueue-controller-manager-metrics-service"  # util.DefaultMetricsServiceName
SERVICE_ACCOUNT = "kueue-controller-manager"
METRICS_READER = "kueue-metrics-reader"
VERY_LONG_TIMEOUT = 300.0  # util.VeryLongTimeout


class Prometheus:
    """prometheusv1.API: the server's HTTP API on loopback."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}/api/v1"

    def _get(self, path: str) -> Any:
        try:
            with urllib.request.urlopen(self.base + path, timeout=10) as answer:
                body = json.load(answer)
        except OSError as err:  # not listening yet: asked again
            raise AssertionError(f"Prometheus: {err}") from None
        assert body.get("status") == "success", body
        return body["data"]

    def targets(self) -> list[dict]:
        return list(self._get("/targets")["activeTargets"])

    def query(self, promql: str) -> dict:
        return dict(self._get("/query?" + urllib.parse.urlencode({"query": promql})))


def _token(api_client: client.ApiClient) -> Iterator[str]:
    core = client.CoreV1Api(api_client)
    rbac = client.RbacAuthorizationV1Api(api_client)
    try:
        core.create_namespaced_service_account(KUEUE_NS, {"metadata": {"name": SERVICE_ACCOUNT}})
    except client.ApiException as err:
        if err.status != 409:
            raise
    binding = "prometheus-metrics-reader"
    rbac.create_cluster_role_binding({
        "metadata": {"name": binding},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": KUEUE_NS}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": METRICS_READER},
    })  # fmt: skip
    try:
        yield core.create_namespaced_service_account_token(
            SERVICE_ACCOUNT, KUEUE_NS, {"spec": {"expirationSeconds": 3600}}
        ).status.token
    finally:
        rbac.delete_cluster_role_binding(binding)


@pytest.fixture(scope="module")
def prometheus(
    api_client: client.ApiClient,
    tower: Tower,
    user_roles: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Prometheus]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("no Prometheus server here: apt-get install prometheus")
    tmp: Path = tmp_path_factory.mktemp("prometheus")
    tokens = _token(api_client)
    (tmp / "token").write_text(next(tokens))
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{
            "job_name": JOB,
            "scheme": "https",
            "tls_config": {"insecure_skip_verify": True},
            "authorization": {"credentials_file": str(tmp / "token")},
            "static_configs": [{"targets": [f"127.0.0.1:{tower.metrics_port}"],
                                "labels": {"namespace": KUEUE_NS}}],
        }],
    }  # fmt: skip
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port("127.0.0.1")
    with open(tmp / "prometheus.log", "ab") as log:
        server = subprocess.Popen(
            [binary, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        api = Prometheus(port)
        eventually(lambda: api.targets() is not None, 60, "Prometheus to answer")
        yield api
    finally:
        server.terminate()
        server.wait(timeout=20)
        tokens.close()


@kueue_case(GO, "Prometheus should discover Kueue target and report it as up")
def test_discovers_the_target_and_reports_it_up(prometheus: Prometheus) -> None:
    """util.ExpectPrometheusTargetForKueue."""

    def up() -> bool:
        active = prometheus.targets()
        found = [t for t in active
                 if t["labels"].get("job") == JOB and t["labels"].get("namespace") == KUEUE_NS]  # fmt: skip
        assert found, f"Kueue target not found. Active targets: {active}"
        assert found[0]["health"] == "up", found[0]
        return True

    eventually(up, VERY_LONG_TIMEOUT, "the Kueue target up")


@kueue_case(GO, "Prometheus should scrape kueue_build_info metric via PromQL")
def test_scrapes_build_info(prometheus: Prometheus) -> None:
    def scraped() -> bool:
        result = prometheus.query("kueue_build_info")
        assert result["resultType"] == "vector", result
        assert result["result"], "an empty vector"
        assert result["result"][0]["metric"]["__name__"] == "kueue_build_info"
        return True

    eventually(scraped, VERY_LONG_TIMEOUT, "kueue_build_info in Prometheus")


@kueue_case(GO, "Prometheus should report workload admission metrics via PromQL")
def test_reports_admission_metrics(prometheus: Prometheus, cluster: Cluster, ns: str) -> None:
    flavor = f"prom-test-flavor-{ns}"
    cluster.create("resourceflavors", make_resource_flavor(flavor))
    cq = cluster.create("clusterqueues", {**make_cluster_queue(
        "", make_flavor_quotas(flavor, cpu="1", memory="1Gi")),
        "metadata": {"generateName": "prom-test-cq-"}})["metadata"]["name"]  # fmt: skip
    try:
        _admission_metric(prometheus, cluster, ns, cq)
    finally:
        for wl in cluster.list("workloads", ns):
            cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
        cluster.expect_deleted("clusterqueues", cq)
        cluster.expect_deleted("resourceflavors", flavor)


def _admission_metric(prometheus: Prometheus, cluster: Cluster, ns: str, cq: str) -> None:
    eventually(lambda: (cluster.get("clusterqueues", cq).get("status") or {}).get("conditions"),
               TIMEOUT, "the ClusterQueue's status")  # fmt: skip
    lq = cluster.create("localqueues", {**make_local_queue("", ns, cq),
                                        "metadata": {"generateName": "prom-test-lq-", "namespace": ns}},
                        ns)["metadata"]["name"]  # fmt: skip
    resources = {"cpu": "1"}
    container = {
        "name": "c",
        "image": "pause",
        "resources": {"requests": resources, "limits": resources},
    }
    cluster.create("workloads", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "prom-test-workload", "namespace": ns},
        "spec": {"queueName": lq, "podSets": [{"name": "ps1", "count": 1, "template": {
            "spec": {"restartPolicy": "Never", "containers": [container]}}}]},
    }, ns)  # fmt: skip
    eventually(lambda: is_admitted(cluster.workload("prom-test-workload", ns)), LONG_TIMEOUT,
               "the workload admitted")  # fmt: skip

    def reported() -> bool:
        result = prometheus.query(f'kueue_admitted_workloads_total{{cluster_queue="{cq}"}}')
        assert result["resultType"] == "vector", result
        assert result["result"], "an empty vector"
        return True

    eventually(reported, VERY_LONG_TIMEOUT, "kueue_admitted_workloads_total in Prometheus")
