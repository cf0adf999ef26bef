"""MultiKueue's orchestrated preemption: one worker at a time may preempt for a dispatched Workload.

With Kueue's MultiKueueOrchestratedPreemption gate on, the manager sends each copy with a
closed `kueue.x-k8s.io/multikueue` preemption gate. A worker admits a gated copy that fits,
but one that needs to preempt waits and says so. The manager opens the gate of one such copy
(the one that said so first) and opens no other for five minutes, so two workers never evict
for the same Workload at once (Kueue v0.19.2's workloadToOpenPreemptionGate).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from extender.core.admission.concurrent import PREEMPTION_GATED
from extender.core.api.models import Workload
from extender.core.api.parse import ManifestError
from extender.core.jobframework.adapter import as_mapping, as_sequence
from extender.core.jobframework.workloads import creation_seconds

GATE = "MultiKueueOrchestratedPreemption"
PREEMPTION_GATE = "kueue.x-k8s.io/multikueue"
GATES_FIELD = "spec.preemptionGates"
SINGLE_PREEMPTION_TIMEOUT = 300.0  # seconds before another worker's gate may open (Kueue's)
BLOCKED = "BlockedOnPreemptionGates"  # Kueue's condition; Tower's worker says it on QuotaReserved

Obj = dict[str, Any]


def gated_copy(copy: Obj) -> Obj:
    """The worker's copy with only MultiKueue's gate, closed: the manager's own gates are
    the manager's."""
    spec = dict(as_mapping(copy.get("spec")))
    spec["preemptionGates"] = [{"name": PREEMPTION_GATE}]
    return {**copy, "spec": spec}


def _seconds(value: Any) -> float:
    try:
        return creation_seconds(value, "time")
    except ManifestError:
        return 0.0


def opened_at(workload: Mapping[str, Any]) -> float | None:
    """When MultiKueue's gate of this copy was opened (None: closed or absent)."""
    for gate in as_sequence(as_mapping(workload.get("status")).get("preemptionGates")):
        gate = as_mapping(gate)
        if gate.get("name") == PREEMPTION_GATE and gate.get("position") == "Open":
            return _seconds(gate.get("lastTransitionTime"))
    return None


def has_gate(workload: Mapping[str, Any]) -> bool:
    gates = as_sequence(as_mapping(workload.get("spec")).get("preemptionGates"))
    return any(as_mapping(g).get("name") == PREEMPTION_GATE for g in gates)


def acting_on_gate(workload: Mapping[str, Any], model: Workload) -> Workload:
    """A worker's model of a copy with MultiKueue's gate: it is queued (the gate no longer
    keeps it waiting) and may preempt only once the gate is open."""
    gates = as_sequence(as_mapping(workload.get("spec")).get("preemptionGates"))
    if not has_gate(workload):
        return model
    unacted = model.unacted
    if all(as_mapping(g).get("name") == PREEMPTION_GATE for g in gates):
        unacted = tuple(p for p in unacted if p != GATES_FIELD)
    return replace(model, unacted=unacted, preemption_gated=opened_at(workload) is None)


def blocked_since(workload: Mapping[str, Any]) -> float | None:
    """When the copy said it needs to preempt but its gate is closed (None: it did not)."""
    for c in as_sequence(as_mapping(workload.get("status")).get("conditions")):
        c = as_mapping(c)
        kind, status = c.get("type"), c.get("status")
        if (kind == BLOCKED and status == "True") or (
            kind == "QuotaReserved" and status == "False" and c.get("message") == PREEMPTION_GATED
        ):
            return _seconds(c.get("lastTransitionTime"))
    return None


def worker_to_ungate(
    remotes: Mapping[str, Mapping[str, Any] | None], now: float
) -> tuple[str | None, float | None]:
    """The worker whose copy's gate opens now (the first to ask), and when to look again: no
    gate opens within five minutes of the last one opened."""
    last_opened: float | None = None
    first: tuple[float, str] | None = None
    for cluster in sorted(remotes):
        remote = remotes[cluster]
        if remote is None or not has_gate(remote):
            continue
        opened = opened_at(remote)
        if opened is not None:
            last_opened = opened if last_opened is None else max(last_opened, opened)
            continue
        since = blocked_since(remote)
        if since is not None and (first is None or since < first[0]):
            first = (since, cluster)
    if first is None:
        return None, None
    if last_opened is not None and now - last_opened < SINGLE_PREEMPTION_TIMEOUT:
        return None, SINGLE_PREEMPTION_TIMEOUT - (now - last_opened)
    return first[1], SINGLE_PREEMPTION_TIMEOUT


def open_gate_patch(remote: Mapping[str, Any], at: str) -> Obj:
    """The status merge patch that opens MultiKueue's gate of a copy (others kept)."""
    others = [
        dict(as_mapping(g))
        for g in as_sequence(as_mapping(remote.get("status")).get("preemptionGates"))
        if as_mapping(g).get("name") != PREEMPTION_GATE
    ]
    opened = {"name": PREEMPTION_GATE, "position": "Open", "lastTransitionTime": at}
    return {"status": {"preemptionGates": [*others, opened]}}
