"""Port of Kueue v0.19.2's test/e2e/multikueue/extended/e2e_test.go, on a manager and two
worker control planes, each with its Tower (tests/e2e/kueue/multikueue.py).

Each kind is dispatched by the manager's Tower to the worker whose Tower admits it; the
operators are played on the workers (and the LeaderWorkerSet controller on the manager too:
tests/e2e/kueue/multikueue_extended.py). Kueue's Ray image runs Ray; here a Ray node is an
agnhost process, and a RayJob's script ends when the test ends its submitter's pod (the
`python -c "import ray; ..."` entrypoint exits at once in Kueue's case).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from extender.core.jobframework.adapter import workload_name
from extender.core.jobframework.slices import slice_name
from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.lws import GROUP as LWS_GROUP
from tests.e2e.kueue.lws import PLURAL as LWS_PLURAL
from tests.e2e.kueue.lws import SET_NAME, make_leader_worker_set
from tests.e2e.kueue.lws import VERSION as LWS_VERSION
from tests.e2e.kueue.multikueue import (
    GATE,
    MultiKueueSetup,
    Worker,
    expect_admitted_and_get_worker,
    is_admitted,
    mk_fixture,  # noqa: F401 (the fixture)
    workers_fixture,  # noqa: F401 (the fixture)
)
from tests.e2e.kueue.multikueue_extended import Played, install_crds, played
from tests.e2e.kueue.operators import (
    APPWRAPPER,
    JOBSET,
    JOBSET_NAME,
    MPIJOB,
    PYTORCHJOB,
    TRAINJOB,
)
from tests.e2e.kueue.ray import (
    ELASTIC,
    RAY,
    RAY_V,
    cluster_spec,
    make_ray_cluster,
    make_ray_job,
    make_ray_service,
)
from tests.e2e.kueue.util import (
    AGNHOST,
    BEHAVIOR_EXIT_FAST,
    BEHAVIOR_WAIT_FOR_DELETION,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    QUEUE_LABEL,
    TIMEOUT,
    Cluster,
    Tower,
    condition,
    eventually,
    expect_workload_to_finish,
    gone,
)

pytestmark = pytest.mark.e2e

GO = "multikueue/extended/e2e_test.go"
WHEN = "MultiKueue Creating a multikueue integration workload "
RAY_WHEN = WHEN + "Ray integration tests "
VERY_LONG_TIMEOUT = 300.0  # util.VeryLongTimeout
RAYCLUSTER = (RAY, RAY_V, "rayclusters")
RAYJOB = (RAY, RAY_V, "rayjobs")
RAYSERVICE = (RAY, RAY_V, "rayservices")
LWS = (LWS_GROUP, LWS_VERSION, LWS_PLURAL)
SMALL = {"cpu": "100m", "memory": "100M"}  # the cases' RequestAndLimit
GVP = tuple[str, str, str]


@pytest.fixture(scope="module", autouse=True)
def crds(tower: Tower, workers: tuple[Worker, Worker]) -> None:
    install_crds(tower, workers)


@pytest.fixture(name="operators")
def operators_fixture(mk: MultiKueueSetup) -> Iterator[Played]:
    with played(mk) as running:
        yield running


# ----- reading and writing the kinds ------------------------------------------------------


def create(cluster: Cluster, gvp: GVP, body: dict[str, Any]) -> dict[str, Any]:
    group, version, plural = gvp
    ns = body["metadata"]["namespace"]
    return dict(cluster.custom.create_namespaced_custom_object(group, version, ns, plural, body))


def read(cluster: Cluster, gvp: GVP, ns: str, name: str) -> dict[str, Any]:
    group, version, plural = gvp
    return dict(cluster.custom.get_namespaced_custom_object(group, version, ns, plural, name))


def update(cluster: Cluster, gvp: GVP, ns: str, name: str, change: Callable[[dict], None]) -> None:
    """Get, change, Update (Kueue's Eventually around an Update: again on a conflict)."""
    group, version, plural = gvp

    def write() -> bool:
        obj = read(cluster, gvp, ns, name)
        change(obj)
        try:
            cluster.custom.replace_namespaced_custom_object(group, version, ns, plural, name, obj)
        except client.ApiException as err:
            raise AssertionError(f"update refused: {err.status} {err.body}") from None
        return True

    eventually(write, TIMEOUT, f"{name} updated")


def deleted(cluster: Cluster, gvp: GVP, ns: str, name: str, timeout: float = LONG_TIMEOUT) -> None:
    """util.ExpectObjectToBeDeleted(..., deleteNow=true): deleted and waited for."""
    group, version, plural = gvp
    try:
        cluster.custom.delete_namespaced_custom_object(group, version, ns, plural, name)
    except client.ApiException as err:
        if err.status != 404:
            raise
    gone_from(cluster, gvp, ns, name, timeout, "the manager")


def gone_from(cluster: Cluster, gvp: GVP, ns: str, name: str, timeout: float, where: str) -> None:
    eventually(lambda: gone(lambda: read(cluster, gvp, ns, name)), timeout,
               f"{gvp[2]}/{name} gone from {where}")  # fmt: skip


def gone_from_workers(mk: MultiKueueSetup, gvp: GVP, name: str) -> None:
    """util.ExpectObjectToBeDeletedOnClusters for a job of `gvp`."""
    for worker in mk.workers:
        gone_from(worker.cluster, gvp, mk.ns, name, LONG_TIMEOUT, worker.name)


def workload_gone_from_workers(mk: MultiKueueSetup, name: str) -> None:
    """util.ExpectObjectToBeDeletedOnClusters for the Workload."""
    for worker in mk.workers:
        eventually(lambda w=worker: w.workload(name, mk.ns) is None, LONG_TIMEOUT,
                   f"workload {name} gone from {worker.name}")  # fmt: skip


def name_of(kind: str, group: str, obj: dict[str, Any]) -> str:
    """GetWorkloadNameFor<Kind>(name, uid)."""
    return workload_name(kind, group, obj["metadata"]["name"], obj["metadata"]["uid"])


def resources(requests: dict[str, str]) -> dict[str, Any]:
    return {"requests": dict(requests), "limits": dict(requests)}


def play_errors(operators: Played) -> None:
    """The players' errors, said as soon as a wait fails."""
    errors = [e for op in operators.operators for e in op.errors]
    errors += [e for c in operators.lws for e in c.errors]
    errors += [e for r in operators.ray for e in r.errors]
    assert not errors, f"the operators' players failed: {errors[:3]}"


# ----- LeaderWorkerSet ---------------------------------------------------------------------


def make_lws(mk: MultiKueueSetup, replicas: int) -> dict[str, Any]:
    """testingleaderworkerset.MakeLeaderWorkerSet("leaderworkerset", ns).Image(agnhost,
    WaitForDeletion).Replicas(n).Size(2).RequestAndLimit(cpu 100m, memory 100M)
    .Queue(lq).TerminationGracePeriod(1)."""
    body = make_leader_worker_set("leaderworkerset", mk.ns, queue=mk.lq, size=2,
                                  replicas=replicas, cpu="100m")  # fmt: skip
    body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "resources"] = resources(SMALL)  # fmt: skip
    return body


def lws_workloads(lws: dict[str, Any], count: int) -> list[str]:
    """leaderworkerset.GetWorkloadName(uid, name, index) of each group."""
    meta = lws["metadata"]
    return [workload_name("LeaderWorkerSet", LWS_GROUP, f"{meta['name']}-{i}", meta["uid"])
            for i in range(count)]  # fmt: skip


def admitted_on(worker: Worker, names: list[str], ns: str) -> None:
    def all_admitted() -> bool:
        for name in names:
            wl = worker.workload(name, ns)
            assert wl is not None, f"{name} not on {worker.name}"
            assert is_admitted(wl), f"{name} not admitted on {worker.name}: {wl.get('status')}"
        return True

    eventually(all_admitted, MEDIUM_TIMEOUT, f"{names} admitted on {worker.name}")


def lws_deleted_everywhere(mk: MultiKueueSetup, worker: Worker, names: list[str]) -> None:
    """'Deleting the leaderworkerset' and 'Checking that all workloads are deleted from
    manager and worker clusters'."""
    deleted(mk.manager, LWS, mk.ns, "leaderworkerset")
    gone_from(worker.cluster, LWS, mk.ns, "leaderworkerset", MEDIUM_TIMEOUT, worker.name)

    def all_gone() -> bool:
        for name in names:
            assert mk.manager.workload(name, mk.ns) is None, f"{name} still on the manager"
            assert worker.workload(name, mk.ns) is None, f"{name} still on {worker.name}"
        return True

    eventually(all_gone, MEDIUM_TIMEOUT, "the workloads deleted everywhere")


@kueue_case(GO, WHEN + "Should sync a LeaderWorkerSet and run replicas on worker cluster")
def test_leaderworkerset_runs_on_worker(mk: MultiKueueSetup, operators: Played) -> None:
    lws = create(mk.manager, LWS, make_lws(mk, 2))
    names = lws_workloads(lws, 2)
    worker = mk.by_cluster[expect_admitted_and_get_worker(mk.manager, names[0], mk.ns, mk.check)]
    admitted_on(worker, names, mk.ns)
    eventually(lambda: read(worker.cluster, LWS, mk.ns, "leaderworkerset"), TIMEOUT,
               f"the LeaderWorkerSet synced to {worker.name}")  # fmt: skip

    def ready() -> bool:
        play_errors(operators)
        status = read(worker.cluster, LWS, mk.ns, "leaderworkerset").get("status") or {}
        assert status.get("readyReplicas") == 2, status
        return True

    eventually(ready, MEDIUM_TIMEOUT, f"all replicas ready on {worker.name}")

    def gated() -> bool:
        pods = mk.manager.core.list_namespaced_pod(
            mk.ns, label_selector=f"{SET_NAME}=leaderworkerset"
        ).items
        assert pods, "no pods on the manager"
        for pod in pods:
            gates = [g.name for g in pod.spec.scheduling_gates or []]
            assert GATE in gates, f"{pod.metadata.name} not gated: {gates}"
        return True

    eventually(gated, TIMEOUT, "the manager's pods gated")
    lws_deleted_everywhere(mk, worker, names)


@kueue_case(GO, WHEN + "Should dispatch all LeaderWorkerSet workloads to the same worker")
def test_leaderworkerset_workloads_on_one_worker(mk: MultiKueueSetup, operators: Played) -> None:
    lws = create(mk.manager, LWS, make_lws(mk, 3))
    names = lws_workloads(lws, 3)
    eventually(lambda: all(mk.manager.workload(n, mk.ns) for n in names), TIMEOUT,
               "the workloads created on the manager")  # fmt: skip
    worker = mk.by_cluster[expect_admitted_and_get_worker(mk.manager, names[0], mk.ns, mk.check)]
    admitted_on(worker, names[:1], mk.ns)
    eventually(lambda: read(worker.cluster, LWS, mk.ns, "leaderworkerset"), TIMEOUT,
               f"the LeaderWorkerSet synced to {worker.name}")  # fmt: skip

    def same_worker() -> bool:
        primary = (mk.manager.workload(names[0], mk.ns) or {}).get("status") or {}
        assert primary.get("clusterName"), f"{names[0]} has no clusterName"
        for name in names[1:]:
            status = (mk.manager.workload(name, mk.ns) or {}).get("status") or {}
            assert status.get("clusterName") == primary["clusterName"], (name, status)
        return True

    eventually(same_worker, MEDIUM_TIMEOUT, "the followers dispatched to the same worker")
    lws_deleted_everywhere(mk, worker, names)


# ----- JobSet, AppWrapper, Kubeflow, Trainer -----------------------------------------------


def make_jobset(mk: MultiKueueSetup) -> dict[str, Any]:
    """testingjobset.MakeJobSet("job-set", ns).Queue(lq).ReplicatedJobs(replicated-job-1:
    2 replicas, parallelism 2, completions 2, agnhost WaitForDeletion).RequestAndLimit(cpu
    100m, memory 100M).TerminationGracePeriod(1)."""
    container = {"name": "c", "image": AGNHOST, "args": BEHAVIOR_WAIT_FOR_DELETION,
                 "resources": resources(SMALL)}  # fmt: skip
    job = {"parallelism": 2, "completions": 2, "backoffLimit": 0,
           "template": {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                                 "containers": [container]}}}  # fmt: skip
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "job-set", "namespace": mk.ns, "labels": {QUEUE_LABEL: mk.lq}},
            "spec": {"suspend": True, "replicatedJobs": [
                {"name": "replicated-job-1", "replicas": 2, "template": {"spec": job}}]}}  # fmt: skip


@kueue_case(GO, WHEN + "Should run a jobSet on worker if admitted")
def test_jobset_runs_on_worker(mk: MultiKueueSetup, operators: Played) -> None:
    js = create(mk.manager, JOBSET, make_jobset(mk))
    name = name_of("JobSet", "jobset.x-k8s.io", js)
    worker = mk.by_cluster[expect_admitted_and_get_worker(mk.manager, name, mk.ns, mk.check)]

    def live_status() -> bool:
        play_errors(operators)
        status = read(mk.manager, JOBSET, mk.ns, "job-set").get("status") or {}
        got = [{k: s.get(k, 0) for k in ("name", "ready", "active", "suspended")}
               for s in status.get("replicatedJobsStatus") or []]  # fmt: skip
        want = [{"name": "replicated-job-1", "ready": 2, "active": 2, "suspended": 0}]
        assert got == want, status
        return True

    eventually(live_status, MEDIUM_TIMEOUT, "the manager's JobSet to take the worker's status")
    worker.terminate_active_pods(mk.ns, 4, 0, f"{JOBSET_NAME}=job-set")

    def finished() -> bool:
        found = condition(mk.manager.workload(name, mk.ns), "Finished")
        got = {k: found.get(k) for k in ("status", "reason", "message")}
        want = {"status": "True", "reason": "Succeeded", "message": "jobset completed successfully"}
        assert got == want, found
        return True

    eventually(finished, MEDIUM_TIMEOUT, "the workload finished")
    workload_gone_from_workers(mk, name)
    gone_from_workers(mk, JOBSET, "job-set")
    made = read(mk.manager, JOBSET, mk.ns, "job-set")
    assert made["spec"].get("suspend", True) is False, made["spec"]
    completed = condition(made, "Completed")
    got = {k: completed.get(k) for k in ("status", "reason", "message")}
    assert got == {"status": "True", "reason": "AllJobsCompleted",
                   "message": "jobset completed successfully"}, made.get("status")  # fmt: skip


@kueue_case(GO, WHEN + "Should run an appwrapper containing a job on worker if admitted")
def test_appwrapper_runs_on_worker(mk: MultiKueueSetup, operators: Played) -> None:
    container = {"name": "c", "image": AGNHOST, "args": BEHAVIOR_WAIT_FOR_DELETION,
                 "resources": resources(SMALL)}  # fmt: skip
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "job-1", "namespace": mk.ns},
           "spec": {"suspend": False, "parallelism": 2, "completions": 2,
                    "template": {"spec": {"restartPolicy": "Never",
                                          "terminationGracePeriodSeconds": 1,
                                          "containers": [container]}}}}  # fmt: skip
    aw = create(mk.manager, APPWRAPPER, {
        "apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
        "metadata": {"name": "aw", "namespace": mk.ns, "labels": {QUEUE_LABEL: mk.lq}},
        "spec": {"suspend": True, "components": [{"template": job}]}})  # fmt: skip
    name = name_of("AppWrapper", "workload.codeflare.dev", aw)
    worker = mk.by_cluster[expect_admitted_and_get_worker(mk.manager, name, mk.ns, mk.check)]

    def running() -> bool:
        play_errors(operators)
        phase = (read(mk.manager, APPWRAPPER, mk.ns, "aw").get("status") or {}).get("phase")
        assert phase == "Running", phase
        return True

    eventually(running, MEDIUM_TIMEOUT, "the manager's AppWrapper Running")
    worker.terminate_active_pods(mk.ns, 2, 0, "batch.kubernetes.io/job-name=job-1")
    expect_workload_to_finish(mk.manager, name, mk.ns)
    workload_gone_from_workers(mk, name)
    gone_from_workers(mk, APPWRAPPER, "aw")
    made = read(mk.manager, APPWRAPPER, mk.ns, "aw")
    assert made["spec"].get("suspend") is False, made["spec"]
    assert (made.get("status") or {}).get("phase") == "Succeeded", made.get("status")


def replica(image_args: list[str] | None, restart: str, count: int = 1) -> dict[str, Any]:
    """One replica spec of Kueue's Kubeflow wrappers: container `c`, agnhost, 100m/100M."""
    container: dict[str, Any] = {"name": "c", "image": AGNHOST, "resources": resources(SMALL)}
    if image_args is not None:
        container["args"] = image_args
    return {"replicas": count, "restartPolicy": restart,
            "template": {"spec": {"restartPolicy": "Never", "nodeSelector": {},
                                  "terminationGracePeriodSeconds": 1,
                                  "containers": [container]}}}  # fmt: skip


def expect_finished_and_gone(
    mk: MultiKueueSetup, gvp: GVP, name: str, wl: str, replica_type: str, want: dict[str, Any],
    operators: Played,
) -> None:  # fmt: skip
    """'Waiting for the <Kind> to finish' (its replica status on the manager, its Workload
    finished) and 'Checking no objects are left in the worker clusters'."""

    def done() -> bool:
        play_errors(operators)
        status = read(mk.manager, gvp, mk.ns, name).get("status") or {}
        got = (status.get("replicaStatuses") or {}).get(replica_type)
        assert got is not None, status
        got = {k: v for k, v in got.items() if v not in (0, None)}
        assert got == want, got
        return True

    eventually(done, MEDIUM_TIMEOUT, f"the {replica_type} replicas succeeded")
    expect_workload_to_finish(mk.manager, wl, mk.ns)
    workload_gone_from_workers(mk, wl)
    gone_from_workers(mk, gvp, name)


@kueue_case(GO, WHEN + "Should run a kubeflow PyTorchJob on worker if admitted")
def test_pytorchjob_runs_on_worker(mk: MultiKueueSetup, operators: Played) -> None:
    specs = {"Master": replica(BEHAVIOR_EXIT_FAST, "Never"), "Worker": replica(None, "Never")}
    job = create(mk.manager, PYTORCHJOB, {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "pytorchjob1", "namespace": mk.ns, "labels": {QUEUE_LABEL: mk.lq}},
        "spec": {"runPolicy": {"suspend": True, "managedBy": "kueue.x-k8s.io/multikueue"},
                 "pytorchReplicaSpecs": specs}})  # fmt: skip
    name = name_of("PyTorchJob", "kubeflow.org", job)
    expect_admitted_and_get_worker(mk.manager, name, mk.ns, mk.check)
    selector = ("training.kubeflow.org/job-name=pytorchjob1,"
                "training.kubeflow.org/operator-name=pytorchjob-controller,"
                "training.kubeflow.org/replica-type=master")  # fmt: skip
    want = {"succeeded": 1, "selector": selector}
    expect_finished_and_gone(mk, PYTORCHJOB, "pytorchjob1", name, "Master", want, operators)


@kueue_case(GO, WHEN + "Should run a MPIJob on worker if admitted")
def test_mpijob_runs_on_worker(mk: MultiKueueSetup, operators: Played) -> None:
    specs = {"Launcher": replica(BEHAVIOR_EXIT_FAST, "OnFailure"),
             "Worker": replica(BEHAVIOR_EXIT_FAST, "OnFailure")}  # fmt: skip
    job = create(mk.manager, MPIJOB, {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": "mpijob1", "namespace": mk.ns, "labels": {QUEUE_LABEL: mk.lq}},
        "spec": {"runPolicy": {"suspend": True, "managedBy": "kueue.x-k8s.io/multikueue"},
                 "mpiReplicaSpecs": specs}})  # fmt: skip
    name = name_of("MPIJob", "kubeflow.org", job)
    expect_admitted_and_get_worker(mk.manager, name, mk.ns, mk.check)
    expect_finished_and_gone(mk, MPIJOB, "mpijob1", name, "Launcher", {"succeeded": 1}, operators)


@kueue_case(GO, WHEN + "Should run a TrainJob on worker if admitted")
def test_trainjob_runs_on_worker(mk: MultiKueueSetup, operators: Played) -> None:
    tj = create(mk.manager, TRAINJOB, {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "trainjob-test", "namespace": mk.ns,
                     "labels": {QUEUE_LABEL: mk.lq}},
        "spec": {"suspend": True, "runtimeRef": {"name": "torch-distributed"},
                 "trainer": {"image": AGNHOST, "command": ["/agnhost"],
                             "args": BEHAVIOR_EXIT_FAST,
                             "resourcesPerNode": resources(SMALL)}}})  # fmt: skip
    name = name_of("TrainJob", "trainer.kubeflow.org", tj)
    expect_admitted_and_get_worker(mk.manager, name, mk.ns, mk.check)

    def unsuspended() -> bool:
        play_errors(operators)
        spec = read(mk.manager, TRAINJOB, mk.ns, "trainjob-test")["spec"]
        assert spec.get("suspend", False) is False, spec
        return True

    eventually(unsuspended, VERY_LONG_TIMEOUT, "the manager's TrainJob unsuspended")


# ----- Ray ----------------------------------------------------------------------------------


def ray_spec(head_cpu: str, worker_cpu: str, grace: int | None = None) -> dict[str, Any]:
    """RequestAndLimit(head, cpu), RequestAndLimit(worker, cpu), Image(kuberay test image)."""
    return cluster_spec(head_cpu=head_cpu, worker_cpu=worker_cpu, grace=grace)


def end_ray_script(worker: Worker, ns: str, ray_job: str) -> None:
    """Ray's script ends (the entrypoint exits 0): the submitter's pod on the worker."""
    worker.terminate_active_pods(ns, 1, 0, f"job-name={ray_job}")


@kueue_case(GO, RAY_WHEN + "Should run a RayJob on worker if admitted")
def test_rayjob_runs_on_worker(mk: MultiKueueSetup, operators: Played) -> None:
    body = make_ray_job("rayjob1", mk.ns, mk.lq, ray_spec("1", "0.5", grace=1))
    job = create(mk.manager, RAYJOB, body)
    name = name_of("RayJob", RAY, job)
    worker = mk.by_cluster[expect_admitted_and_get_worker(mk.manager, name, mk.ns, mk.check)]
    end_ray_script(worker, mk.ns, "rayjob1")

    def complete() -> bool:
        play_errors(operators)
        status = read(mk.manager, RAYJOB, mk.ns, "rayjob1").get("status") or {}
        assert status.get("jobDeploymentStatus") == "Complete", status
        return True

    eventually(complete, VERY_LONG_TIMEOUT, "the RayJob complete on the manager")
    expect_workload_to_finish(mk.manager, name, mk.ns)
    workload_gone_from_workers(mk, name)
    gone_from_workers(mk, RAYJOB, "rayjob1")


@kueue_case(GO, RAY_WHEN + "Should run a RayCluster on worker if admitted")
def test_raycluster_runs_on_worker(mk: MultiKueueSetup, operators: Played) -> None:
    made = create(mk.manager, RAYCLUSTER,
                  make_ray_cluster("raycluster1", mk.ns, mk.lq, ray_spec("1", "0.5")))  # fmt: skip
    name = name_of("RayCluster", RAY, made)
    expect_admitted_and_get_worker(mk.manager, name, mk.ns, mk.check)

    def ready() -> bool:
        play_errors(operators)
        status = read(mk.manager, RAYCLUSTER, mk.ns, "raycluster1").get("status") or {}
        got = {k: status.get(k) for k in
               ("desiredWorkerReplicas", "readyWorkerReplicas", "availableWorkerReplicas")}  # fmt: skip
        assert got == dict.fromkeys(got, 1), status
        return True

    eventually(ready, VERY_LONG_TIMEOUT, "the RayCluster ready on the manager")


@kueue_case(GO, RAY_WHEN + "Should scale an elastic RayCluster on worker if admitted")
def test_elastic_raycluster_scales_on_worker(mk: MultiKueueSetup, operators: Played) -> None:
    body = make_ray_cluster("raycluster-elastic", mk.ns, mk.lq, ray_spec("200m", "200m"),
                            elastic=True)  # fmt: skip
    assert body["metadata"]["annotations"] == {ELASTIC: "true"}
    made = create(mk.manager, RAYCLUSTER, body)
    meta = made["metadata"]
    name = slice_name("RayCluster", RAY, meta["name"], meta["uid"], meta["generation"])
    expect_admitted_and_get_worker(mk.manager, name, mk.ns, mk.check)

    def desired(count: int) -> Callable[[], bool]:
        def check() -> bool:
            play_errors(operators)
            status = read(mk.manager, RAYCLUSTER, mk.ns, "raycluster-elastic").get("status")
            assert (status or {}).get("desiredWorkerReplicas") == count, status
            return True

        return check

    def scale(count: int) -> Callable[[dict], None]:
        return lambda rc: rc["spec"]["workerGroupSpecs"][0].update(replicas=count)

    eventually(desired(1), VERY_LONG_TIMEOUT, "one worker on the worker cluster")
    update(mk.manager, RAYCLUSTER, mk.ns, "raycluster-elastic", scale(3))
    eventually(desired(3), VERY_LONG_TIMEOUT, "three workers on the worker cluster")
    update(mk.manager, RAYCLUSTER, mk.ns, "raycluster-elastic", scale(1))
    eventually(desired(1), VERY_LONG_TIMEOUT, "one worker again on the worker cluster")


SERVE_CONFIG = """applications:
  - name: hello_app
    import_path: hello_serve:app
    route_prefix: /
    deployments:
      - name: HelloWorld
        num_replicas: {replicas}
        max_replicas_per_node: 1
        ray_actor_options:
          num_cpus: 0.2"""
HELLO_SERVE = """from ray import serve

@serve.deployment
class HelloWorld:
    def __call__(self, request):
        return "Hello, World!"

app = HelloWorld.bind()"""


def make_service(mk: MultiKueueSetup) -> dict[str, Any]:
    """The case's RayService: head 1 cpu, workers 0.5 cpu (group small-group, 1 to 2), the
    Serve app from ConfigMap rayservice-hello mounted on every Ray node."""
    spec = ray_spec("1", "0.5", grace=1)
    spec["headGroupSpec"]["rayStartParams"]["object-store-memory"] = "100000000"
    volume = {"name": "code-sample", "configMap": {"name": "rayservice-hello", "items": [
        {"key": "hello_serve.py", "path": "hello_serve.py"}]}}  # fmt: skip
    for template in (spec["headGroupSpec"]["template"],
                     spec["workerGroupSpecs"][0]["template"]):  # fmt: skip
        template["spec"]["volumes"] = [copy.deepcopy(volume)]
        container = template["spec"]["containers"][0]
        container["env"] = [{"name": "PYTHONPATH", "value": "/home/ray/samples:$PYTHONPATH"}]
        container["volumeMounts"] = [{"name": "code-sample", "mountPath": "/home/ray/samples"}]
    group = spec["workerGroupSpecs"][0]
    group.update(groupName="small-group", minReplicas=1, maxReplicas=2)
    return make_ray_service("rayservice1", mk.ns, mk.lq, spec,
                            serve_config=SERVE_CONFIG.format(replicas=1))  # fmt: skip


@kueue_case(GO, RAY_WHEN + "Should run a RayService on worker if admitted")
def test_rayservice_runs_on_worker(mk: MultiKueueSetup, operators: Played) -> None:
    config_map = {"metadata": {"name": "rayservice-hello", "namespace": mk.ns},
                  "data": {"hello_serve.py": HELLO_SERVE}}  # fmt: skip
    for cluster in (mk.manager, *(w.cluster for w in mk.workers)):
        cluster.core.create_namespaced_config_map(mk.ns, copy.deepcopy(config_map))
    service = create(mk.manager, RAYSERVICE, make_service(mk))
    name = name_of("RayService", RAY, service)
    worker = mk.by_cluster[expect_admitted_and_get_worker(mk.manager, name, mk.ns, mk.check)]

    def running() -> bool:
        play_errors(operators)
        made = read(mk.manager, RAYSERVICE, mk.ns, "rayservice1")
        assert made["spec"]["rayClusterConfig"].get("suspend") is False, made["spec"]
        assert condition(made, "Ready").get("status") == "True", made.get("status")
        return True

    eventually(running, VERY_LONG_TIMEOUT, "the RayService running on the manager")
    first, updated = SERVE_CONFIG.format(replicas=1), SERVE_CONFIG.format(replicas=2)

    def recorded() -> str:
        copy_there = read(worker.cluster, RAYSERVICE, mk.ns, "rayservice1")
        assert copy_there["spec"].get("serveConfigV2") == first, copy_there["spec"]
        return str(copy_there["metadata"]["uid"])

    uid = eventually(recorded, LONG_TIMEOUT, "the worker's copy with the first Serve config")
    update(mk.manager, RAYSERVICE, mk.ns, "rayservice1",
           lambda s: s["spec"].update(serveConfigV2=updated))  # fmt: skip

    def forwarded() -> bool:
        copy_there = read(worker.cluster, RAYSERVICE, mk.ns, "rayservice1")
        assert copy_there["spec"].get("serveConfigV2") == updated, copy_there["spec"]
        assert copy_there["metadata"]["uid"] == uid, "the worker's copy was made again"
        return True

    eventually(forwarded, MEDIUM_TIMEOUT, "the Serve config forwarded in place")
