"""A kind Tower has never heard of, added through the job framework's registry alone.

ToyJob (tests/data/toy-kind/, a CRD written for this test) has its own suspend field
(`spec.paused`), one podSet of `spec.workers` pods and a `status.phase`. Its adapter lives
here, is registered for the test and removed after it; nothing else in Tower names it. No
webhook knows the kind, so the controller's backstop pauses a queued ToyJob created running;
the rest is what a user sees with kubectl: the Workload Kueue would name, its admission, the
ToyJob unpaused on the flavor's nodes, and the quota given back once its operator (played by
the test) says it succeeded.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from extender.core.api.parse import ManifestError, as_map
from extender.core.jobframework import registry
from extender.core.jobframework.adapter import (
    JobAdapter,
    Obj,
    PodSetTemplate,
    as_mapping,
    replace_maps,
    template_placement,
)
from extender.kube.api.resources import Resource
from tests import yamlc
from tests.controller.conftest import CRDS, eventually
from tests.controller.test_preemption import cluster_queue, conditions, flavor, local_queue

CRD = yamlc.safe_load(
    (Path(__file__).resolve().parents[1] / "data" / "toy-kind" / "toyjobs.yaml").read_text()
)
TOYJOBS = Resource("example.com", "v1", "toyjobs", "ToyJob", True)
FRAMEWORK = "example.com/toyjob"
INTEGRATIONS = ("batch/job", FRAMEWORK)
CLUSTER_QUEUE_ANNOTATION = "tower.dev/cluster-queue"


class ToyJobAdapter(JobAdapter):
    """ToyJob as Tower's job framework sees it: one podSet, `workers`, from spec.template."""

    framework = FRAMEWORK
    group, version, kind, plural = "example.com", "v1", "ToyJob", "toyjobs"
    suspend_path = ("spec", "paused")

    def pod_sets(self, obj: Mapping[str, Any]) -> list[PodSetTemplate]:
        spec = as_map(obj.get("spec"), "spec")
        template = as_map(spec.get("template"), "spec.template")
        workers = spec.get("workers", 1)
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
            raise ManifestError("spec.workers", f"must be a non-negative integer, got {workers!r}")
        return [PodSetTemplate("workers", workers, template, "spec.template")]

    def templates(self, obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        return {"workers": as_mapping(as_mapping(obj.get("spec")).get("template"))}

    def is_active(self, obj: Mapping[str, Any]) -> bool:
        return bool(as_mapping(obj.get("status")).get("activeWorkers"))

    def finished(self, obj: Mapping[str, Any]) -> tuple[str, str] | None:
        status = as_mapping(obj.get("status"))
        phase = status.get("phase")
        if phase not in ("Succeeded", "Failed"):
            return None
        return str(phase), str(status.get("message") or f"ToyJob {str(phase).lower()}")

    def templates_patch(self, obj: Mapping[str, Any], wanted: Mapping[str, Obj]) -> Obj:
        if "workers" not in wanted:
            return {}
        current = self.templates(obj)["workers"]
        return {"spec": {"template": replace_maps(current, wanted["workers"])}}

    def kept(self, obj: Mapping[str, Any]) -> Obj:
        return {"template": template_placement(as_mapping(obj.get("spec")).get("template"))}


@pytest.fixture
def toy_kind() -> Iterator[ToyJobAdapter]:
    """The toy kind in the registry for one test, and gone again after it."""
    assert FRAMEWORK not in registry.ADAPTERS
    adapter = registry.register(ToyJobAdapter())
    assert isinstance(adapter, ToyJobAdapter)
    try:
        yield adapter
    finally:
        del registry.ADAPTERS[FRAMEWORK]


@pytest.fixture
def toy_cluster(cluster, toy_kind, start_controller):
    """The ToyJob CRD served, Kueue-style queues with 3 cpus on pool-a, and the controller
    managing batch Jobs and ToyJobs."""
    cluster.admin.create(CRDS, CRD)
    cluster.apply(
        flavor("pool-a", {"pool": "a"}), cluster_queue("cq", 3), local_queue("user-queue", "cq")
    )
    start_controller(integrations=INTEGRATIONS)
    return cluster


# ----- what the user does and sees ---------------------------------------------------------


def create_toyjob(cluster, name: str, workers: int, cpu: str = "1") -> dict[str, Any]:
    """A ToyJob created running (`paused: false`), queued by its label."""
    return cluster.admin.create(
        TOYJOBS,
        {
            "apiVersion": "example.com/v1",
            "kind": "ToyJob",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
            "spec": {
                "paused": False,
                "workers": workers,
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "worker",
                                "image": "busybox:1.36",
                                "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                            }
                        ],
                    },
                },
            },
        },
        "default",
    )


def toyjob(cluster, name: str) -> dict[str, Any]:
    return cluster.get("toyjobs", name, "default") or {}


def succeed(cluster, name: str) -> None:
    """The ToyJob's operator says it succeeded, through the status subresource."""
    cluster.admin.patch(
        TOYJOBS,
        name,
        {"status": {"phase": "Succeeded", "activeWorkers": 0, "message": "all workers done"}},
        "default",
        subresource="status",
    )


def kueue_workload_name(kind: str, group: str, name: str, uid: str) -> str:
    """Kueue's GetWorkloadNameForOwnerWithGVK, written out again here: `<kind>-<name>-` and
    the first 5 hex digits of sha1(kind, group, name, uid joined by newlines)."""
    digest = hashlib.sha1(f"{kind}\n{group}\n{name}\n{uid}".encode()).hexdigest()
    return f"{kind.lower()}-{name}-{digest[:5]}"


def is_true(workload: Mapping[str, Any] | None, kind: str) -> bool:
    return (conditions(workload or {}).get(kind) or {}).get("status") == "True"


def wait_for(
    what: str, read: Callable[[], Any], ok: Callable[[Any], Any], timeout: float = 15.0
) -> Any:
    """conftest's `eventually`, with what was last seen in the failure."""
    seen: list[Any] = [None]

    def check() -> Any:
        seen[0] = read()
        return ok(seen[0])

    try:
        eventually(check, timeout=timeout, what=what)
    except AssertionError as err:
        raise AssertionError(f"{err}; last seen: {seen[0]!r}") from None
    return seen[0]


def cq_status(cluster) -> dict[str, Any]:
    return (cluster.get("clusterqueues", "cq") or {}).get("status") or {}


class History:
    """Every committed version of the ToyJobs, as `kubectl get toyjobs -w` would show them:
    (name, paused, the cluster-queue annotation Tower sets when it starts one)."""

    def __init__(self, cluster) -> None:
        self._lock = threading.Lock()
        self._seen: list[tuple[str, Any, Any]] = []
        cluster.api.hooks.append(self)

    def __call__(self, event: str, kind: Any, obj: dict[str, Any]) -> None:
        if kind.plural != "toyjobs" or event == "DELETED":
            return
        meta = obj.get("metadata") or {}
        entry = (
            meta.get("name"),
            (obj.get("spec") or {}).get("paused"),
            (meta.get("annotations") or {}).get(CLUSTER_QUEUE_ANNOTATION),
        )
        with self._lock:
            self._seen.append(entry)

    def of(self, name: str) -> list[tuple[Any, Any]]:
        with self._lock:
            return [(paused, cq) for n, paused, cq in self._seen if n == name]


# ----- the tests ---------------------------------------------------------------------------


def test_a_toy_kind_is_queued_admitted_started_and_finished(toy_cluster):
    cluster = toy_cluster
    history = History(cluster)
    created = create_toyjob(cluster, "toy", workers=2)
    uid = created["metadata"]["uid"]
    assert created["spec"]["paused"] is False  # no webhook knows ToyJobs

    # Tower's Workload, named as Kueue names it, with one podSet of 2 workers.
    expected_name = kueue_workload_name("ToyJob", "example.com", "toy", uid)
    assert expected_name.startswith("toyjob-toy-")
    workload = wait_for(
        "the ToyJob's Workload",
        lambda: cluster.workload_of(created),
        lambda wl: wl is not None,
    )
    assert workload["metadata"]["name"] == expected_name
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == [("workers", 2)]
    assert workload["spec"]["queueName"] == "user-queue"
    owner = workload["metadata"]["ownerReferences"][0]
    assert (owner["apiVersion"], owner["kind"], owner["name"], owner["uid"]) == (
        "example.com/v1",
        "ToyJob",
        "toy",
        uid,
    )

    # Admitted: quota reserved on pool-a, then Admitted.
    workload = wait_for(
        "the ToyJob's Workload to be admitted (QuotaReserved and Admitted True)",
        lambda: cluster.get("workloads", expected_name, "default"),
        lambda wl: is_true(wl, "QuotaReserved") and is_true(wl, "Admitted"),
    )
    admission = workload["status"]["admission"]
    assert admission["clusterQueue"] == "cq"
    [assignment] = admission["podSetAssignments"]
    assert assignment["name"] == "workers"
    assert assignment["flavors"]["cpu"] == "pool-a"
    assert assignment["resourceUsage"]["cpu"] == "2"

    # Started: unpaused, its pods placed on the flavor's nodes and labelled as Kueue does.
    job = wait_for(
        "the ToyJob to be unpaused by its admission",
        lambda: toyjob(cluster, "toy"),
        lambda j: (
            (j.get("spec") or {}).get("paused") is False
            and CLUSTER_QUEUE_ANNOTATION in ((j.get("metadata") or {}).get("annotations") or {})
        ),
    )
    template = job["spec"]["template"]
    assert template["spec"]["nodeSelector"] == {"pool": "a"}
    assert template["metadata"]["labels"] == {
        "app": "toy",
        "kueue.x-k8s.io/podset": "workers",
        "kueue.x-k8s.io/local-queue-name": "user-queue",
        "kueue.x-k8s.io/cluster-queue-name": "cq",
    }
    assert template["spec"]["containers"][0]["image"] == "busybox:1.36"  # the rest untouched
    assert job["spec"]["workers"] == 2
    assert job["metadata"]["annotations"][CLUSTER_QUEUE_ANNOTATION] == "cq"

    # It ran unpaused only before Tower's backstop paused it, and after its admission.
    seen = history.of("toy")
    assert seen[0] == (False, None), seen
    first_paused = seen.index((True, None)) if (True, None) in seen else None
    assert first_paused is not None, f"Tower never paused the ToyJob: {seen}"
    started = [i for i, (paused, cq) in enumerate(seen) if paused is False and cq == "cq"]
    assert started, f"never unpaused with an admission: {seen}"
    assert started[0] > first_paused, seen
    assert all(paused is True for paused, _ in seen[first_paused : started[0]]), seen

    # The story, on the ToyJob itself (`kubectl describe toyjob toy`).
    def reasons() -> list[str]:
        return [
            e.get("reason")
            for e in cluster.api.list("events", "default")
            if (e.get("involvedObject") or {}).get("name") == "toy"
            and (e.get("involvedObject") or {}).get("kind") == "ToyJob"
        ]

    wait_for(
        "Events Suspended, CreatedWorkload and Started on the ToyJob",
        reasons,
        lambda told: {"Suspended", "CreatedWorkload", "Started"} <= set(told),
    )

    # A second ToyJob needs 2 cpus; only 1 of the 3 is free: it waits, paused.
    second = create_toyjob(cluster, "toy-2", workers=2)
    second_name = kueue_workload_name("ToyJob", "example.com", "toy-2", second["metadata"]["uid"])
    waiting = wait_for(
        "the second ToyJob's Workload to wait for quota (QuotaReserved False, WaitingForQuota)",
        lambda: conditions(cluster.get("workloads", second_name, "default") or {}).get(
            "QuotaReserved"
        ),
        lambda c: c is not None and (c["status"], c["reason"]) == ("False", "WaitingForQuota"),
    )
    assert "cpu" in waiting["message"], waiting
    assert toyjob(cluster, "toy-2")["spec"]["paused"] is True
    wait_for(
        "the ClusterQueue to show 1 admitted and 1 pending",
        lambda: cq_status(cluster),
        lambda s: (s.get("admittedWorkloads"), s.get("pendingWorkloads")) == (1, 1),
    )

    # The operator says the first succeeded: its Workload finishes, its quota goes back, and
    # the second is admitted and started in its place.
    succeed(cluster, "toy")
    finished = wait_for(
        "the first Workload to be Finished",
        lambda: cluster.get("workloads", expected_name, "default"),
        lambda wl: is_true(wl, "Finished"),
    )
    assert conditions(finished)["Finished"]["reason"] == "Succeeded"
    wait_for(
        "the second Workload to be admitted",
        lambda: cluster.get("workloads", second_name, "default"),
        lambda wl: is_true(wl, "Admitted"),
    )
    wait_for(
        "the second ToyJob to be unpaused",
        lambda: toyjob(cluster, "toy-2"),
        lambda j: (j.get("spec") or {}).get("paused") is False,
    )
    assert toyjob(cluster, "toy")["spec"]["paused"] is False  # a finished job is left alone

    # The second finishes too: nothing is admitted any more.
    succeed(cluster, "toy-2")
    wait_for(
        "the second Workload to be Finished",
        lambda: cluster.get("workloads", second_name, "default"),
        lambda wl: is_true(wl, "Finished"),
    )
    status = wait_for(
        "the ClusterQueue to show 0 admitted and 0 pending",
        lambda: cq_status(cluster),
        lambda s: (s.get("admittedWorkloads"), s.get("pendingWorkloads")) == (0, 0),
    )
    usage = {
        r["name"]: r["total"]
        for f in status.get("flavorsUsage") or []
        for r in f.get("resources") or []
    }
    assert usage == {"cpu": "0", "memory": "0"}, status


def test_a_toy_job_that_does_not_fit_waits_with_a_reason(toy_cluster):
    cluster = toy_cluster
    created = create_toyjob(cluster, "too-big", workers=4)  # 4 cpus; the queue has 3
    name = kueue_workload_name("ToyJob", "example.com", "too-big", created["metadata"]["uid"])
    workload = wait_for(
        "the Workload of the ToyJob that does not fit to say why it waits",
        lambda: cluster.get("workloads", name, "default"),
        lambda wl: (
            (conditions(wl or {}).get("QuotaReserved") or {}).get("status") == "False"
            and conditions(wl)["QuotaReserved"].get("message")
        ),
    )
    waiting = conditions(workload)["QuotaReserved"]
    assert waiting["reason"] == "ExceedsMaxQuota", waiting  # Kueue's reason: it never fits
    assert "cpu" in waiting["message"], waiting
    assert "pool-a" in waiting["message"], waiting
    assert not is_true(workload, "Admitted")
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == [("workers", 4)]
    job = wait_for(
        "the ToyJob that does not fit to be paused by Tower's backstop",
        lambda: toyjob(cluster, "too-big"),
        lambda j: (j.get("spec") or {}).get("paused") is True,
    )
    assert CLUSTER_QUEUE_ANNOTATION not in (job["metadata"].get("annotations") or {})
    assert "nodeSelector" not in job["spec"]["template"]["spec"]
    wait_for(
        "the ClusterQueue to show it pending, nothing admitted",
        lambda: cq_status(cluster),
        lambda s: (s.get("admittedWorkloads"), s.get("pendingWorkloads")) == (0, 1),
    )
