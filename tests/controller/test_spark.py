"""Kueue's SparkApplication example, applied unchanged with the Spark operator's CRD and Kueue's
single-ClusterQueue setup: suspended at create, a driver and two executors as Kueue's podSets,
started with the flavor's nodeSelector on each role, waiting with a reason when the quota is
gone, finished from its application state. The Spark operator does not run here: the test
sets the status it would. A controller asked for the integration without its feature gate
refuses to start, as Kueue's does."""

from __future__ import annotations

import copy
import signal
from pathlib import Path
from typing import Any

import pytest

from certs import kube as certs_kube
from extender.core.api.models import CLUSTER_QUEUE_ANNOTATION
from extender.core.jobframework import registry
from extender.kube.api import resources as r
from extender.kube.api.client import ApiError
from tests import yamlc
from tests.controller.conftest import CRDS, controller_process, eventually
from tests.controller.test_kubeflow import condition, load
from tests.servers import start_webhook
from tests.waiting import until_one_waits

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLES = DATA / "kueue-v0.19.2" / "examples"
SPARK = "sparkoperator.k8s.io/sparkapplication"
APPS = r.resource_of(registry.ADAPTERS[SPARK])
FRAMEWORKS = ("batch/job", SPARK)


@pytest.fixture(scope="module")
def spark_webhook(webhook, tmp_path_factory):
    """A webhook for the module with the Spark integration on (it is not in Kueue's default
    set, which the session's webhook serves)."""
    server = start_webhook(
        webhook.certs,
        tmp_path_factory.mktemp("spark-metrics"),
        "--integrations",
        ",".join(FRAMEWORKS),
        workers=1,
    )
    yield server
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(timeout=20)


@pytest.fixture
def spark_cluster(cluster, webhook, spark_webhook):
    ca = (webhook.certs / "ca.crt").read_bytes()
    certs_kube.install(cluster.admin.api_client, spark_webhook.url, ca, FRAMEWORKS)
    crd = DATA / "spark-operator" / "sparkoperator.k8s.io_sparkapplications.yaml"
    cluster.admin.create(CRDS, yamlc.safe_load(crd.read_text()))
    cluster.apply(*load(EXAMPLES / "single-clusterqueue-setup.yaml"))
    cluster.admin.patch(
        r.RESOURCE_FLAVORS, "default-flavor", {"spec": {"nodeLabels": {"instance-type": "spot"}}}
    )
    return cluster


def application_state(cluster: Any, name: str, state: str, executors: dict[str, str]) -> None:
    """The status the Spark operator writes as the driver and the executors run."""
    status = {
        "applicationState": {"state": state},
        "executorState": executors,
        "driverInfo": {"podName": f"{name}-driver"},
    }
    cluster.admin.patch(APPS, name, {"status": status}, "default", subresource="status")


def started(cluster: Any, name: str) -> dict[str, Any] | None:
    app = cluster.get("sparkapplications", name, "default")
    return app if app is not None and app["spec"].get("suspend") is False else None


def test_kueues_example_runs_as_kueue_documents(spark_cluster, start_controller):
    cluster = spark_cluster
    start_controller(integrations=FRAMEWORKS)
    [example] = load(EXAMPLES / "jobs" / "sample-sparkapplication.yaml")
    name = example["metadata"]["name"]

    created = cluster.admin.create(APPS, example, "default")
    assert created["spec"]["suspend"] is True
    workload = eventually(lambda: cluster.workload_of(created), what="its Workload")
    assert workload["metadata"]["name"].startswith(f"sparkapplication-{name}-")
    pod_sets = workload["spec"]["podSets"]
    assert [(p["name"], p["count"]) for p in pod_sets] == [("driver", 1), ("executor", 2)]
    driver_container = pod_sets[0]["template"]["spec"]["containers"][0]
    assert driver_container["name"] == "spark-kubernetes-driver"
    assert driver_container["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}

    running = eventually(lambda: started(cluster, name), what="the application started")
    for role in ("driver", "executor"):
        assert running["spec"][role]["nodeSelector"] == {"instance-type": "spot"}
        assert running["spec"][role]["labels"]["kueue.x-k8s.io/podset"] == role
    application_state(cluster, name, "RUNNING", {"e1": "RUNNING", "e2": "RUNNING"})

    def another(i: int) -> dict[str, Any]:
        again = copy.deepcopy(example)
        again["metadata"]["name"] = f"{name}-{i}"
        return cluster.admin.create(APPS, again, "default")

    made, message = until_one_waits(another, cluster.workload_of, most=10)  # 3 cpu each
    assert "free in cluster-queue" in message, message
    waiting = made["metadata"]["name"]
    assert cluster.get("sparkapplications", waiting, "default")["spec"]["suspend"] is True

    # The operator says it completed: the Workload is Finished, the waiting one starts.
    application_state(cluster, name, "COMPLETED", {"e1": "COMPLETED", "e2": "COMPLETED"})
    finished = eventually(
        lambda: (
            condition(cluster.workload_of(created), "Finished").get("status") == "True"
            and cluster.workload_of(created)
        ),
        what="the Workload Finished",
    )
    assert condition(finished, "Finished")["reason"] == "Succeeded"
    eventually(lambda: started(cluster, waiting), what="the waiting copy started")


def test_a_client_mode_application_is_refused_naming_the_field(spark_cluster):
    [example] = load(EXAMPLES / "jobs" / "sample-sparkapplication.yaml")
    example["spec"]["mode"] = "client"
    with pytest.raises(ApiError) as refused:
        spark_cluster.admin.create(APPS, example, "default")
    assert "spec.mode: 'client': only Cluster mode is supported" in str(refused.value)


def test_the_integration_without_its_feature_gate_is_refused_at_start(cluster, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        f"integrations:\n  frameworks: [batch/job, {SPARK}]\n"
    )
    proc = controller_process(cluster, "--config", str(config), "--no-leader-elect")
    assert proc.wait(timeout=30) != 0
    said = proc.stdout.read().decode()
    assert f"integration {SPARK} is an alpha feature" in said, said
    assert "SparkApplicationIntegration" in said


def test_a_deactivated_application_is_suspended_and_its_roles_put_back(
    spark_cluster, start_controller
):
    cluster = spark_cluster
    start_controller(integrations=FRAMEWORKS)
    [example] = load(EXAMPLES / "jobs" / "sample-sparkapplication.yaml")
    example["spec"]["driver"]["labels"] = {"team": "pi"}
    example["spec"]["nodeSelector"] = {"zone": "a"}  # moved onto both roles at start
    name = example["metadata"]["name"]
    created = cluster.admin.create(APPS, example, "default")
    running = eventually(lambda: started(cluster, name), what="the application started")
    assert "nodeSelector" not in running["spec"]
    assert running["spec"]["driver"]["nodeSelector"] == {"zone": "a", "instance-type": "spot"}
    assert running["spec"]["driver"]["labels"]["team"] == "pi"
    application_state(cluster, name, "RUNNING", {"e1": "RUNNING", "e2": "RUNNING"})

    workload = cluster.workload_of(created)
    cluster.admin.patch(
        r.WORKLOADS, workload["metadata"]["name"], {"spec": {"active": False}}, "default"
    )

    def stopped() -> dict[str, Any] | None:
        """Suspended, then (a second patch) its roles put back."""
        app = cluster.get("sparkapplications", name, "default")
        if app is None or app["spec"].get("suspend") is not True:
            return None
        restored = CLUSTER_QUEUE_ANNOTATION not in (app["metadata"].get("annotations") or {})
        return app if restored else None

    app = eventually(stopped, what="the application suspended and restored")
    # As Kueue's RestorePodSetsInfo: each role's placement from the Workload's podSet (the
    # role's own nodeSelector, none here; the global one stays moved), its labels kept.
    for role in ("driver", "executor"):
        assert "nodeSelector" not in app["spec"][role], app["spec"][role]
        assert "kueue.x-k8s.io/podset" not in (app["spec"][role].get("labels") or {})
    assert app["spec"]["driver"]["labels"] == {"team": "pi"}
    assert app["spec"]["executor"]["instances"] == 2

    # Once the operator no longer runs it, the quota is given back.
    application_state(cluster, name, "SUSPENDED", {})
    eventually(
        lambda: condition(cluster.workload_of(created), "QuotaReserved").get("status") == "False",
        what="the quota given back",
    )


def test_a_running_application_grown_past_its_admission_is_put_back_to_its_admitted_size(
    spark_cluster, start_controller
):
    """More executors on a running application: the webhook suspends it in the very update
    (its operator never runs the new size); stopping it restores each role from the Workload,
    the executors' count included (Kueue's RestorePodSetsInfo sets spec.executor.instances),
    so it matches its admission again and runs on at the admitted size."""
    cluster = spark_cluster
    start_controller(integrations=FRAMEWORKS)
    [example] = load(EXAMPLES / "jobs" / "sample-sparkapplication.yaml")
    name = example["metadata"]["name"]
    created = cluster.admin.create(APPS, example, "default")
    eventually(lambda: started(cluster, name), what="the application started")
    application_state(cluster, name, "RUNNING", {"e1": "RUNNING", "e2": "RUNNING"})
    first = cluster.workload_of(created)

    patched = cluster.admin.patch(APPS, name, {"spec": {"executor": {"instances": 20}}}, "default")
    assert patched["spec"]["suspend"] is True, patched["spec"]

    def back() -> dict[str, Any] | None:
        app = started(cluster, name)
        return app if app is not None and app["spec"]["executor"]["instances"] == 2 else None

    eventually(back, what="the application running again at its admitted 2 executors")
    now = cluster.workload_of(created)
    assert now["metadata"]["uid"] == first["metadata"]["uid"]
    assert {p["name"]: p["count"] for p in now["spec"]["podSets"]} == {"driver": 1, "executor": 2}
