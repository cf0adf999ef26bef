"""Kueue v0.19.2 test/e2e/sequential/extended/workloadidentifierannotations_test.go, ported case
by case (the LeaderWorkerSet controller played by tests/e2e/kueue/lws.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml
from kubernetes import client

from tests.e2e.conftest import kubectl
from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.lws import (
    GROUP,
    PLURAL,
    SET_NAME,
    VERSION,
    LeaderWorkerSetController,
    make_leader_worker_set,
)
from tests.e2e.kueue.restarts import restart_with
from tests.e2e.kueue.util import (
    CONFIGURATION,
    LONG_TIMEOUT,
    POD_GROUP_LABEL,
    ROOT,
    Cluster,
    Tower,
    condition,
    eventually,
    make_cluster_queue,
    make_flavor_quotas,
    make_local_queue,
    make_resource_flavor,
)

pytestmark = pytest.mark.e2e
GO = "sequential/extended/workloadidentifierannotations_test.go"
GROUP_NAME_ANNOTATION = POD_GROUP_LABEL  # podconstants.GroupNameAnnotation: the same key


@pytest.fixture(scope="module")
def gate_on(tower: Tower) -> Iterator[None]:
    """BeforeAll: Kueue restarted with WorkloadIdentifierAnnotations on; the suite's
    Configuration back after."""
    crd = ROOT / "tests" / "data" / "lws" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
    kubectl("apply", "--server-side", "-f", str(crd))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    document = yaml.safe_load(CONFIGURATION)
    document["featureGates"] = {"WorkloadIdentifierAnnotations": True}
    restart_with(tower, yaml.safe_dump(document))
    yield
    restart_with(tower)


@pytest.fixture
def lws_queue(cluster: Cluster, ns: str, gate_on: None) -> Iterator[str]:
    """BeforeEach (an on-demand flavor, 5 cpu, the queues) and AfterEach; yields the
    LocalQueue's name while the LeaderWorkerSet controller is played."""
    rf, cq, lq = f"rf-{ns}", f"cq-{ns}", f"lq-{ns}"
    cluster.create("resourceflavors", make_resource_flavor(rf, {"instance-type": "on-demand"}))
    cluster.create_active("clusterqueues", make_cluster_queue(cq, make_flavor_quotas(rf, cpu="5")))
    cluster.create_active("localqueues", make_local_queue(lq, ns, cq), ns)
    controller = LeaderWorkerSetController(cluster.api, ns)
    yield lq
    controller.stop()
    cluster.custom.delete_collection_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)
    for wl in cluster.list("workloads", ns):
        cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
    cluster.delete("localqueues", lq, ns)
    cluster.expect_deleted("clusterqueues", cq)
    cluster.expect_deleted("resourceflavors", rf)


@kueue_case(GO, "WorkloadIdentifierAnnotations with WorkloadIdentifierAnnotations enabled should "
                "admit group with 50-character lws name")  # fmt: skip
def test_a_group_of_a_50_character_leaderworkerset_is_admitted_and_named_by_annotation(
    cluster: Cluster, ns: str, lws_queue: str
) -> None:
    name = "a" * 50
    lws = make_leader_worker_set(name, ns, queue=lws_queue, size=3, replicas=1, cpu="200m")
    cluster.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, lws)

    def ready() -> bool:
        status = (
            cluster.custom.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name).get(
                "status"
            )
            or {}
        )
        assert status.get("readyReplicas") == 1, f"readyReplicas {status.get('readyReplicas')}"
        available = condition({"status": status}, "Available")
        assert (available.get("status"), available.get("reason")) == ("True", "AllGroupsReady")
        return True

    eventually(ready, LONG_TIMEOUT, "the LeaderWorkerSet's replicas ready")

    def named_by_annotation() -> bool:
        pods: list[client.V1Pod] = cluster.core.list_namespaced_pod(
            ns, label_selector=f"{SET_NAME}={name}"
        ).items
        assert pods, "no pods"
        for pod in pods:
            assert GROUP_NAME_ANNOTATION in (pod.metadata.annotations or {}), (
                f"{pod.metadata.name}: no {GROUP_NAME_ANNOTATION} annotation"
            )
            assert POD_GROUP_LABEL not in (pod.metadata.labels or {}), (
                f"{pod.metadata.name}: the group name is a label"
            )
        return True

    eventually(named_by_annotation, LONG_TIMEOUT, "the pods' group named by annotation")
