"""Kueue's judgement of a failed TAS node: when a workload must leave a host of its assignment.

Kueue v0.19.2's node controller (pkg/controller/tas/node_controller.go) at its default gates:
a Node that is gone, or has no Ready condition, has failed at once; a NotReady Node has failed
for a workload only once none of that workload's pods on it is still progressing (running,
pending, not being deleted) — TASReplaceNodeOnPodTermination, on; a Ready Node with a
NoSchedule or NoExecute taint the workload's pods do not tolerate for good has failed on the
same terms (TASReplaceNodeOnNodeTaints, on). TASReplaceNodeDueToNotReadyOverFixedTime
(deprecated, off) marks a Node NotReady for NODE_FAILURE_DELAY as failed whatever its pods do.

A failed host is recorded in the Workload's status.unhealthyNodes; a second one while the first
is recorded evicts the workload (`recorded`). Pods held to a host by their nodeSelector that no
kubelet will ever run are failed, as Kueue's node controller fails them (`late_pods`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from extender.core.api.labels import Taint, Toleration

REPLACE_ON_POD_TERMINATION = "TASReplaceNodeOnPodTermination"
REPLACE_DUE_TO_NOT_READY_OVER_FIXED_TIME = "TASReplaceNodeDueToNotReadyOverFixedTime"
REPLACE_ON_NODE_TAINTS = "TASReplaceNodeOnNodeTaints"
SKIP_REASSIGNMENT_FOR_POD_OWNED = "SkipReassignmentForPodOwnedWorkloads"

NODE_FAILURE_DELAY = 30.0  # seconds NotReady before the fixed-time gate calls a Node failed
SECOND_PASS_DELAY = 1.0  # Kueue's second pass comes this long after a host is recorded
SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")

MULTIPLE_FAILURES = (
    "Workload eviction triggered due to multiple TAS assigned node failures, including: {}"
)
NO_REPLACEMENT = "Workload was evicted as there was no replacement for unhealthy node(s): {}"


@dataclass(frozen=True, slots=True)
class NodeFailureGates:
    """Kueue v0.19.2's feature gates for failed TAS nodes, at their defaults."""

    replace_on_pod_termination: bool = True
    replace_due_to_not_ready_over_fixed_time: bool = False
    replace_on_node_taints: bool = True
    skip_reassignment_for_pod_owned: bool = True

    @classmethod
    def of(cls, gates: Mapping[str, bool]) -> NodeFailureGates:
        """The gates as a featureGates map sets them (a gate it does not name: its default)."""
        d = cls()
        return cls(
            gates.get(REPLACE_ON_POD_TERMINATION, d.replace_on_pod_termination),
            gates.get(
                REPLACE_DUE_TO_NOT_READY_OVER_FIXED_TIME,
                d.replace_due_to_not_ready_over_fixed_time,
            ),
            gates.get(REPLACE_ON_NODE_TAINTS, d.replace_on_node_taints),
            gates.get(SKIP_REASSIGNMENT_FOR_POD_OWNED, d.skip_reassignment_for_pod_owned),
        )


@dataclass(frozen=True, slots=True)
class NodeState:
    """What Kueue's node controller reads of a Node."""

    ready: str | None  # the Ready condition's status ("True", "False", "Unknown"); None: none
    ready_since: float = 0.0  # its lastTransitionTime, in seconds (0: unknown, long ago)
    taints: tuple[Taint, ...] = ()


class Health(enum.Enum):
    HEALTHY = "healthy"  # the workload stays; a recorded entry for the host is taken back
    UNHEALTHY = "unhealthy"  # the host is recorded in status.unhealthyNodes
    WAITING = "waiting"  # nothing is decided yet (the fixed delay is running)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A host of a workload's assignment, judged: whether the workload must leave it, whether
    Kueue looked at the pods there (then the late ones are failed), and when to look again."""

    health: Health
    checks_pods: bool = False
    recheck_at: float | None = None


def judge(
    node: NodeState | None,
    *,
    progressing: bool,
    tolerations: Sequence[Sequence[Toleration]],
    gates: NodeFailureGates,
    now: float,
) -> Verdict:
    """A host of a workload's topology assignment, judged as Kueue's node controller judges it.

    `node` is None when the Node is gone; `progressing` says whether a pod of the workload
    is bound there and neither terminated nor being deleted; `tolerations` are those of each
    podSet assigned there (its template's, its flavors', its checks' podSetUpdates')."""
    if node is None or node.ready is None:
        return Verdict(Health.UNHEALTHY)  # gone, or no kubelet ever reported: failed at once
    by_pods = Health.HEALTHY if progressing else Health.UNHEALTHY
    if node.ready != "True":
        due = node.ready_since + NODE_FAILURE_DELAY
        expired = now >= due
        if gates.replace_due_to_not_ready_over_fixed_time and expired:
            return Verdict(Health.UNHEALTHY, checks_pods=gates.replace_on_pod_termination)
        if not gates.replace_on_pod_termination:
            if not expired:
                return Verdict(Health.WAITING, recheck_at=due)
            return Verdict(Health.UNHEALTHY)
        # Kueue reconciles again only on the next event; with the fixed-time gate on, Tower
        # also looks again when the delay is over, as the gate says.
        recheck = due if gates.replace_due_to_not_ready_over_fixed_time else None
        return Verdict(by_pods, checks_pods=True, recheck_at=recheck)
    if not gates.replace_on_node_taints:
        return Verdict(Health.HEALTHY)
    untolerated, temporary = classify_taints(node.taints, tolerations)
    if untolerated:
        if not gates.replace_on_pod_termination:
            return Verdict(Health.UNHEALTHY)
        return Verdict(by_pods, checks_pods=True)
    if temporary:
        return Verdict(by_pods, checks_pods=True)
    return Verdict(Health.HEALTHY)


def classify_taints(
    taints: Iterable[Taint], tolerations: Sequence[Sequence[Toleration]]
) -> tuple[tuple[Taint, ...], tuple[Taint, ...]]:
    """(untolerated, tolerated only for a while) among a node's NoSchedule and NoExecute taints:
    untolerated when some podSet does not tolerate it; for a while when every podSet does but
    one only with tolerationSeconds. The rest are tolerated for good and change nothing."""
    untolerated: list[Taint] = []
    temporary: list[Taint] = []
    for taint in taints:
        if taint.effect not in SCHEDULING_EFFECTS:
            continue
        if not all(any(t.tolerates(taint) for t in ps) for ps in tolerations):
            untolerated.append(taint)
        elif not all(
            any(t.tolerates(taint) for t in ps if t.toleration_seconds is None)
            for ps in tolerations
        ):
            temporary.append(taint)
    return tuple(untolerated), tuple(temporary)


def plainly_healthy(ready: bool, taints: Iterable[Taint]) -> bool:
    """A Ready node with no NoSchedule or NoExecute taint: no pod leaving it can make it failed
    for a workload, so a pod's end there needs no second look."""
    return ready and not any(t.effect in SCHEDULING_EFFECTS for t in taints)


@dataclass(frozen=True, slots=True)
class Recorded:
    """What status.unhealthyNodes holds after a workload's hosts are judged, or the eviction
    Kueue makes instead when a second host fails while one is recorded."""

    unhealthy_nodes: tuple[str, ...]
    eviction: str | None = None


def recorded(current: Sequence[str], verdicts: Mapping[str, Verdict]) -> Recorded:
    """The hosts recorded once these verdicts are in: a recorded host judged healthy again is
    taken back; a newly failed one is recorded; one more failed host than one evicts, naming
    the recorded ones first (Kueue's evictWorkloadIfNeeded)."""
    kept = tuple(
        n for n in current if n not in verdicts or verdicts[n].health is not Health.HEALTHY
    )
    new = sorted(n for n, v in verdicts.items() if v.health is Health.UNHEALTHY and n not in kept)
    if new and (kept or len(new) > 1):
        return Recorded((), MULTIPLE_FAILURES.format(", ".join((*kept, *new))))
    return Recorded((*kept, *new))


@dataclass(frozen=True, slots=True)
class WaitingPod:
    """A pod of the workload that no node has taken, held to a host by its nodeSelector."""

    key: str
    host: str  # its nodeSelector's kubernetes.io/hostname
    pending: bool  # phase Pending
    gated: bool  # still behind the topology gate (it has no host yet, whatever it says)


def late_pods(
    pods: Iterable[WaitingPod],
    verdicts: Mapping[str, Verdict],
    exists: Mapping[str, bool],
) -> list[str]:
    """The pods to fail (phase Failed, condition TerminatedByKueue), as Kueue's node controller
    fails them: unbound, Pending and past the topology gate, held to a host whose pods it
    looked at (a failing host of the assignment), or to an existing host the assignment no
    longer has (a pod let through before its host was replaced). `verdicts` has a verdict for
    every host of the assignment; `exists` says whether a host's Node exists."""
    out = []
    for pod in pods:
        if not pod.pending or pod.gated:
            continue
        verdict = verdicts.get(pod.host)
        stray = verdict is None and exists.get(pod.host, False)
        if stray or (verdict is not None and verdict.checks_pods):
            out.append(pod.key)
    return sorted(out)
