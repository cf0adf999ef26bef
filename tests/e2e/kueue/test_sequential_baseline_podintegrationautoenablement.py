"""Kueue v0.19.2 test/e2e/sequential/baseline/podintegrationautoenablement_test.go, ported:
with only `statefulset` among the frameworks, a StatefulSet's pods are queued (the implicit pod
integration) and a plain pod is left alone. The frameworks are read by Tower's webhook and its
registrations too, so both are restarted with the controller (sequential.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.sequential import configuration_with, restarted
from tests.e2e.kueue.util import (
    MEDIUM_TIMEOUT,
    TIMEOUT,
    Cluster,
    Tower,
    consistently,
    eventually,
    is_admitted,
    make_cluster_queue,
    make_flavor_quotas,
    make_local_queue,
    make_pod,
    make_resource_flavor,
    make_stateful_set,
    stateful_set_workload_name,
)

pytestmark = pytest.mark.e2e
GO = "sequential/baseline/podintegrationautoenablement_test.go"
DESCRIBE = "Auto-Enablement of Pod Integration for Pod-Dependent Frameworks "
SUSPENDING_PARENT = "kueue.x-k8s.io/pod-suspending-parent"
CONSISTENT = 1.0  # util.ConsistentDuration


@pytest.fixture(scope="module")
def statefulset_only(tower: Tower) -> Iterator[None]:
    configuration = yaml.safe_load(configuration_with())
    configuration["integrations"]["frameworks"] = ["statefulset"]
    for _ in restarted(tower, yaml.safe_dump(configuration)):
        # GetKueueConfiguration: what the controller was started with.
        running = yaml.safe_load((tower.tmp / "config.yaml").read_text())
        frameworks = set(running["integrations"]["frameworks"])
        assert "statefulset" in frameworks, frameworks
        assert "pod" not in frameworks, frameworks
        yield


@pytest.fixture
def queues(statefulset_only: None, cluster: Cluster, kubelet_namespaces: set[str]) -> Iterator[str]:
    ns = cluster.create_namespace_from_prefix("e2e-disabled-pod-")
    kubelet_namespaces.add(ns)
    cluster.create("resourceflavors", make_resource_flavor("default"))
    cluster.create_active(
        "clusterqueues",
        make_cluster_queue("cluster-queue", make_flavor_quotas("default", cpu="2", memory="2G")),
    )
    cluster.create_active("localqueues", make_local_queue("main", ns, "cluster-queue"), ns)
    yield ns
    cluster.delete_namespace(ns)
    cluster.expect_deleted("clusterqueues", "cluster-queue", MEDIUM_TIMEOUT)
    cluster.expect_deleted("resourceflavors", "default", MEDIUM_TIMEOUT)


@kueue_case(
    GO, DESCRIBE + "should successfully run StatefulSets when pod integration is auto-enabled"
)
def test_a_stateful_set_runs_with_only_its_framework(cluster: Cluster, queues: str) -> None:
    ns = queues
    sts = make_stateful_set("test-sts", ns, queue="main", replicas=2, cpu="200m")
    created = cluster.apps.create_namespaced_stateful_set(ns, sts)
    wl_name = stateful_set_workload_name(created)
    eventually(lambda: is_admitted(cluster.workload(wl_name, ns)), TIMEOUT, "its Workload admitted")

    def managed() -> bool:
        pods = cluster.core.list_namespaced_pod(ns, label_selector="app=test-sts-pod").items
        assert len(pods) == 2, f"{len(pods)} pods"
        for pod in pods:
            assert SUSPENDING_PARENT in (pod.metadata.annotations or {}), pod.metadata.annotations
        return True

    eventually(managed, TIMEOUT, "2 pods marked by their parent")
    eventually(
        lambda: (
            cluster.apps.read_namespaced_stateful_set("test-sts", ns).status.ready_replicas == 2
        ),
        TIMEOUT,
        "2 replicas ready",
    )


@kueue_case(
    GO, DESCRIBE + "should not manage pods without queue names regardless of auto-enablement"
)
def test_a_plain_pod_is_left_alone(cluster: Cluster, queues: str) -> None:
    ns = queues
    cluster.core.create_namespaced_pod(
        ns, make_pod("plain-pod", ns, args=["netexec"], grace=1, cpu="200m")
    )

    def ungated() -> bool:
        pod = cluster.core.read_namespaced_pod("plain-pod", ns)
        assert not pod.spec.scheduling_gates, pod.spec.scheduling_gates
        return True

    consistently(ungated, CONSISTENT, "the pod ungated")

    def no_workload() -> bool:
        names = [wl["metadata"]["name"] for wl in cluster.list("workloads", ns)]
        assert not [n for n in names if "plain-pod" in n], names
        return True

    consistently(no_workload, CONSISTENT, "no Workload for the pod")
