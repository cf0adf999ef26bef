"""Kueue's FailureRecoveryPolicy on the API double: a pod that opted in (its annotation
kueue.x-k8s.io/safe-to-forcefully-delete: "true") and is stuck terminating on a node tainted
unreachable is marked Failed with the KueueFailureRecovery condition, told in
a Warning event and deleted with no grace period, once the policy's time past its
deletionTimestamp is up; on a reachable node, or without the annotation, it is left alone."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from extender.core.admission.failure_recovery import SAFE_TO_DELETE, UNREACHABLE
from extender.kube.api import resources as r
from extender.kube.api.events import Recorder
from extender.kube.controller.recovery.pod_termination import PodTermination
from tests.controller.conftest import eventually

HOLD = "example.com/job-tracking"  # what the Job controller's finalizer does: hold the pod
GRACE = 0.5  # the policy's minute, shortened


def make_pod(cluster: Any, name: str, *, opted_in: bool) -> None:
    annotations = {SAFE_TO_DELETE: "true"} if opted_in else {}
    meta = {"name": name, "namespace": "default", "annotations": annotations,
            "finalizers": [HOLD]}  # fmt: skip
    spec = {"nodeName": "node-1", "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": "pause"}]}  # fmt: skip
    cluster.admin.create(r.PODS, {"metadata": meta, "spec": spec}, "default")
    cluster.admin.patch(r.PODS, name, {"status": {"phase": "Running"}}, "default",
                        subresource="status")  # fmt: skip


def taint_unreachable(cluster: Any) -> None:
    taint = {"key": UNREACHABLE, "effect": "NoExecute"}
    cluster.admin.patch(r.NODES, "node-1", {"spec": {"taints": [taint]}})


def recovery_condition(pod: dict[str, Any] | None) -> dict[str, Any] | None:
    for c in ((pod or {}).get("status") or {}).get("conditions") or ():
        if c.get("type") == "KueueFailureRecovery":
            return c
    return None


@pytest.fixture
def policy(cluster) -> Iterator[PodTermination]:
    cluster.admin.create(r.NODES, {"metadata": {"name": "node-1"}})
    stop = threading.Event()
    client = cluster.controller_client()
    recorder = Recorder(client)
    running = PodTermination(client, stop=stop, recorder=recorder, grace=GRACE).start()
    yield running
    stop.set()
    recorder.close()


def test_a_pod_stuck_terminating_on_an_unreachable_node_is_failed_and_deleted(cluster, policy):
    make_pod(cluster, "stuck", opted_in=True)
    make_pod(cluster, "not-opted-in", opted_in=False)
    for name in ("stuck", "not-opted-in"):
        cluster.admin.delete(r.PODS, name, "default")
    # Its node is reachable: its kubelet will finish it, past the policy's time or not.
    time.sleep(GRACE + 1.5)
    pod = cluster.get("pods", "stuck", "default")
    assert pod["status"]["phase"] == "Running"
    assert recovery_condition(pod) is None
    taint_unreachable(cluster)
    pod = eventually(
        lambda: (p := cluster.get("pods", "stuck", "default")) and recovery_condition(p) and p,
        what="the stuck pod let go",
    )
    assert pod["status"]["phase"] == "Failed"
    condition = recovery_condition(pod)
    assert condition["status"] == "True"
    assert condition["reason"] == "KueueForcefullyDeleted"
    assert condition["message"] == (
        "Pod forcefully terminated after 0s grace period due to unreachable node `node-1` "
        f"(triggered by `{SAFE_TO_DELETE}` annotation)"
    )
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 0  # deleted with no grace period
    events = eventually(
        lambda: [e for e in cluster.api.list("events", "default")
                 if e.get("reason") == "KueueForcefullyDeleted"],
        what="the Warning event",
    )  # fmt: skip
    assert events[0]["type"] == "Warning"
    assert events[0]["involvedObject"]["name"] == "stuck"
    # The Job controller counts the failed pod and lets it go: it is gone.
    pod["metadata"]["finalizers"] = []
    cluster.admin.update(r.PODS, pod)
    eventually(lambda: cluster.get("pods", "stuck", "default") is None, what="the pod gone")
    # A pod that did not opt in waits for its kubelet, unreachable node or not.
    other = cluster.get("pods", "not-opted-in", "default")
    assert other["status"]["phase"] == "Running"
    assert recovery_condition(other) is None
    assert policy.let_go == 1
