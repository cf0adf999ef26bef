"""Port of Kueue v0.19.2's test/e2e/multikueue/baseline/e2e_test.go, on a manager and two
worker control planes, each with its Tower (tests/e2e/kueue/multikueue.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.multikueue import (
    GATE,
    GPU_HIGH,
    GPU_LOW,
    MULTIKUEUE_CONTROLLER,
    MultiKueueSetup,
    cluster_queue,
    expect_admitted_and_get_worker,
    expect_check_state,
    expect_copy_admitted,
    expect_not_on,
    has_quota,
    is_admitted,
    is_evicted,
    job_gone_on,
    local_queue,
    mk_fixture,  # noqa: F401 (the fixture)
    wait_active,
    workers_fixture,  # noqa: F401 (the fixture)
)
from tests.e2e.kueue.util import (
    BEHAVIOR_EXIT_FAST,
    KUEUE,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    TIMEOUT,
    Cluster,
    V,
    condition,
    consistently,
    eventually,
    is_finished,
    make_deployment,
    make_group,
    make_job,
    make_pod,
    make_stateful_set,
    pod_workload_name,
    stateful_set_workload_name,
)

pytestmark = pytest.mark.e2e

GO = "multikueue/baseline/e2e_test.go"
WHEN_CREATING = "MultiKueue Creating a multikueue integration workload "
WHEN_PREEMPTING = "MultiKueue Preemption with a multikueue admission check "
WHEN_PRIORITY = "MultiKueue Priority class mutation "
PRIORITY_LABEL = f"{KUEUE}/priority-class"
# util.pendingQuotaReservedReasons (ExpectWorkloadsToBePendingByKeys)
PENDING_REASONS = {"Pending", "Waiting", "PendingEvaluation", "WaitingForQuota",
                   "ExceedsMaxQuota", "WaitingForPreemptedWorkloads", "TopologyPlacementFailed",
                   "WaitingForPodsReady", "NoMatchingFlavor"}  # fmt: skip


def job(
    name: str, mk: MultiKueueSetup, requests: dict[str, str], *, priority: str | None = None,
    generate: bool = False, queue: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    body = make_job(name, mk.ns, queue=queue or mk.lq, requests=requests,
                    priority_class=priority)  # fmt: skip
    if generate:
        del body["metadata"]["name"]
        body["metadata"]["generateName"] = name
    return body


def create_job(cluster: Cluster, body: dict[str, Any]) -> Any:
    return cluster.batch.create_namespaced_job(body["metadata"]["namespace"], body)


def job_workload(cluster: Cluster, made: Any) -> str:
    return cluster.workload_for_job(made, made.metadata.namespace)


def expect_managed_by(cluster: Cluster, name: str, namespace: str, managed_by: str) -> None:
    """expectJobToBeCreatedAndManagedBy."""
    eventually(
        lambda: (
            (cluster.batch.read_namespaced_job(name, namespace).spec.managed_by or "") == managed_by
        ),
        TIMEOUT,
        f"job {name} managed by {managed_by!r}",
    )


def admitted_here(cluster: Cluster, name: str, namespace: str, timeout: float = TIMEOUT) -> dict:
    def seen() -> dict:
        wl = cluster.workload(name, namespace)
        assert is_admitted(wl), f"{name} not admitted: {(wl or {}).get('status')}"
        assert wl is not None
        return wl

    return dict(eventually(seen, timeout, f"{name} admitted on the manager"))


def preempted_here(cluster: Cluster, name: str, namespace: str) -> None:
    def seen() -> bool:
        wl = cluster.workload(name, namespace)
        assert is_evicted(wl), f"{name} not evicted: {(wl or {}).get('status')}"
        assert condition(wl, "Preempted").get("status") == "True"
        return True

    eventually(seen, TIMEOUT, f"{name} preempted on the manager")


def job_active(cluster: Cluster, name: str, namespace: str, active: int, timeout: float) -> None:
    eventually(
        lambda: (cluster.batch.read_namespaced_job(name, namespace).status.active or 0) == active,
        timeout,
        f"job {name} with {active} active pods",
    )


def has_gate(pod: Any) -> bool:
    return any(g.name == GATE for g in pod.spec.scheduling_gates or [])


# ----- Creating a multikueue integration workload ---------------------------------------------


@kueue_case(GO, WHEN_CREATING + "Should create a pod on worker if admitted")
def test_pod_on_worker(mk: MultiKueueSetup) -> None:
    pod = make_pod("pod", mk.ns, queue=mk.lq, args=BEHAVIOR_EXIT_FAST)
    pod["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "100m", "memory": "100M"}, "limits": {"cpu": "100m", "memory": "100M"}}  # fmt: skip
    made = mk.manager.core.create_namespaced_pod(mk.ns, pod)
    name = pod_workload_name(made)
    expect_check_state(mk.manager, name, mk.ns, mk.check, "Ready", "")
    eventually(lambda: has_gate(mk.manager.core.read_namespaced_pod("pod", mk.ns)), TIMEOUT,
               "the manager's pod gated")  # fmt: skip
    finished = [("PodReadyToStartContainers", "False", ""), ("Initialized", "True", "PodCompleted"),
                ("Ready", "False", "PodCompleted"), ("ContainersReady", "False", "PodCompleted"),
                ("PodScheduled", "True", "")]  # fmt: skip

    def succeeded() -> bool:
        here = mk.manager.core.read_namespaced_pod("pod", mk.ns)
        assert here.status.phase == "Succeeded", here.status.phase
        seen = [(c.type, c.status, c.reason or "") for c in here.status.conditions or []]
        assert seen == finished, seen
        return True

    eventually(succeeded, MEDIUM_TIMEOUT, "the manager's pod Succeeded with the worker's status")


@kueue_case(
    GO, WHEN_CREATING + "Should overwrite the manager Pod's SchedulingGated condition once it "
    "runs on the worker"
)  # fmt: skip
def test_pod_scheduled_overwrites_gated(mk: MultiKueueSetup) -> None:
    pod = make_pod("running-pod", mk.ns, queue=mk.lq, args=["netexec"], grace=1)
    pod["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "100m", "memory": "100M"}, "limits": {"cpu": "100m", "memory": "100M"}}  # fmt: skip
    made = mk.manager.core.create_namespaced_pod(mk.ns, pod)
    expect_check_state(mk.manager, pod_workload_name(made), mk.ns, mk.check, "Ready", "")

    def running() -> bool:
        here = mk.manager.core.read_namespaced_pod("running-pod", mk.ns)
        assert here.status.phase == "Running", here.status.phase
        assert has_gate(here)
        assert any(c.type == "PodScheduled" and c.status == "True"
                   for c in here.status.conditions or []), here.status.conditions  # fmt: skip
        return True

    eventually(running, MEDIUM_TIMEOUT, "the manager's pod Running, PodScheduled, still gated")
    mk.manager.core.delete_namespaced_pod("running-pod", mk.ns)
    eventually(lambda: not mk.manager.core.list_namespaced_pod(mk.ns).items, LONG_TIMEOUT,
               "every pod of the namespace deleted")  # fmt: skip


def ensure_pod_workloads_running(mk: MultiKueueSetup, selector: str) -> None:
    """ensurePodWorkloadsRunning: each pod of the Deployment admitted through the check, and
    running on the worker its message names."""
    for pod in mk.manager.core.list_namespaced_pod(mk.ns, label_selector=selector).items:
        name = pod_workload_name(pod)

        def ready(name: str = name) -> str:
            state = next((c for c in (mk.manager.workload(name, mk.ns) or {}).get("status", {})
                          .get("admissionChecks") or [] if c["name"] == mk.check), {})  # fmt: skip
            assert state.get("state") == "Ready", state
            return str(state["message"])

        message = eventually(ready, LONG_TIMEOUT * 2, f"{name}'s check Ready")
        worker = mk.by_cluster[message.split('"')[1]]
        eventually(
            lambda w=worker, p=pod.metadata.name: (
                w.core.read_namespaced_pod(p, mk.ns).status.phase == "Running"
            ),
            TIMEOUT,
            f"{pod.metadata.name} Running on {worker.name}",
        )


@kueue_case(GO, WHEN_CREATING + "Should create pods on worker if the deployment is admitted")
def test_deployment_pods_on_worker(mk: MultiKueueSetup) -> None:
    body = make_deployment("deployment", mk.ns, queue=mk.lq, replicas=3, cpu="100m")
    for part in ("requests", "limits"):
        body["spec"]["template"]["spec"]["containers"][0]["resources"][part]["memory"] = "100M"
    apps = mk.manager.apps
    apps.create_namespaced_deployment(mk.ns, body)
    selector = "app=deployment-pod"

    def ready(n: int) -> None:
        eventually(lambda: (apps.read_namespaced_deployment("deployment", mk.ns).status
                            .ready_replicas or 0) == n, MEDIUM_TIMEOUT, f"{n} replicas ready")  # fmt: skip

    ready(3)
    ensure_pod_workloads_running(mk, selector)

    def status() -> bool:
        s = apps.read_namespaced_deployment("deployment", mk.ns).status
        assert (s.ready_replicas, s.replicas, s.updated_replicas) == (3, 3, 3), s
        seen = [(c.type, c.status, c.reason) for c in s.conditions or []]
        assert seen == [("Available", "True", "MinimumReplicasAvailable"),
                        ("Progressing", "True", "NewReplicaSetAvailable")], seen  # fmt: skip
        return True

    eventually(status, MEDIUM_TIMEOUT, "the deployment's status")
    for replicas in (4, 2):
        apps.patch_namespaced_deployment("deployment", mk.ns, {"spec": {"replicas": replicas}})
        ready(replicas)
        ensure_pod_workloads_running(mk, selector)
    apps.delete_namespaced_deployment("deployment", mk.ns)
    for worker in mk.workers:
        eventually(lambda w=worker: not w.core.list_namespaced_pod(
            mk.ns, label_selector=selector).items, LONG_TIMEOUT, f"no pods on {worker.name}")  # fmt: skip


@kueue_case(GO, WHEN_CREATING + "Should sync a StatefulSet to worker if admitted")
def test_statefulset_on_worker(mk: MultiKueueSetup) -> None:
    body = make_stateful_set("statefulset", mk.ns, queue=mk.lq, replicas=3, cpu="100m")
    for part in ("requests", "limits"):
        body["spec"]["template"]["spec"]["containers"][0]["resources"][part]["memory"] = "100M"
    made = mk.manager.apps.create_namespaced_stateful_set(mk.ns, body)
    name = stateful_set_workload_name(made)
    worker = mk.by_cluster[expect_admitted_and_get_worker(mk.manager, name, mk.ns, mk.check)]
    eventually(lambda: worker.apps.read_namespaced_stateful_set("statefulset", mk.ns), TIMEOUT,
               "the StatefulSet on the worker")  # fmt: skip
    eventually(lambda: (worker.apps.read_namespaced_stateful_set("statefulset", mk.ns).status
                        .ready_replicas or 0) == 3, MEDIUM_TIMEOUT, "3 replicas ready there")  # fmt: skip

    def gated() -> bool:
        pods = mk.manager.core.list_namespaced_pod(mk.ns, label_selector="app=statefulset-pod")
        assert pods.items, "no pods on the manager"
        assert all(has_gate(p) for p in pods.items)
        return True

    eventually(gated, MEDIUM_TIMEOUT, "the manager's pods gated")
    mk.manager.apps.delete_namespaced_stateful_set("statefulset", mk.ns)
    eventually(lambda: gone_sts(worker, mk.ns), MEDIUM_TIMEOUT, "the worker's StatefulSet gone")


def gone_sts(worker: Any, namespace: str) -> bool:
    try:
        worker.apps.read_namespaced_stateful_set("statefulset", namespace)
    except client.ApiException as err:
        return err.status == 404
    return False


@kueue_case(GO, WHEN_CREATING + "Should create a pod group on worker if admitted")
def test_pod_group_on_worker(mk: MultiKueueSetup) -> None:
    pod = make_pod("test-group", mk.ns, queue=mk.lq, args=BEHAVIOR_EXIT_FAST)
    pod["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "100m", "memory": "100M"}, "limits": {"cpu": "100m", "memory": "100M"}}  # fmt: skip
    for member in make_group(pod, 2):
        made = mk.manager.core.create_namespaced_pod(mk.ns, member)
        assert has_gate(made)
    eventually(lambda: len(mk.manager.core.list_namespaced_pod(mk.ns).items) == 2,
               MEDIUM_TIMEOUT, "2 pods")  # fmt: skip
    worker = expect_admitted_and_get_worker(mk.manager, "test-group", mk.ns, mk.check)
    expect_check_state(mk.manager, "test-group", mk.ns, mk.check, "Ready",
                       f'The workload was admitted on "{worker}"')  # fmt: skip
    eventually(lambda: all(has_gate(p) for p in mk.manager.core.list_namespaced_pod(mk.ns).items),
               TIMEOUT, "the manager's pods gated")  # fmt: skip
    eventually(lambda: all(p.status.phase == "Succeeded"
                           for p in mk.manager.core.list_namespaced_pod(mk.ns).items),
               MEDIUM_TIMEOUT, "the manager's pods Succeeded")  # fmt: skip


@kueue_case(GO, WHEN_CREATING + "Should run a job on worker if admitted")
def test_job_on_worker(mk: MultiKueueSetup) -> None:
    made = create_job(mk.manager, job("job", mk, {"cpu": "100m", "memory": "100M"}))
    expect_managed_by(mk.manager, "job", mk.ns, MULTIKUEUE_CONTROLLER)
    name = job_workload(mk.manager, made)
    cluster_name = expect_admitted_and_get_worker(mk.manager, name, mk.ns, mk.check)
    worker = mk.by_cluster[cluster_name]
    expect_check_state(mk.manager, name, mk.ns, mk.check, "Ready",
                       f'The workload was admitted on "{cluster_name}"')  # fmt: skip
    batch = mk.manager.batch
    eventually(lambda: batch.read_namespaced_job("job", mk.ns).spec.suspend is False, TIMEOUT,
               "the manager's job unsuspended")  # fmt: skip

    def mirrored() -> bool:
        s = batch.read_namespaced_job("job", mk.ns).status
        assert (s.start_time is not None, s.active, s.completion_time) == (True, 1, None), s
        return True

    eventually(mirrored, MEDIUM_TIMEOUT, "the job's status from the worker")
    worker.terminate_active_pods(mk.ns, 1, 0, "batch.kubernetes.io/job-name=job")

    def finished() -> bool:
        wl = mk.manager.workload(name, mk.ns)
        found = condition(wl, "Finished")
        assert (found.get("status"), found.get("reason")) == ("True", "Succeeded"), found
        return True

    eventually(finished, MEDIUM_TIMEOUT, "the workload finished")
    expect_not_on(mk.workers, name, mk.ns, LONG_TIMEOUT)
    job_gone_on(mk.workers, "job", mk.ns)
    conditions = batch.read_namespaced_job("job", mk.ns).status.conditions or []
    assert any(c.type == "Complete" and c.status == "True" for c in conditions), conditions


# ----- Preemption with a multikueue admission check -------------------------------------------


def low_then_high(
    mk: MultiKueueSetup, low_requests: dict[str, str], high_requests: dict[str, str],
    low_on: int, high_on: int, high_timeout: float = TIMEOUT,
) -> tuple[Any, str, Any, str]:  # fmt: skip
    """The low-priority job admitted on worker `low_on`, then the high-priority one created and
    admitted on worker `high_on` (0 or 1): Kueue's first steps of each preemption case."""
    w = mk.workers
    low = create_job(mk.manager, job("low-job-", mk, low_requests, priority=mk.low, generate=True))
    low_name = job_workload(mk.manager, low)
    admitted_here(mk.manager, low_name, mk.ns)
    expect_copy_admitted(mk.manager, w[low_on], w[1 - low_on], low_name, mk.ns)
    return low, low_name, w[high_on], w[1 - high_on]


@kueue_case(
    GO, WHEN_PREEMPTING + "Should preempt a running low-priority workload when a high-priority "
    "workload is admitted (same worker)"
)  # fmt: skip
def test_preempt_same_worker(mk: MultiKueueSetup) -> None:
    _, low_name, _, _ = low_then_high(mk, {GPU_HIGH: "2"}, {}, 0, 0)
    high = create_job(mk.manager, job("high-job-", mk, {GPU_HIGH: "2"}, priority=mk.high,
                                      generate=True))  # fmt: skip
    high_name = job_workload(mk.manager, high)
    admitted_here(mk.manager, high_name, mk.ns, MEDIUM_TIMEOUT)
    expect_copy_admitted(mk.manager, mk.workers[0], mk.workers[1], high_name, mk.ns)
    preempted_here(mk.manager, low_name, mk.ns)
    expect_not_on(mk.workers, low_name, mk.ns, MEDIUM_TIMEOUT)


@kueue_case(GO, WHEN_PREEMPTING + "Should re-do admission process when workload gets evicted in "
            "the worker")  # fmt: skip
def test_readmitted_after_eviction_on_worker(mk: MultiKueueSetup) -> None:
    w1, w2 = mk.workers
    made = create_job(mk.manager, job("job", mk, {"cpu": "100m", "memory": "0.1G", GPU_HIGH: "2"},
                                      priority=mk.low))  # fmt: skip
    name = job_workload(mk.manager, made)
    admitted_here(mk.manager, name, mk.ns)

    def on_worker1() -> bool:
        there = w1.workload(name, mk.ns)
        assert is_admitted(there), f"not admitted on worker1: {(there or {}).get('status')}"
        assert there is not None
        assert there["spec"] == (mk.manager.workload(name, mk.ns) or {}).get("spec")
        return True

    eventually(on_worker1, TIMEOUT, "admitted on worker1")
    eventually(lambda: w2.workload(name, mk.ns) is None, TIMEOUT, "not on worker2")
    set_quota(w1.cluster, mk.cq, GPU_HIGH, "1")
    set_quota(w2.cluster, mk.cq, GPU_HIGH, "2")
    evict_by_test(w1.cluster, name, mk.ns)
    eventually(lambda: (mk.manager.workload(name, mk.ns) or {}).get("status", {})
               .get("clusterName") == mk.cluster_names[1], LONG_TIMEOUT,
               "clusterName the second worker")  # fmt: skip

    def on_worker2() -> bool:
        there = w2.workload(name, mk.ns)
        assert is_admitted(there), f"not admitted on worker2: {(there or {}).get('status')}"
        assert there is not None
        assert there["spec"] == (mk.manager.workload(name, mk.ns) or {}).get("spec")
        return True

    eventually(on_worker2, TIMEOUT, "admitted on worker2")
    eventually(lambda: w1.workload(name, mk.ns) is None, TIMEOUT, "gone from worker1")


def set_quota(cluster: Cluster, cq: str, resource: str, quota: str) -> None:
    """util.SetResourceNominalQuota, and the update."""

    def write() -> bool:
        body = cluster.get("clusterqueues", cq)
        for rg in body["spec"]["resourceGroups"]:
            for flavor in rg["flavors"]:
                for r in flavor["resources"]:
                    if r["name"] == resource:
                        r["nominalQuota"] = quota
        try:
            cluster.custom.replace_cluster_custom_object(KUEUE, V, "clusterqueues", cq, body)
        except client.ApiException as err:
            if err.status == 409:
                return False
            raise
        return True

    eventually(write, TIMEOUT, f"{cq}'s {resource} quota set to {quota}")


def evict_by_test(cluster: Cluster, name: str, namespace: str) -> None:
    """workload.SetConditionAndUpdate(Evicted=True, reason Preempted, "By test")."""

    def write() -> bool:
        wl = cluster.get("workloads", name, namespace)
        conditions = [c for c in wl["status"].get("conditions") or [] if c["type"] != "Evicted"]
        conditions.append({"type": "Evicted", "status": "True", "reason": "Preempted",
                           "message": "By test", "lastTransitionTime": _now(),
                           "observedGeneration": wl["metadata"].get("generation", 1)})  # fmt: skip
        body = copy.deepcopy(wl)
        body["status"]["conditions"] = conditions
        try:
            cluster.custom.replace_namespaced_custom_object_status(
                KUEUE, V, namespace, "workloads", name, body
            )
        except client.ApiException as err:
            if err.status == 409:
                return False
            raise
        return True

    eventually(write, TIMEOUT, f"{name} evicted by the test")


def _now() -> str:
    from tests.e2e.kueue.multikueue import now

    return now()


@kueue_case(
    GO, WHEN_PREEMPTING + "Should preempt a running low-priority workload when a high-priority "
    "workload is admitted (other workers)"
)  # fmt: skip
def test_preempt_other_workers(mk: MultiKueueSetup) -> None:
    resources = {"cpu": "100m", "memory": "0.1G"}
    _, low_name, _, _ = low_then_high(mk, {**resources, GPU_HIGH: "2", GPU_LOW: "1"}, {}, 0, 1)
    high = create_job(mk.manager, job("high-job-", mk, {**resources, GPU_HIGH: "1", GPU_LOW: "2"},
                                      priority=mk.high, generate=True))  # fmt: skip
    high_name = job_workload(mk.manager, high)
    admitted_here(mk.manager, high_name, mk.ns, MEDIUM_TIMEOUT)
    expect_copy_admitted(mk.manager, mk.workers[1], mk.workers[0], high_name, mk.ns)
    preempted_here(mk.manager, low_name, mk.ns)
    expect_not_on(mk.workers, low_name, mk.ns, MEDIUM_TIMEOUT)


@kueue_case(
    GO, WHEN_PREEMPTING + "Should preempt a running low-priority workload on a worker when a "
    "high-priority workload is admitted to it by manager"
)  # fmt: skip
def test_preempt_on_worker_admitted_by_manager(mk: MultiKueueSetup) -> None:
    set_quota(mk.manager, mk.cq, GPU_LOW, "4")
    requests = {"cpu": "100m", "memory": "0.1G", GPU_HIGH: "1", GPU_LOW: "2"}
    low, low_name, _, _ = low_then_high(mk, requests, {}, 1, 1)
    job_active(mk.manager, low.metadata.name, mk.ns, 1, TIMEOUT)
    high = create_job(mk.manager, job("high-job-", mk, requests, priority=mk.high, generate=True))
    high_name = job_workload(mk.manager, high)
    admitted_here(mk.manager, high_name, mk.ns, LONG_TIMEOUT)
    expect_copy_admitted(mk.manager, mk.workers[1], mk.workers[0], high_name, mk.ns, LONG_TIMEOUT)
    eventually(lambda: condition(mk.manager.workload(low_name, mk.ns), "Admitted")
               .get("status") == "False", TIMEOUT, "the low workload no longer admitted")  # fmt: skip
    job_active(mk.manager, low.metadata.name, mk.ns, 0, TIMEOUT)
    job_active(mk.manager, high.metadata.name, mk.ns, 1, MEDIUM_TIMEOUT)

    def dispatched_again() -> bool:
        here = mk.manager.workload(low_name, mk.ns)
        assert (has_quota(here), is_admitted(here)) == (True, False), (here or {}).get("status")
        for worker in mk.workers:
            there = worker.workload(low_name, mk.ns)
            assert there is not None, f"no copy on {worker.name}"
            assert not has_quota(there), f"{worker.name}'s copy holds quota"
        return True

    eventually(dispatched_again, TIMEOUT, "the low workload dispatched again after backoff")


# ----- Priority class mutation ----------------------------------------------------------------


def set_priority_class(cluster: Cluster, name: str, namespace: str, value: str) -> None:
    cluster.batch.patch_namespaced_job(name, namespace,
                                       {"metadata": {"labels": {PRIORITY_LABEL: value}}})  # fmt: skip


@kueue_case(GO, WHEN_PRIORITY + "Should allow to mutate kueue.x-k8s.io/priority-class (other "
            "workers)")  # fmt: skip
def test_priority_class_mutation_other_workers(mk: MultiKueueSetup) -> None:
    w1, w2 = mk.workers
    job1 = create_job(mk.manager, job("job1", mk, {GPU_HIGH: "2", GPU_LOW: "1"}, priority=mk.high))
    wl1 = job_workload(mk.manager, job1)
    admitted_here(mk.manager, wl1, mk.ns)
    expect_copy_admitted(mk.manager, w1, w2, wl1, mk.ns)
    job2 = create_job(mk.manager, job("job2", mk, {GPU_HIGH: "1", GPU_LOW: "2"}, priority=mk.high))
    wl2 = job_workload(mk.manager, job2)

    def pending() -> bool:
        wl = mk.manager.workload(wl2, mk.ns)
        found = condition(wl, "QuotaReserved")
        assert found.get("status") == "False", found
        assert found.get("reason") in PENDING_REASONS, found
        return True

    eventually(pending, TIMEOUT, "the second workload pending")
    expect_not_on(mk.workers, wl2, mk.ns, TIMEOUT)
    set_priority_class(mk.manager, "job1", mk.ns, mk.low)
    expect_copy_admitted(mk.manager, w2, w1, wl2, mk.ns)
    preempted_here(mk.manager, wl1, mk.ns)
    expect_not_on(mk.workers, wl1, mk.ns, MEDIUM_TIMEOUT)


@kueue_case(GO, WHEN_PRIORITY + "Should keep workload priority event if job reconcile")
def test_priority_kept_after_job_reconcile(mk: MultiKueueSetup) -> None:
    w1, w2 = mk.workers
    body = job("job", mk, {"cpu": "2", "memory": "1G"}, priority=mk.high)
    body["spec"].update(backoffLimitPerIndex=2, completionMode="Indexed")
    made = create_job(mk.manager, body)
    name = job_workload(mk.manager, made)
    admitted_here(mk.manager, name, mk.ns)
    expect_copy_admitted(mk.manager, w1, w2, name, mk.ns)
    set_priority_class(mk.manager, "job", mk.ns, mk.low)
    eventually(lambda: (mk.manager.workload(name, mk.ns) or {})["spec"].get("priority") == 100,
               TIMEOUT, "the manager's workload at the low priority")  # fmt: skip
    eventually(lambda: (w1.workload(name, mk.ns) or {})["spec"].get("priority") == 100,
               TIMEOUT, "the worker's workload at the low priority")  # fmt: skip
    w1.terminate_active_pods(mk.ns, 1, 1)
    consistently(lambda: _priority_is(w1, name, mk.ns, 100), 1.0)

    def still_admitted() -> bool:
        there = w1.workload(name, mk.ns)
        assert there is not None
        assert is_admitted(there), there.get("status")
        assert there["spec"] == (mk.manager.workload(name, mk.ns) or {}).get("spec")
        return True

    eventually(still_admitted, TIMEOUT, "still admitted on worker1")


def _priority_is(worker: Any, name: str, namespace: str, value: int) -> None:
    there = worker.workload(name, namespace)
    assert there is not None
    assert there["spec"].get("priority") == value, there["spec"]


# ----- Cluster Role Sharing, Manager Quota Automation -----------------------------------------


@kueue_case(GO, "MultiKueue Cluster Role Sharing should allow to run a MultiKueue and a regular "
            "Job on the same cluster")  # fmt: skip
def test_multikueue_and_regular_job(mk: MultiKueueSetup) -> None:
    m = mk.manager
    m.create("clusterqueues", cluster_queue("q2", mk.flavor, {"cpu": "1", "memory": "2G"},
                                            preemption=False))  # fmt: skip
    try:
        wait_active(m, "clusterqueues", "q2")
        m.create("localqueues", local_queue("q2", mk.ns, "q2"), mk.ns)
        wait_active(m, "localqueues", "q2", mk.ns)
        requests = {"cpu": "1", "memory": "2G"}
        create_job(m, job("job-mk", mk, requests))
        expect_managed_by(m, "job-mk", mk.ns, MULTIKUEUE_CONTROLLER)
        create_job(m, job("job-regular", mk, requests, queue="q2"))
        expect_managed_by(m, "job-regular", mk.ns, "")
        for name in ("job-mk", "job-regular"):
            eventually(lambda n=name: m.batch.read_namespaced_job(n, mk.ns).spec.suspend is False,
                       TIMEOUT, f"{name} unsuspended")  # fmt: skip
            job_active(m, name, mk.ns, 1, LONG_TIMEOUT)
        mk.workers[1].terminate_active_pods(mk.ns, 1, 0, "batch.kubernetes.io/job-name=job-mk")
        finish_manager_pod(m, mk.ns, "job-regular")
        for name in ("job-mk", "job-regular"):
            eventually(lambda n=name: any(
                c.type == "Complete" and c.status == "True"
                for c in m.batch.read_namespaced_job(n, mk.ns).status.conditions or []),
                LONG_TIMEOUT, f"{name} complete")  # fmt: skip
    finally:
        m.delete("clusterqueues", "q2", strip_finalizers=True)


def finish_manager_pod(m: Cluster, namespace: str, job_name: str) -> None:
    """WaitForActivePodsAndTerminate on the manager: its pod runs on the real node (agnhost's
    netexec ends with 0 on SIGTERM) or on the stand-in's Node (marked Succeeded)."""
    from tests.e2e.kueue.util import end_container

    def running() -> Any:
        pods = m.core.list_namespaced_pod(
            namespace, label_selector=f"batch.kubernetes.io/job-name={job_name}"
        ).items
        # The stand-in's Node gives a running pod no IP: Running is what counts there.
        active = [p for p in pods if p.status.phase == "Running"]
        assert len(active) == 1, f"{len(active)} active pods"
        return active[0]

    pod = eventually(running, LONG_TIMEOUT, f"{job_name}'s pod running")
    if pod.status.container_statuses and pod.status.container_statuses[0].container_id:
        end_container(pod)
    else:
        m.core.patch_namespaced_pod_status(pod.metadata.name, namespace,
                                           {"status": {"phase": "Succeeded"}})  # fmt: skip


@kueue_case(GO, "MultiKueue MultiKueue Manager Quota Automation should automatically aggregate "
            "quotas from active worker ClusterQueues")  # fmt: skip
def test_manager_quota_automation(mk: MultiKueueSetup) -> None:
    m = mk.manager
    zero = dict.fromkeys(MultiKueueSetup.MANAGER_QUOTA, "0")
    for resource, quota in zero.items():
        set_quota(m, mk.cq, resource, quota)

    def automated() -> bool:
        body = m.get("multikueueconfigs", mk.config)
        body["spec"]["quotaManagement"] = "Automated"
        m.custom.replace_cluster_custom_object(KUEUE, V, "multikueueconfigs", mk.config, body)
        return True

    eventually(automated, TIMEOUT, "quota automation on the MultiKueueConfig")

    def condition_true() -> bool:
        found = condition(m.get("clusterqueues", mk.cq), "MultiKueueManagerQuotaAutomation")
        assert (found.get("status"), found.get("reason")) == ("True", "QuotaAutomated"), found
        return True

    eventually(condition_true, TIMEOUT, "the MultiKueueManagerQuotaAutomation condition")
    want = {"cpu": "3200m", "memory": "5G", "ephemeral-storage": "20G", GPU_HIGH: "3",
            GPU_LOW: "3"}  # fmt: skip

    def aggregated() -> bool:
        [rg] = m.get("clusterqueues", mk.cq)["spec"]["resourceGroups"]
        [flavor] = rg["flavors"]
        got = {r["name"]: r["nominalQuota"] for r in flavor["resources"]}
        assert got == want, got
        return True

    eventually(aggregated, TIMEOUT, "the workers' quotas summed on the manager")


__all__ = ["is_finished"]
