"""Kueue's FailureRecoveryPolicy: when a pod stuck terminating on an unreachable node is let go.

A pod that opted in (annotation kueue.x-k8s.io/safe-to-forcefully-delete: "true") and is being
deleted waits for its kubelet to confirm. On a node whose kubelet is gone (the node controller
taints it node.kubernetes.io/unreachable) that never comes, and whatever waits for the pod (a
Job deleted in the foreground, a StatefulSet's replacement) waits with it. A minute after the
pod's deletionTimestamp, Kueue marks it Failed with a KueueFailureRecovery condition and deletes
it at once (pkg/controller/failurerecovery/pod_termination_controller.go). A pod on a reachable
node, or whose node is gone from the API, is left to its kubelet.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

SAFE_TO_DELETE = "kueue.x-k8s.io/safe-to-forcefully-delete"
GATE = "FailureRecoveryPolicy"
CONDITION = "KueueFailureRecovery"
REASON = "KueueForcefullyDeleted"
UNREACHABLE = "node.kubernetes.io/unreachable"
GRACE = 60.0  # Kueue's forcefulTerminationGracePeriod: one minute past deletionTimestamp
TERMINAL = ("Succeeded", "Failed")


def opted_in(annotations: Any, deleting: bool) -> bool:
    """Whether a pod is one the policy may let go: opted in, and being deleted."""
    return deleting and isinstance(annotations, dict) and annotations.get(SAFE_TO_DELETE) == "true"


@dataclass(frozen=True, slots=True)
class TerminatingPod:
    """What the policy reads of an opted-in pod being deleted."""

    key: str  # namespace/name
    node: str  # spec.nodeName; "" when never bound
    deletion_at: float  # metadata.deletionTimestamp, in seconds
    deletion_grace: int  # metadata.deletionGracePeriodSeconds
    phase: str


class Verdict(StrEnum):
    WAIT = "wait"  # not a minute yet: look again at `due`
    LEAVE = "leave"  # its node is reachable (or unknown): its kubelet will finish it
    LET_GO = "let go"  # marked Failed, then deleted at once


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    due: float = 0.0  # for WAIT: when to look again
    message: str = ""  # for LET_GO: the condition's and the event's words


def decide(
    pod: TerminatingPod, node_unreachable: bool | None, now: float, grace: float = GRACE
) -> Decision:
    """What the policy does with a terminating pod now; `node_unreachable` is None when its
    node is not known (gone, or never bound)."""
    due = pod.deletion_at + grace
    if now < due:
        return Decision(Verdict.WAIT, due=due)
    if not node_unreachable:
        return Decision(Verdict.LEAVE)
    total = _duration(pod.deletion_grace + grace)
    return Decision(
        Verdict.LET_GO,
        message=(
            f"Pod forcefully terminated after {total} grace period due to unreachable node "
            f"`{pod.node}` (triggered by `{SAFE_TO_DELETE}` annotation)"
        ),
    )


def status_patch(conditions: list[Any], phase: str, message: str, now_text: str) -> dict[str, Any]:
    """The pod's status as the policy leaves it: Failed unless it already ended, with the
    KueueFailureRecovery condition added to those it has."""
    status: dict[str, Any] = {
        "conditions": [
            *conditions,
            {
                "type": CONDITION,
                "status": "True",
                "reason": REASON,
                "message": message,
                "lastTransitionTime": now_text,
            },
        ]
    }
    if phase not in TERMINAL:
        status["phase"] = "Failed"
    return {"status": status}


def _duration(seconds: float) -> str:
    """Seconds as Go prints a time.Duration (1m1s), as Kueue's message shows it."""
    whole = int(seconds)
    minutes, rest = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes}m{rest}s"
    if minutes:
        return f"{minutes}m{rest}s"
    return f"{rest}s"
