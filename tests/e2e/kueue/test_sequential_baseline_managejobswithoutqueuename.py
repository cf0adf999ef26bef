"""Kueue v0.19.2 test/e2e/sequential/baseline/managejobswithoutqueuename_test.go, ported: with
manageJobsWithoutQueueName, unlabelled Jobs, pods, Deployments' and StatefulSets' pods in the
test namespace are held by Tower, those in kube-system are not.

Kueue's BeforeAll restarts its manager (webhook and controller) with the field set; Tower's
webhook is its own process reading the same file, so both are restarted (sequential.py). Pods
that are let run land on the real node or on the stand-in node, whose kubelet plays the test's
namespaces and, for the kube-system cases, kube-system."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.sequential import configuration_with, restarted
from tests.e2e.kueue.util import (
    BEHAVIOR_EXIT_FAST,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    QUEUE_LABEL,
    SCHEDULING_GATE,
    TIMEOUT,
    Cluster,
    Tower,
    condition,
    eventually,
    gone,
    has_quota_reservation,
    is_admitted,
    make_cluster_queue,
    make_deployment,
    make_flavor_quotas,
    make_job,
    make_local_queue,
    make_pod,
    make_resource_flavor,
    make_stateful_set,
    stateful_set_workload_name,
)

pytestmark = pytest.mark.e2e
GO = "sequential/baseline/managejobswithoutqueuename_test.go"
WHEN = "ManageJobsWithoutQueueName manageJobsWithoutQueueName=true "
MANAGED_LABEL = "kueue.x-k8s.io/managed"
KUBE_SYSTEM = "kube-system"


@pytest.fixture(scope="module")
def managing(tower: Tower) -> Iterator[None]:
    yield from restarted(tower, configuration_with(manageJobsWithoutQueueName=True))


@pytest.fixture
def queues(managing: None, cluster: Cluster, ns: str) -> Iterator[None]:
    """BeforeEach: flavor `default`, ClusterQueue cluster-queue (2 cpu, 2G), LocalQueue main."""
    cluster.create("resourceflavors", make_resource_flavor("default"))
    cluster.create_active(
        "clusterqueues",
        make_cluster_queue("cluster-queue", make_flavor_quotas("default", cpu="2", memory="2G")),
    )
    cluster.create_active("localqueues", make_local_queue("main", ns, "cluster-queue"), ns)
    yield
    cluster.delete_namespace(ns)
    cluster.expect_deleted("clusterqueues", "cluster-queue", MEDIUM_TIMEOUT)
    cluster.expect_deleted("resourceflavors", "default", MEDIUM_TIMEOUT)


@pytest.fixture
def kube_system(kubelet_namespaces: set[str]) -> Iterator[str]:
    """kube-system's pods played by the stand-in kubelet where they land on its node."""
    kubelet_namespaces.add(KUBE_SYSTEM)
    yield KUBE_SYSTEM
    kubelet_namespaces.discard(KUBE_SYSTEM)


def unsuspended_job(name: str, ns: str) -> dict:
    """testingjob.MakeJob(name, ns).Suspend(false).Image(agnhost, BehaviorExitFast)."""
    job = make_job(name, ns, args=BEHAVIOR_EXIT_FAST)
    job["spec"]["suspend"] = False
    return job


def suspended(cluster: Cluster, name: str, ns: str) -> bool:
    return bool(cluster.batch.read_namespaced_job(name, ns).spec.suspend)


def job_workload(cluster: Cluster, job: client.V1Job, ns: str) -> dict:
    name = cluster.workload_for_job(job, ns)
    return eventually(lambda: cluster.workload(name, ns), MEDIUM_TIMEOUT, f"Workload {name}")


def has_gate(pod: Any) -> bool:
    return any(g.name == SCHEDULING_GATE for g in pod.spec.scheduling_gates or [])


def pods_of(cluster: Cluster, ns: str, owner: dict) -> list[Any]:
    app = owner["spec"]["selector"]["matchLabels"]["app"]
    return list(cluster.core.list_namespaced_pod(ns, label_selector=f"app={app}").items)


def expect_gated_and_managed(pod: Any) -> None:
    assert pod.spec.scheduling_gates, f"pod {pod.metadata.name} is not gated"
    labels = pod.metadata.labels or {}
    assert labels.get(MANAGED_LABEL) == "true", f"pod {pod.metadata.name}: labels {labels}"


@kueue_case(GO, WHEN + "should not suspend a job")
def test_a_job_goes_to_the_default_local_queue(cluster: Cluster, ns: str, queues: None) -> None:
    cluster.create_active("localqueues", make_local_queue("default", ns, "cluster-queue"), ns)
    job = cluster.batch.create_namespaced_job(ns, unsuspended_job("test-job", ns))
    eventually(lambda: not suspended(cluster, "test-job", ns), TIMEOUT, "the job not suspended")

    def labelled() -> bool:
        labels = cluster.batch.read_namespaced_job("test-job", ns).metadata.labels or {}
        assert labels.get(QUEUE_LABEL) == "default", labels
        return True

    eventually(labelled, TIMEOUT, "the queue-name label 'default'")

    def admitted() -> bool:
        wl = job_workload(cluster, job, ns)
        assert (wl.get("status") or {}).get("admission"), "no admission"
        assert is_admitted(wl), (wl.get("status") or {}).get("conditions")
        return True

    eventually(admitted, TIMEOUT, "the job's Workload admitted")


@kueue_case(GO, WHEN + "should suspend a job")
def test_a_job_is_held_until_it_names_a_queue(cluster: Cluster, ns: str, queues: None) -> None:
    job = cluster.batch.create_namespaced_job(ns, unsuspended_job("test-job", ns))
    eventually(lambda: suspended(cluster, "test-job", ns), TIMEOUT, "the job suspended")

    def relabel() -> bool:
        current = cluster.batch.read_namespaced_job("test-job", ns)
        current.metadata.labels = {**(current.metadata.labels or {}), QUEUE_LABEL: "main"}
        cluster.batch.replace_namespaced_job("test-job", ns, current)
        return True

    eventually(relabel, TIMEOUT, "the queue-name label set")
    eventually(
        lambda: not suspended(cluster, "test-job", ns), MEDIUM_TIMEOUT, "the job unsuspended"
    )
    eventually(
        lambda: (job_workload(cluster, job, ns).get("status") or {}).get("admission"),
        MEDIUM_TIMEOUT,
        "the job's Workload admitted",
    )


@kueue_case(GO, WHEN + "should suspend a pod created in the test namespace")
def test_a_pod_in_the_test_namespace_is_gated(cluster: Cluster, ns: str, queues: None) -> None:
    pod = make_pod("test-pod", ns, args=["netexec"], grace=1)
    cluster.core.create_namespaced_pod(ns, pod)

    def gated() -> bool:
        expect_gated_and_managed(cluster.core.read_namespaced_pod("test-pod", ns))
        return True

    eventually(gated, TIMEOUT, "the pod gated and labelled managed")


@kueue_case(GO, WHEN + "should NOT suspend a pod created in the kube-system namespace")
def test_a_pod_in_kube_system_runs(cluster: Cluster, queues: None, kube_system: str) -> None:
    pod = make_pod("test-pod", kube_system, args=["netexec"], grace=1, cpu="1")
    for part in ("requests", "limits"):
        pod["spec"]["containers"][0]["resources"][part]["memory"] = "2Gi"
    created = cluster.core.create_namespaced_pod(kube_system, pod)
    try:
        eventually(
            lambda: (
                cluster.core.read_namespaced_pod("test-pod", kube_system).status.phase == "Running"
            ),
            TIMEOUT,
            "the pod running",
        )
    finally:
        cluster.core.delete_namespaced_pod("test-pod", kube_system)
    eventually(
        lambda: (
            gone(lambda: cluster.core.read_namespaced_pod("test-pod", kube_system))
            or cluster.core.read_namespaced_pod("test-pod", kube_system).metadata.uid
            != created.metadata.uid
        ),
        MEDIUM_TIMEOUT,
        "the pod deleted",
    )


def big_pods(owner: dict) -> dict:
    """.RequestAndLimit(cpu, 1).RequestAndLimit(memory, 2Gi)."""
    resources = {"cpu": "1", "memory": "2Gi"}
    container = owner["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": dict(resources), "limits": dict(resources)}
    return owner


@kueue_case(GO, WHEN + "should suspend the pods of a deployment created in the test namespace")
def test_a_deployments_pods_are_gated(cluster: Cluster, ns: str, queues: None) -> None:
    deploy = big_pods(make_deployment("test-deploy", ns, replicas=2))
    cluster.apps.create_namespaced_deployment(ns, deploy)

    def gated() -> bool:
        pods = pods_of(cluster, ns, deploy)
        assert len(pods) == 2, f"{len(pods)} pods"
        for pod in pods:
            expect_gated_and_managed(pod)
        return True

    eventually(gated, TIMEOUT, "the deployment's 2 pods gated")


@kueue_case(
    GO, WHEN + "should not suspend the pods created by a deployment in the kube-system namespace"
)
def test_a_deployments_pods_in_kube_system_run(
    cluster: Cluster, queues: None, kube_system: str
) -> None:
    deploy = big_pods(make_deployment("test-deploy", kube_system, replicas=2))
    cluster.apps.create_namespaced_deployment(kube_system, deploy)
    try:

        def running() -> bool:
            pods = pods_of(cluster, kube_system, deploy)
            assert len(pods) == 2, f"{len(pods)} pods"
            assert all(p.status.phase == "Running" for p in pods), [p.status.phase for p in pods]
            return True

        eventually(running, MEDIUM_TIMEOUT, "the deployment's pods running")
    finally:
        cluster.apps.delete_namespaced_deployment(
            "test-deploy", kube_system, propagation_policy="Background"
        )
    eventually(lambda: not pods_of(cluster, kube_system, deploy), LONG_TIMEOUT, "no pods left")


@kueue_case(
    GO,
    WHEN + "should suspend the pods created by a StatefulSet in the test namespace without "
    "queue-name label",
)
def test_a_stateful_sets_pods_wait_for_a_queue_name(
    cluster: Cluster, ns: str, queues: None
) -> None:
    sts = make_stateful_set("sts", ns, replicas=3, cpu="200m")
    created = cluster.apps.create_namespaced_stateful_set(ns, sts)
    wl_name = stateful_set_workload_name(created)

    def not_reserved() -> bool:
        wl = cluster.workload(wl_name, ns)
        assert wl is not None, f"no Workload {wl_name}"
        assert condition(wl, "QuotaReserved").get("status") == "False", condition(
            wl, "QuotaReserved"
        )
        return True

    eventually(not_reserved, MEDIUM_TIMEOUT, "the Workload created, no quota reserved")
    read = lambda: cluster.apps.read_namespaced_stateful_set("sts", ns)  # noqa: E731
    eventually(lambda: not read().status.ready_replicas, MEDIUM_TIMEOUT, "no replica ready")

    def one_gated() -> bool:
        pods = pods_of(cluster, ns, sts)
        assert len(pods) == 1, f"{len(pods)} pods"
        assert pods[0].status.phase == "Pending", pods[0].status.phase
        assert has_gate(pods[0]), pods[0].spec.scheduling_gates
        return True

    eventually(one_gated, MEDIUM_TIMEOUT, "one pod, pending and gated")

    def relabel() -> bool:
        current = read()
        current.metadata.labels = {**(current.metadata.labels or {}), QUEUE_LABEL: "main"}
        cluster.apps.replace_namespaced_stateful_set("sts", ns, current)
        return True

    eventually(relabel, TIMEOUT, "the queue-name label set")
    eventually(lambda: is_admitted(cluster.workload(wl_name, ns)), MEDIUM_TIMEOUT, "admitted")
    eventually(lambda: read().status.ready_replicas == 3, MEDIUM_TIMEOUT, "3 replicas ready")

    def running() -> bool:
        pods = pods_of(cluster, ns, sts)
        assert len(pods) == 3, f"{len(pods)} pods"
        for pod in pods:
            assert pod.status.phase == "Running", pod.status.phase
            assert not has_gate(pod), pod.spec.scheduling_gates
        return True

    eventually(running, MEDIUM_TIMEOUT, "3 pods running, ungated")
    assert has_quota_reservation(cluster.workload(wl_name, ns))


@kueue_case(
    GO,
    WHEN + "should not suspend the pods created by a StatefulSet in the kube-system namespace",
)
def test_a_stateful_sets_pods_in_kube_system_run(
    cluster: Cluster, queues: None, kube_system: str
) -> None:
    sts = big_pods(make_stateful_set("test-sts", kube_system, replicas=2))
    cluster.apps.create_namespaced_stateful_set(kube_system, sts)
    try:

        def ready() -> bool:
            pods = pods_of(cluster, kube_system, sts)
            assert len(pods) == 2, f"{len(pods)} pods"
            for pod in pods:
                conditions = {c.type: c.status for c in pod.status.conditions or []}
                assert conditions.get("Ready") == "True", conditions
            return True

        eventually(ready, TIMEOUT, "the StatefulSet's 2 pods ready")
    finally:
        cluster.apps.delete_namespaced_stateful_set("test-sts", kube_system)
    eventually(lambda: not pods_of(cluster, kube_system, sts), LONG_TIMEOUT, "no pods left")
