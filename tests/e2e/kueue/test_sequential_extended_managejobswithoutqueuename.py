"""Kueue v0.19.2 test/e2e/sequential/extended/managejobswithoutqueuename_test.go, ported: with
manageJobsWithoutQueueName, an unlabelled AppWrapper, JobSet or LeaderWorkerSet is held until
it names a queue, and what it makes (Jobs, a JobSet, a Deployment, pods) is its own, never
queued again; with the test namespace outside managedJobsNamespaceSelector, or without the
JobSet integration, nothing is held. The operators are played (operators.py, lws.py); Tower's
webhook reads the Configuration too, so both are restarted (sequential.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.operators import (
    APPWRAPPER,
    JOBSET,
    create,
    get,
    install_operators_crds,
    operators,
    workload_of,
)
from tests.e2e.kueue.sequential import configuration_with, restarted
from tests.e2e.kueue.test_singlecluster_extended_leaderworkerset import Lws, lws_crd
from tests.e2e.kueue.util import (
    AGNHOST,
    BEHAVIOR_EXIT_FAST,
    CONFIGURATION,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    QUEUE_LABEL,
    SCHEDULING_GATE,
    TIMEOUT,
    Cluster,
    Tower,
    condition,
    consistently,
    eventually,
    gone,
    is_admitted,
    make_cluster_queue,
    make_deployment,
    make_flavor_quotas,
    make_job,
    make_local_queue,
    make_resource_flavor,
)

pytestmark = pytest.mark.e2e
GO = "sequential/extended/managejobswithoutqueuename_test.go"
WHEN = "ManageJobsWithoutQueueName manageJobsWithoutQueueName=true "
__all__ = ["lws_crd"]  # a fixture, used by name
TOWER_NS = "tower-system"  # where Tower runs, as Kueue in kueue-system


@pytest.fixture(scope="module")
def crds(tower: Tower, lws_crd: None) -> None:
    install_operators_crds(tower)


@pytest.fixture
def managing(crds: None, tower: Tower) -> Iterator[None]:
    """The first Describe's BeforeAll (once per test here, so each Describe can have its own)."""
    yield from restarted(tower, configuration_with(manageJobsWithoutQueueName=True))


def make_queues(cluster: Cluster, ns: str) -> None:
    cluster.create("resourceflavors", make_resource_flavor("default"))
    cluster.create_active(
        "clusterqueues",
        make_cluster_queue("cluster-queue", make_flavor_quotas("default", cpu="2", memory="2G")),
    )
    cluster.create_active("localqueues", make_local_queue("main", ns, "cluster-queue"), ns)


def drop_queues(cluster: Cluster, ns: str) -> None:
    for group, version, plural in (APPWRAPPER, JOBSET):
        cluster.custom.delete_collection_namespaced_custom_object(group, version, ns, plural)
    for wl in cluster.list("workloads", ns):
        cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
    cluster.delete_namespace(ns)
    cluster.expect_deleted("clusterqueues", "cluster-queue", MEDIUM_TIMEOUT)
    cluster.expect_deleted("resourceflavors", "default", MEDIUM_TIMEOUT)


@pytest.fixture
def queues(managing: None, cluster: Cluster, ns: str) -> Iterator[str]:
    make_queues(cluster, ns)
    try:
        with operators(cluster, ns):
            yield ns
    finally:  # the queues go even when the played operators failed
        drop_queues(cluster, ns)


def appwrapper(name: str, ns: str, component: dict, queue: str | None = None) -> dict:
    """awtesting.MakeAppWrapper(name, ns).Component(component).Suspend(false)[.Queue(q)]."""
    labels = {QUEUE_LABEL: queue} if queue else {}
    return {"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
            "metadata": {"name": name, "namespace": ns, "labels": labels, "annotations": {}},
            "spec": {"suspend": False, "components": [component]}}  # fmt: skip


def jobset(
    name: str, ns: str, replicas: int, pods: int, *, jobs_queue: str | None = None,
    queue: str | None = None, cpu: str = "300m", memory: str = "300Mi",
    replicated: tuple[str, ...] = ("replicated-job-1",),
) -> dict:  # fmt: skip
    """testingjobset.MakeJobSet(...).ReplicatedJobs(agnhost exiting fast, Labels).SetTypeMeta()
    .Suspend(false).RequestAndLimit(...)[.Queue(q)]."""
    resources = {"cpu": cpu, "memory": memory} if cpu else {}
    container = {"name": "c", "image": AGNHOST, "args": BEHAVIOR_EXIT_FAST,
                 "resources": {"requests": resources, "limits": dict(resources)}}  # fmt: skip
    job_labels = {QUEUE_LABEL: jobs_queue} if jobs_queue else {}
    template = {"metadata": {"labels": job_labels},
                "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0,
                         "template": {"spec": {"restartPolicy": "Never",
                                               "terminationGracePeriodSeconds": 0,
                                               "containers": [container]}}}}  # fmt: skip
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": ns,
                         "labels": {QUEUE_LABEL: queue} if queue else {}},
            "spec": {"suspend": False, "replicatedJobs": [
                {"name": r, "replicas": replicas, "template": template} for r in replicated]}}  # fmt: skip


def suspend_is(cluster: Cluster, gvp: tuple[str, str, str], ns: str, name: str, want: bool) -> bool:
    try:  # g.Expect(k8sClient.Get(...)).To(Succeed()): retried until it is there
        got = get(cluster, gvp, ns, name)["spec"].get("suspend")
    except client.ApiException as err:
        raise AssertionError(f"{gvp[2]}/{name}: {err.status} {err.reason}") from None
    assert bool(got) is want, f"{gvp[2]}/{name}: suspend {got}"
    return True


def relabel(cluster: Cluster, gvp: tuple[str, str, str], ns: str, name: str) -> None:
    """Setting the queue-name label to main (Get, Update, again on a conflict)."""

    def write() -> bool:
        obj = get(cluster, gvp, ns, name)
        obj["metadata"].setdefault("labels", {})[QUEUE_LABEL] = "main"
        cluster.custom.replace_namespaced_custom_object(*gvp[:2], ns, gvp[2], name, obj)
        return True

    eventually(write, TIMEOUT, f"{name}'s queue-name label set")


def held_then_started(cluster: Cluster, gvp: tuple[str, str, str], ns: str, name: str) -> None:
    eventually(lambda: suspend_is(cluster, gvp, ns, name, True), TIMEOUT, f"{name} suspended")
    relabel(cluster, gvp, ns, name)
    eventually(lambda: suspend_is(cluster, gvp, ns, name, False), MEDIUM_TIMEOUT,
               f"{name} unsuspended")  # fmt: skip


def phase_succeeded(cluster: Cluster, ns: str, name: str) -> bool:
    phase = (get(cluster, APPWRAPPER, ns, name).get("status") or {}).get("phase")
    assert phase == "Succeeded", f"phase {phase}"
    return True


def jobset_completed(cluster: Cluster, ns: str, name: str) -> bool:
    try:
        state = (get(cluster, JOBSET, ns, name).get("status") or {}).get("terminalState")
    except client.ApiException as err:
        raise AssertionError(f"jobsets/{name}: {err.status} {err.reason}") from None
    assert state == "Completed", f"terminalState {state}"
    return True


@kueue_case(GO, WHEN + "should not suspend child jobs of admitted jobs")
def test_an_appwrappers_job_runs_unqueued(cluster: Cluster, queues: str) -> None:
    ns = queues
    job = make_job("job-0", ns, args=BEHAVIOR_EXIT_FAST, requests={"cpu": "200m"},
                   parallelism=2, completions=2)  # fmt: skip
    job["spec"]["suspend"] = False
    create(cluster, APPWRAPPER, ns, appwrapper("aw-child", ns, {"template": job}))
    held_then_started(cluster, APPWRAPPER, ns, "aw-child")
    eventually(lambda: phase_succeeded(cluster, ns, "aw-child"), LONG_TIMEOUT, "Succeeded")


@kueue_case(GO, WHEN + "should not suspend grandchildren jobs of admitted jobs")
def test_an_appwrappers_jobset_runs_unqueued(cluster: Cluster, queues: str) -> None:
    ns = queues
    component = {"template": jobset("job-set", ns, replicas=2, pods=1)}
    create(cluster, APPWRAPPER, ns, appwrapper("aw-grandchild", ns, component))
    held_then_started(cluster, APPWRAPPER, ns, "aw-grandchild")
    eventually(lambda: phase_succeeded(cluster, ns, "aw-grandchild"), LONG_TIMEOUT, "Succeeded")


@kueue_case(
    GO,
    WHEN + "should not admit child jobs and jobset even if the child job and jobset has a "
    "queue-name label",
)
def test_an_appwrappers_labelled_jobset_is_not_queued_again(cluster: Cluster, queues: str) -> None:
    ns = queues
    inner = jobset("job-set", ns, replicas=2, pods=1, jobs_queue="main", queue="main")
    create(cluster, APPWRAPPER, ns, appwrapper("aw", ns, {"template": inner}))
    held_then_started(cluster, APPWRAPPER, ns, "aw")
    eventually(lambda: suspend_is(cluster, JOBSET, ns, "job-set", False), TIMEOUT,
               "the JobSet created and unsuspended")  # fmt: skip


@kueue_case(GO, WHEN + "should not admit child jobs even if the child job has a queue-name label")
def test_a_jobsets_labelled_jobs_are_not_queued_again(cluster: Cluster, queues: str) -> None:
    ns = queues
    create(cluster, JOBSET, ns, jobset("job-set", ns, replicas=2, pods=2, jobs_queue="main"))
    held_then_started(cluster, JOBSET, ns, "job-set")
    eventually(lambda: jobset_completed(cluster, ns, "job-set"), MEDIUM_TIMEOUT, "Completed")


@kueue_case(GO, WHEN + "Should suspend Pods of a created Deployment in the test namespace")
def test_an_appwrappers_deployment_is_one_workload(cluster: Cluster, queues: str) -> None:
    ns = queues
    deployment = make_deployment("deployment", ns, replicas=3, cpu="200m", grace=1)
    component = {"template": deployment,
                 "podSets": [{"replicas": 3, "path": "template.spec.template"}]}  # fmt: skip
    aw = create(cluster, APPWRAPPER, ns, appwrapper("aw", ns, component))
    eventually(lambda: suspend_is(cluster, APPWRAPPER, ns, "aw", True), TIMEOUT, "suspended")
    read = lambda: cluster.apps.read_namespaced_deployment("deployment", ns)  # noqa: E731
    consistently(lambda: gone(read), 1.0, "no Deployment")
    relabel(cluster, APPWRAPPER, ns, "aw")
    eventually(lambda: suspend_is(cluster, APPWRAPPER, ns, "aw", False), TIMEOUT, "unsuspended")

    def one_admitted() -> bool:
        workloads = cluster.list("workloads", ns)
        assert [w["metadata"]["name"] for w in workloads] == [
            workload_of("AppWrapper", "workload.codeflare.dev", aw)
        ], [w["metadata"]["name"] for w in workloads]
        assert is_admitted(workloads[0]), "not admitted"
        return True

    eventually(one_admitted, TIMEOUT, "only the AppWrapper's Workload, admitted")

    def ready() -> bool:
        try:
            replicas = read().status.ready_replicas
        except client.ApiException as err:
            raise AssertionError(f"the Deployment: {err.status}") from None
        assert replicas == 3, f"{replicas} ready replicas"
        return True

    eventually(ready, MEDIUM_TIMEOUT, "3 replicas ready")


@pytest.fixture
def lws(queues: str, cluster: Cluster) -> Iterator[Lws]:
    handle = Lws(cluster, queues)
    yield handle
    handle.controller.stop()


def only_workload(lws: Lws, obj: dict[str, Any]) -> dict:
    workloads = lws.cluster.list("workloads", lws.ns)
    key = lws.workload_key(obj, 0)
    assert [w["metadata"]["name"] for w in workloads] == [key], [
        w["metadata"]["name"] for w in workloads
    ]
    owners = workloads[0]["metadata"].get("ownerReferences") or []
    assert any(o["uid"] == obj["metadata"]["uid"] for o in owners), owners
    return workloads[0]


def pods_gated(lws: Lws, name: str, count: int) -> bool:
    pods = lws.pods(name)
    assert len(pods) == count, f"{len(pods)} pods"
    for pod in pods:
        assert pod.status.phase == "Pending", pod.status.phase
        assert any(g.name == SCHEDULING_GATE for g in pod.spec.scheduling_gates or []), (
            pod.spec.scheduling_gates
        )
    return True


def pods_running(lws: Lws, name: str, count: int) -> bool:
    pods = lws.pods(name)
    assert len(pods) == count, f"{len(pods)} pods"
    assert all(p.status.phase == "Running" for p in pods), [p.status.phase for p in pods]
    return True


def ready_replicas(lws: Lws, name: str) -> int:
    return int((lws.get(name).get("status") or {}).get("readyReplicas") or 0)


@kueue_case(
    GO,
    WHEN + "should not suspend the pods created by a LeaderWorkerSet in the test namespace with "
    "queue-name label",
)
def test_a_labelled_leader_worker_set_runs(lws: Lws) -> None:
    obj = lws.create(size=3, replicas=1, cpu="200m", queue="main")
    eventually(
        lambda: is_admitted(only_workload(lws, obj)), MEDIUM_TIMEOUT, "one Workload admitted"
    )
    lws.expect_ready("lws", 1)
    eventually(lambda: pods_running(lws, "lws", 3), MEDIUM_TIMEOUT, "3 pods running")
    lws.delete("lws")
    lws.expect_workload_gone(lws.workload_key(obj, 0))


@kueue_case(
    GO,
    WHEN + "should suspend the pods created by a LeaderWorkerSet in the test namespace without "
    "queue-name label",
)
def test_an_unlabelled_leader_worker_set_is_held(lws: Lws) -> None:
    obj = lws.create(size=3, replicas=1, cpu="200m")

    def not_reserved() -> bool:
        wl = only_workload(lws, obj)
        assert condition(wl, "QuotaReserved").get("status") == "False", wl.get("status")
        return True

    eventually(not_reserved, MEDIUM_TIMEOUT, "one Workload, no quota reserved")
    eventually(lambda: ready_replicas(lws, "lws") == 0, MEDIUM_TIMEOUT, "no replica ready")
    eventually(lambda: pods_gated(lws, "lws", 3), MEDIUM_TIMEOUT, "3 pods pending, gated")
    lws.delete("lws")
    lws.expect_workload_gone(lws.workload_key(obj, 0))


@kueue_case(
    GO,
    WHEN + "should suspend the pods created by a LeaderWorkerSet without queue-name label and "
    "unsuspend after set queue-name",
)
def test_an_unlabelled_leader_worker_set_starts_once_it_names_a_queue(lws: Lws) -> None:
    obj = lws.create(size=1, replicas=1, cpu="200m")
    key = lws.workload_key(obj, 0)
    eventually(lambda: only_workload(lws, obj), MEDIUM_TIMEOUT, "one Workload")

    def inadmissible() -> bool:
        """util.ExpectWorkloadsToBeInadmissibleByKeys: QuotaReserved False, Inadmissible."""
        reserved = condition(lws.cluster.workload(key, lws.ns), "QuotaReserved")
        assert (reserved.get("status"), reserved.get("reason")) == ("False", "Inadmissible"), (
            reserved
        )
        return True

    eventually(inadmissible, TIMEOUT, "the Workload inadmissible")
    eventually(lambda: ready_replicas(lws, "lws") == 0, MEDIUM_TIMEOUT, "no replica ready")
    eventually(lambda: pods_gated(lws, "lws", 1), MEDIUM_TIMEOUT, "1 pod pending, gated")
    lws.update(
        "lws", lambda o: o["metadata"].setdefault("labels", {}).update({QUEUE_LABEL: "main"})
    )
    eventually(
        lambda: (
            (lws.cluster.workload(key, lws.ns) or {}).get("spec", {}).get("queueName") == "main"
        ),
        MEDIUM_TIMEOUT,
        "the Workload's queueName main",
    )
    lws.expect_admitted(key)
    eventually(lambda: ready_replicas(lws, "lws") == 1, LONG_TIMEOUT, "1 replica ready")
    eventually(lambda: pods_running(lws, "lws", 1), LONG_TIMEOUT, "the pod running")


@pytest.fixture
def excluded(crds: None, tower: Tower, cluster: Cluster, ns: str) -> Iterator[str]:
    """The second Describe's BeforeEach: queues, then the restart with the test namespace
    left out of managedJobsNamespaceSelector."""
    make_queues(cluster, ns)
    # kueue-system is the namespace Kueue's manager runs in, and Tower's outside a pod, as
    # Kueue's; Tower's certs tool takes tower-system, its Service's. A Configuration whose
    # selector reaches either is refused with the pod integration on.
    selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                      "values": [ns, "kueue-system", TOWER_NS,
                                                 "kube-system"]}]}  # fmt: skip
    configuration = configuration_with(
        manageJobsWithoutQueueName=True, managedJobsNamespaceSelector=selector
    )
    try:
        for _ in restarted(tower, configuration):
            with operators(cluster, ns):
                yield ns
    finally:
        drop_queues(cluster, ns)


@kueue_case(
    GO,
    "ManageJobsWithoutQueueName with namespace selector excluding test namespace should not "
    "suspend Jobs from unmanaged JobSet",
)
def test_an_unmanaged_namespaces_jobset_runs(cluster: Cluster, excluded: str) -> None:
    ns = excluded
    body = jobset("job-set", ns, replicas=1, pods=1, cpu="",
                  replicated=("test-job-1", "test-job-2"))  # fmt: skip
    create(cluster, JOBSET, ns, body)

    def jobs(succeeded: bool) -> bool:
        items = cluster.batch.list_namespaced_job(ns).items
        assert len(items) == 2, f"{len(items)} jobs"
        for job in items:
            assert job.spec.suspend is False, f"{job.metadata.name} suspended"
            assert not succeeded or job.status.succeeded == 1, job.status.succeeded
        return True

    eventually(lambda: jobs(False), MEDIUM_TIMEOUT, "2 jobs not suspended")
    eventually(lambda: jobs(True), MEDIUM_TIMEOUT, "2 jobs completed")
    eventually(lambda: jobset_completed(cluster, ns, "job-set"), MEDIUM_TIMEOUT, "Completed")


@pytest.fixture
def without_jobset(crds: None, tower: Tower, cluster: Cluster, ns: str) -> Iterator[str]:
    configuration = yaml.safe_load(configuration_with(manageJobsWithoutQueueName=True))
    frameworks = yaml.safe_load(CONFIGURATION)["integrations"]["frameworks"]
    configuration["integrations"]["frameworks"] = [
        f for f in frameworks if f != "jobset.x-k8s.io/jobset"
    ]
    for _ in restarted(tower, yaml.safe_dump(configuration)):
        make_queues(cluster, ns)
        try:
            with operators(cluster, ns):
                yield ns
        finally:
            drop_queues(cluster, ns)


@kueue_case(
    GO,
    "ManageJobsWithoutQueueName without JobSet integration manageJobsWithoutQueueName=true "
    "should create only one workload for parent job",
)
def test_an_appwrappers_jobset_without_its_integration(
    cluster: Cluster, without_jobset: str
) -> None:
    ns = without_jobset
    component = {"template": jobset("job-set", ns, replicas=2, pods=1)}
    create(cluster, APPWRAPPER, ns, appwrapper("aw", ns, component, queue="main"))
    eventually(lambda: suspend_is(cluster, APPWRAPPER, ns, "aw", False), MEDIUM_TIMEOUT,
               "the AppWrapper unsuspended")  # fmt: skip
    eventually(lambda: suspend_is(cluster, JOBSET, ns, "job-set", False), TIMEOUT,
               "the JobSet created and unsuspended")  # fmt: skip
    eventually(lambda: jobset_completed(cluster, ns, "job-set"), MEDIUM_TIMEOUT, "Completed")
