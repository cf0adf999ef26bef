"""Every kind Kueue runs through MultiKueue by its managedBy, on a manager and a worker.

Kueue's example of each kind (MPIJob, PyTorchJob, RayJob, RayCluster, RayService,
AppWrapper, TrainJob) is created unchanged on the manager, under Kueue's
multikueue-setup.yaml; the worker has Kueue's single-clusterqueue-setup.yaml. As Kueue's
MultiKueue guide says of each: the webhook hands the job to MultiKueue (its managedBy, a
Kubeflow job's in its runPolicy), its quota is reserved on the manager, the worker admits
the copy of its Workload, and the job is made and started there by the worker's Tower, left
to the kind's own controller. The manager's job takes the worker's status whole; it finishes
with it (a RayCluster and a RayService never finish: they are deleted), and the copies on the
worker are removed. The operators do not run here: the test sets the worker's status as each
would. Both setups get a GPU quota as well, for the TrainJob example's GPU.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from certs import kube as certs_kube
from extender.core.admission.multikueue import MultiKueueSettings
from extender.core.jobframework import registry
from extender.kube.api import resources as r
from extender.kube.controller.context import Settings
from tests import yamlc
from tests.controller.conftest import CRDS, Cluster, Running, eventually
from tests.controller.test_kubeflow import condition, load
from tests.controller.test_pod_groups import LWS, STATEFULSETS, lws_pods, statefulset_pod
from tests.controller.workers import worker_cluster, worker_secret, worker_tower
from tests.servers import start_webhook

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLES = DATA / "kueue-v0.19.2" / "examples"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
GPU = "nvidia.com/gpu"
WORKER = "multikueue-test-worker1"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"

RAY_CRDS = sorted((DATA / "kuberay").glob("ray.io_*.yaml"))
TRAINER_CRDS = sorted((DATA / "trainer").glob("trainer.kubeflow.org_*.yaml"))
SUCCEEDED = {
    "type": "Succeeded",
    "status": "True",
    "reason": "JobSucceeded",
    "message": "done on the worker",
    "lastTransitionTime": "2026-12-01T00:00:00Z",
    "lastUpdateTime": "2026-12-01T00:00:00Z",
}


@dataclass(frozen=True)
class Kind:
    framework: str
    example: Path
    crds: tuple[Path, ...]
    # The worker's status as its operator writes it: done, or serving for a kind that never
    # finishes (it is deleted on the manager instead).
    status: dict[str, Any]
    finishes: bool = True
    # Objects both clusters need (a TrainJob's runtime).
    extra: tuple[Path, ...] = field(default=())


KINDS = {
    "mpijob": Kind(
        "kubeflow.org/mpijob",
        EXAMPLES / "jobs" / "sample-mpijob.yaml",
        (DATA / "kubeflow" / "kubeflow.org_mpijobs.v2beta1.yaml",),
        {"conditions": [SUCCEEDED]},
    ),
    "pytorchjob": Kind(
        "kubeflow.org/pytorchjob",
        EXAMPLES / "jobs" / "sample-pytorchjob.yaml",
        (DATA / "kubeflow" / "kubeflow.org_pytorchjobs.yaml",),
        {"conditions": [SUCCEEDED]},
    ),
    "rayjob": Kind(
        "ray.io/rayjob",
        EXAMPLES / "ray" / "ray-job-sample.yaml",
        tuple(RAY_CRDS),
        {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"},
    ),
    "raycluster": Kind(
        "ray.io/raycluster",
        EXAMPLES / "ray" / "ray-cluster-sample.yaml",
        tuple(RAY_CRDS),
        {"state": "ready"},
        finishes=False,
    ),
    "rayservice": Kind(
        "ray.io/rayservice",
        EXAMPLES / "ray" / "ray-service-sample.yaml",
        tuple(RAY_CRDS),
        {"conditions": [{**SUCCEEDED, "type": "Ready", "reason": "Running"}]},
        finishes=False,
    ),
    "appwrapper": Kind(
        "workload.codeflare.dev/appwrapper",
        EXAMPLES / "appwrapper" / "pytorch-sample.yaml",
        (DATA / "appwrapper" / "workload.codeflare.dev_appwrappers.yaml",),
        {"phase": "Succeeded"},
    ),
    "trainjob": Kind(
        "trainer.kubeflow.org/trainjob",
        EXAMPLES / "trainjob" / "trainjob-pytorch-distributed.yaml",
        tuple(TRAINER_CRDS),
        {
            "conditions": [
                {
                    "type": "Complete",
                    "status": "True",
                    "reason": "JobsCompleted",
                    "message": "done on the worker",
                    "lastTransitionTime": "2026-12-01T00:00:00Z",
                }
            ]
        },
        extra=(EXAMPLES / "trainjob" / "clustertrainingruntime-torch-distributed.yaml",),
    ),
}
SERVING = ("statefulset", "leaderworkerset.x-k8s.io/leaderworkerset")
FRAMEWORKS = ("batch/job", "pod", *SERVING, *(k.framework for k in KINDS.values()))
LWS_CRD = DATA / "lws" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"


@pytest.fixture
def worker_webhook(tmp_path: Path, webhook: Any) -> Iterator[Any]:
    """The worker's webhook: every kind here on, reading no queues (the worker's jobs are
    its own to run)."""
    server = start_webhook(
        webhook.certs, tmp_path / "w-metrics", "--integrations", ",".join(FRAMEWORKS), workers=1
    )
    yield server
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(timeout=20)


@pytest.fixture
def manager_webhook(tmp_path: Path, webhook: Any, cluster: Cluster) -> Iterator[Any]:
    """The manager's webhook: it reads the manager's queues, to hand their jobs over."""
    server = start_webhook(
        webhook.certs,
        tmp_path / "m-metrics",
        "--integrations",
        ",".join(FRAMEWORKS),
        "--kubeconfig",
        cluster.admin_config,
        workers=1,
    )
    ca = (webhook.certs / "ca.crt").read_bytes()
    certs_kube.install(cluster.admin.api_client, server.url, ca, FRAMEWORKS)
    yield server
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(timeout=20)


def _with_gpus(doc: dict[str, Any]) -> dict[str, Any]:
    if doc["kind"] == "ClusterQueue":
        group = doc["spec"]["resourceGroups"][0]
        group["coveredResources"].append(GPU)
        group["flavors"][0]["resources"].append({"name": GPU, "nominalQuota": "2"})
    return doc


def _resource(kind: Kind) -> r.Resource:
    return r.resource_of(registry.ADAPTERS[kind.framework])


def _install(cluster: Cluster, kind: Kind) -> None:
    for crd in kind.crds:
        cluster.admin.create(CRDS, yamlc.safe_load(crd.read_text()))
    for path in kind.extra:
        for doc in load(path):
            cluster.admin.create(
                r.Resource(
                    "trainer.kubeflow.org",
                    "v1alpha1",
                    "clustertrainingruntimes",
                    "ClusterTrainingRuntime",
                    False,
                ),
                doc,
            )


@contextmanager
def _manager_and_worker(
    cluster: Cluster, webhook: Any, worker_webhook: Any, tmp_path: Path, kind: Kind | None
) -> Iterator[Cluster]:
    """Kueue's setups on both (the kind's CRDs too), the manager naming the worker, and each
    with its own Tower; the worker is yielded."""
    with worker_cluster(tmp_path / "worker", worker_webhook) as worker:
        ca = (webhook.certs / "ca.crt").read_bytes()
        certs_kube.install(worker.admin.api_client, worker_webhook.url, ca, FRAMEWORKS)
        if kind is not None:
            for side in (cluster, worker):
                _install(side, kind)
        worker.apply(*(_with_gpus(d) for d in load(EXAMPLES / "single-clusterqueue-setup.yaml")))
        worker_secret(cluster, worker, "worker1-secret")
        cluster.apply(
            *(_with_gpus(d) for d in load(EXAMPLES / "multikueue" / "multikueue-setup.yaml"))
        )
        manager = Running(
            cluster.controller_client(),
            Settings(
                status_interval=0.05,
                integrations=FRAMEWORKS,
                multikueue=MultiKueueSettings(gc_interval=1.0),
            ),
        )
        try:
            with worker_tower(worker, integrations=FRAMEWORKS):
                # Once the check is Active, the manager's webhook hands the queue's jobs over.
                eventually(
                    lambda: (
                        condition(
                            cluster.get("admissionchecks", "sample-multikueue"), "Active"
                        ).get("status")
                        == "True"
                    ),
                    what="the MultiKueue check Active",
                )
                yield worker
        finally:
            manager.halt()


@pytest.mark.parametrize("name", list(KINDS))
def test_kueues_example_runs_on_the_worker(
    name, cluster, webhook, manager_webhook, worker_webhook, tmp_path
):
    kind = KINDS[name]
    adapter = registry.ADAPTERS[kind.framework]
    with _manager_and_worker(cluster, webhook, worker_webhook, tmp_path, kind) as worker:
        _run(cluster, worker, kind, adapter, _resource(kind))


def _admitted_on_worker(cluster: Cluster, name: str) -> dict[str, Any]:
    def admitted() -> dict[str, Any] | None:
        w = cluster.get("workloads", name, "default")
        return w if condition(w, "Admitted").get("status") == "True" else None

    found = eventually(admitted, timeout=30, what=f"the manager's Workload {name} admitted")
    assert found["status"]["clusterName"] == WORKER
    [state] = found["status"]["admissionChecks"]
    assert (state["state"], state["message"]) == (
        "Ready",
        f'The workload was admitted on "{WORKER}"',
    )
    return found


@pytest.mark.parametrize("example", ["kueue-pod.yaml", "kueue-pod-group.yaml"])
def test_kueues_pods_run_on_the_worker_and_stay_gated_here(
    example, cluster, webhook, manager_webhook, worker_webhook, tmp_path
):
    """A pod has no managedBy: as Kueue's pod adapter, the manager's pods stay gated, each is
    copied to the worker once it admits their Workload, and takes the worker's pod status."""
    pods = r.resource_of(registry.ADAPTERS["pod"])
    with _manager_and_worker(cluster, webhook, worker_webhook, tmp_path, None) as worker:
        made = [cluster.admin.create(pods, d, "default") for d in load(EXAMPLES / "pods" / example)]
        names = [p["metadata"]["name"] for p in made]
        group = made[0]["metadata"]["labels"].get("kueue.x-k8s.io/pod-group-name")
        if group is None:
            wl = eventually(lambda: cluster.workload_of(made[0]), what="the pod's Workload")
            key = wl["metadata"]["name"]
        else:
            key = group
        _admitted_on_worker(cluster, key)

        # On the worker: each pod, let through by the worker's Tower.
        def on_worker(name: str) -> dict[str, Any] | None:
            pod = worker.get("pods", name, "default")
            return pod if pod and not pod["spec"].get("schedulingGates") else None

        remote = [
            eventually(lambda n=n: on_worker(n), timeout=30, what=f"pod {n} ungated on the worker")
            for n in names
        ]
        for pod in remote:
            assert pod["metadata"]["annotations"][PREBUILT] == key
            assert pod["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
        # On the manager they never run: still gated, and saying so.
        for name in names:
            here = cluster.get("pods", name, "default")
            assert here["spec"]["schedulingGates"] == [
                {"name": "kueue.x-k8s.io/admission"},
                {"name": "kueue.x-k8s.io/topology"},
            ]

        # The worker's kubelet runs them: the manager's pods show it, still gated.
        for name in names:
            worker.admin.patch(
                pods,
                name,
                {
                    "spec": {"nodeName": "worker-node"},
                },
                "default",
            )
            worker.admin.patch(
                pods,
                name,
                {
                    "status": {
                        "phase": "Running",
                        "conditions": [
                            {"type": "PodScheduled", "status": "True"},
                            {"type": "Ready", "status": "True"},
                        ],
                    }
                },
                "default",
                subresource="status",
            )
        for name in names:
            status = eventually(
                lambda n=name: (
                    (s := cluster.get("pods", n, "default").get("status") or {}).get("phase")
                    == "Running"
                    and s
                ),
                timeout=20,
                what=f"the manager's pod {name} Running as the worker's",
            )
            assert {c["type"]: c["status"] for c in status["conditions"]}["PodScheduled"] == "True"
        # They succeed there: the manager's Workload finishes, and the copies go.
        for name in names:
            worker.admin.patch(
                pods, name, {"status": {"phase": "Succeeded"}}, "default", subresource="status"
            )
        finished = eventually(
            lambda: condition(cluster.get("workloads", key, "default"), "Finished"),
            timeout=20,
            what="the manager's Workload finished",
        )
        assert (finished["status"], finished["reason"]) == ("True", "Succeeded")
        eventually(
            lambda: (
                worker.get("workloads", key, "default") is None
                and all(worker.get("pods", n, "default") is None for n in names)
            ),
            timeout=20,
            what="the worker's copies removed",
        )


def test_a_copy_held_terminating_on_the_worker_is_deleted_once_not_again_and_again(
    cluster, webhook, manager_webhook, worker_webhook, tmp_path
):
    """The manager removes a finished Workload's copies. A pod someone else's finalizer keeps
    Terminating on the worker (a kubelet's grace period does the same) is deleted once: the
    manager waits for the worker to say it is gone, it does not send DELETE after DELETE."""
    pods = r.resource_of(registry.ADAPTERS["pod"])
    with _manager_and_worker(cluster, webhook, worker_webhook, tmp_path, None) as worker:
        [made] = [
            cluster.admin.create(pods, d, "default")
            for d in load(EXAMPLES / "pods" / "kueue-pod.yaml")
        ]
        name = made["metadata"]["name"]
        wl = eventually(lambda: cluster.workload_of(made), what="the pod's Workload")
        key = wl["metadata"]["name"]
        _admitted_on_worker(cluster, key)
        remote = eventually(
            lambda: (
                (p := worker.get("pods", name, "default"))
                and not p["spec"].get("schedulingGates")
                and p
            ),
            timeout=30,
            what="the pod ungated on the worker",
        )
        held = [*remote["metadata"].get("finalizers", []), "example.com/hold"]
        worker.admin.patch(pods, name, {"metadata": {"finalizers": held}}, "default")
        worker.admin.patch(pods, name, {"spec": {"nodeName": "worker-node"}}, "default")
        worker.admin.patch(
            pods, name, {"status": {"phase": "Succeeded"}}, "default", subresource="status"
        )
        eventually(
            lambda: (
                condition(cluster.get("workloads", key, "default"), "Finished").get("status")
                == "True"
            ),
            timeout=20,
            what="the manager's Workload finished",
        )
        path = f"/api/v1/namespaces/default/pods/{name}"
        eventually(
            lambda: (
                (worker.get("pods", name, "default") or {})
                .get("metadata", {})
                .get("deletionTimestamp")
            ),
            timeout=20,
            what="the worker's pod deleted",
        )
        time.sleep(3)  # what the manager does while the pod stays Terminating
        deletes = [m for m, p, _ in list(worker.api.requests) if m == "DELETE" and p == path]
        assert 1 <= len(deletes) <= 2, f"{len(deletes)} DELETEs of a pod already Terminating"
        worker.admin.patch(pods, name, {"metadata": {"finalizers": None}}, "default")
        eventually(
            lambda: (
                worker.get("pods", name, "default") is None
                and worker.get("workloads", key, "default") is None
            ),
            timeout=20,
            what="the worker's copies removed",
        )


def _run(cluster: Cluster, worker: Cluster, kind: Kind, adapter: Any, resource: r.Resource):
    [example] = load(kind.example)
    job_name = example["metadata"]["name"]
    created = cluster.admin.create(resource, example, "default")
    assert adapter.managed_by(created) == MULTIKUEUE, created["spec"]
    assert adapter.is_suspended(created)

    def workload() -> dict[str, Any] | None:
        return cluster.workload_of(created)

    admitted = eventually(
        lambda: (w := workload()) and condition(w, "Admitted").get("status") == "True" and w,
        timeout=30,
        what=f"the manager's {adapter.kind} Workload admitted",
    )
    key = admitted["metadata"]["name"]
    assert admitted["status"]["clusterName"] == WORKER
    [state] = admitted["status"]["admissionChecks"]
    assert (state["state"], state["message"]) == (
        "Ready",
        f'The workload was admitted on "{WORKER}"',
    )

    # On the worker: the job, made from the manager's, started by the worker's Tower and
    # left to the kind's own controller.
    remote = eventually(
        lambda: (
            (j := worker.get(resource.plural, job_name, "default"))
            and not adapter.is_suspended(j)
            and j
        ),
        timeout=30,
        what=f"the worker's {adapter.kind} started",
    )
    assert remote["metadata"]["annotations"][PREBUILT] == key
    assert remote["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
    # (trainer's CRD defaults it to its own controller's name)
    assert adapter.managed_by(remote) in (None, adapter.own_controller)
    remote_wl = worker.get("workloads", key, "default")
    assert condition(remote_wl, "Admitted").get("status") == "True"
    assert [o["name"] for o in remote_wl["metadata"]["ownerReferences"]] == [job_name]
    # The manager's job stays MultiKueue's: its own controller there never runs it.
    assert adapter.managed_by(cluster.get(resource.plural, job_name, "default")) == MULTIKUEUE

    if kind.framework == "ray.io/rayservice":
        # An in-place Serve update on the manager reaches the worker (Kueue's
        # MultiKueueRemoteSpecSync).
        serve = "applications:\n  - name: updated\n    import_path: app:main\n"
        cluster.admin.patch(resource, job_name, {"spec": {"serveConfigV2": serve}}, "default")
        eventually(
            lambda: (
                worker.get(resource.plural, job_name, "default")["spec"]["serveConfigV2"] == serve
            ),
            timeout=20,
            what="the worker's RayService given the new Serve config",
        )

    # The worker's status, as its operator writes it, is the manager's too.
    worker.admin.patch(resource, job_name, {"status": kind.status}, "default", subresource="status")
    want = worker.get(resource.plural, job_name, "default")["status"]
    eventually(
        lambda: cluster.get(resource.plural, job_name, "default").get("status") == want,
        timeout=20,
        what=f"the manager's {adapter.kind} taking the worker's status",
    )

    if kind.finishes:
        finished = eventually(
            lambda: condition(cluster.get("workloads", key, "default"), "Finished"),
            timeout=20,
            what="the manager's Workload finished",
        )
        assert (finished["status"], finished["reason"]) == ("True", "Succeeded")
    else:
        # It serves until deleted: deleting it on the manager removes it on the worker.
        cluster.admin.delete(resource, job_name, "default", propagation="Background")
    eventually(
        lambda: (
            worker.get("workloads", key, "default") is None
            and worker.get(resource.plural, job_name, "default") is None
        ),
        timeout=20,
        what="the worker's copies removed",
    )


def _controller_pods(kind: str, obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods its controller makes (no StatefulSet or LeaderWorkerSet controller runs here)."""
    if kind == "StatefulSet":
        return [statefulset_pod(obj, i) for i in range(3)]
    return [p for i in range(2) for p in lws_pods(obj, i)]


def _gated(cluster: Cluster, name: str) -> bool:
    pod = cluster.get("pods", name, "default")
    return pod is not None and bool(pod["spec"].get("schedulingGates"))


@pytest.mark.parametrize("kind", ["StatefulSet", "LeaderWorkerSet"])
def test_kueues_serving_examples_run_on_the_worker(
    kind, cluster, webhook, manager_webhook, worker_webhook, tmp_path
):
    """A StatefulSet or a LeaderWorkerSet has no managedBy: as Kueue's adapters, the object
    is copied to the worker that admitted its Workload (all of a LeaderWorkerSet's group
    Workloads go to the one its first went to), the manager's pods stay gated, and the
    worker's Tower runs the copy's pods under the manager's Workloads' names."""
    if kind == "StatefulSet":
        resource, sample = STATEFULSETS, EXAMPLES / "serving" / "sample-statefulset.yaml"
        adapter = registry.PARENTS["statefulset"]
    else:
        resource, sample = LWS, EXAMPLES / "serving" / "sample-leaderworkerset.yaml"
        adapter = registry.PARENTS["leaderworkerset.x-k8s.io/leaderworkerset"]
    with _manager_and_worker(cluster, webhook, worker_webhook, tmp_path, None) as worker:
        if kind == "LeaderWorkerSet":
            for side in (cluster, worker):
                side.admin.create(CRDS, yamlc.safe_load(LWS_CRD.read_text()))
        [example] = load(sample)
        created = cluster.admin.create(resource, example, "default")
        name = created["metadata"]["name"]
        keys = adapter.workload_names(created)
        for key in keys:
            _admitted_on_worker(cluster, key)

        # The manager's pods, as its controller makes them, stay gated.
        here = _controller_pods(kind, created)
        for pod in here:
            cluster.admin.create(r.PODS, pod, "default")

        # The worker has one copy, named by the manager's uid; its controller makes the pods,
        # and the worker's Tower lets them through under the manager's Workloads.
        remote = eventually(
            lambda: worker.get(resource.plural, name, "default"),
            timeout=30,
            what=f"the worker's {kind}",
        )
        meta = remote["metadata"]
        assert meta["labels"]["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
        assert (
            meta["annotations"]["kueue.x-k8s.io/multikueue-origin-uid"]
            == (created["metadata"]["uid"])
        )
        assert adapter.workload_names(remote) == keys
        for key in keys:
            copy = worker.get("workloads", key, "default")
            assert condition(copy, "Admitted").get("status") == "True", key
        there = _controller_pods(kind, remote)
        for pod in there:
            worker.admin.create(r.PODS, pod, "default")
        for pod in there:
            pod_name = pod["metadata"]["name"]
            eventually(
                lambda n=pod_name: not _gated(worker, n),
                timeout=20,
                what=f"the worker's pod {pod_name} let through",
            )
        for pod in here:
            assert _gated(cluster, pod["metadata"]["name"])
        # It serves until deleted: deleting it on the manager removes it on the worker.
        cluster.admin.delete(resource, name, "default", propagation="Background")
        eventually(
            lambda: (
                worker.get(resource.plural, name, "default") is None
                and all(worker.get("workloads", k, "default") is None for k in keys)
            ),
            timeout=30,
            what="the worker's copies removed",
        )
