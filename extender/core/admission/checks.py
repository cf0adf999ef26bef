"""Kueue's two-phase admission: which AdmissionChecks apply to a reservation, and what they decide.

Quota is reserved first (QuotaReserved); the Workload is Admitted, and its job started, only
once every check that applies is Ready. A check in Retry gives the reservation back: the
Workload is evicted and queued again after the check's requeueAfterSeconds. A Rejected check
deactivates it. Each check's controller (Tower's ProvisioningRequest controller, or one that
is not Tower's) sets its state in the Workload's status.admissionChecks; everything here is a
function of those states.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from extender.core.api import parse
from extender.core.api.models import Admission, ClusterQueue, Workload
from extender.core.jobframework.adapter import PodSetInfo
from extender.core.jobframework.workloads import creation_seconds

PENDING = "Pending"
READY = "Ready"
RETRY = "Retry"
REJECTED = "Rejected"
STATES = (PENDING, READY, RETRY, REJECTED)

# Kueue's reasons and messages (pkg/controller/core/workload_controller.go, pkg/workload).
EVICTED_BY_CHECK = "AdmissionCheck"  # the Evicted reason, and the DeactivationTarget's
RESET_MESSAGE = "Reset to Pending after eviction. Previously: {state}"


@dataclass(frozen=True, slots=True)
class CheckState:
    """One entry of a Workload's status.admissionChecks."""

    name: str
    state: str = PENDING
    message: str = ""
    last_transition: float = 0.0
    retry_count: int = 0
    requeue_after: int | None = None  # requeueAfterSeconds
    pod_set_updates: tuple[Mapping[str, object], ...] = ()


def check_states(obj: Mapping[str, Any]) -> list[CheckState]:
    """status.admissionChecks as CheckStates, in the order written. An entry of the wrong
    shape counts as Pending (its controller writes it again); a time that does not parse
    counts as long ago."""
    status = obj.get("status")
    entries = status.get("admissionChecks") if isinstance(status, Mapping) else None
    out: list[CheckState] = []
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            continue
        state = entry.get("state")
        try:
            since = creation_seconds(entry.get("lastTransitionTime"), "lastTransitionTime")
        except parse.ManifestError:
            since = 0.0
        updates = entry.get("podSetUpdates")
        retry, after = entry.get("retryCount"), entry.get("requeueAfterSeconds")
        out.append(
            CheckState(
                entry["name"],
                state if state in STATES else PENDING,
                str(entry.get("message") or ""),
                since,
                retry if isinstance(retry, int) and not isinstance(retry, bool) else 0,
                after if isinstance(after, int) and not isinstance(after, bool) else None,
                tuple(u for u in updates if isinstance(u, Mapping))
                if isinstance(updates, list)
                else (),
            )
        )
    return out


class Decision(NamedTuple):
    """What the checks' states decide for a reservation."""

    action: str  # WAIT, ADMIT, RETRY_ACTION or REJECT
    check: str = ""  # the check that decided it (RETRY, REJECT)
    message: str = ""


WAIT = "wait"
ADMIT = "admit"
RETRY_ACTION = "retry"
REJECT = "reject"


def applicable(cq: ClusterQueue, admission: Admission) -> tuple[str, ...]:
    """The checks a reservation in this ClusterQueue must pass, by name: every check of its
    admissionChecksStrategy with no onFlavors, and those naming a flavor the admission uses."""
    used = {flavor for psa in admission.pod_set_assignments for flavor in psa.flavors.values()}
    if not used:
        return ()  # nothing assigned: no check applies, as Kueue decides
    return tuple(
        sorted(r.name for r in cq.admission_checks if not r.on_flavors or r.on_flavors & used)
    )


def synced(current: Sequence[CheckState], names: Iterable[str], now: float) -> list[CheckState]:
    """status.admissionChecks for a reservation: the checks that apply, in name order, each
    keeping the state it has (and its retry count), a new one Pending."""
    have = {c.name: c for c in current}
    return [have.get(name) or CheckState(name, last_transition=now) for name in sorted(names)]


def decide(checks: Sequence[CheckState]) -> Decision:
    """Rejected first (the Workload is deactivated), then Retry (the reservation is given
    back), then every check Ready (the Workload is admitted); otherwise it waits. The message
    is Kueue's: `AdmissionCheck in Retry state: "name" (its message)`."""
    for state, action in ((REJECTED, REJECT), (RETRY, RETRY_ACTION)):
        found = sorted((c for c in checks if c.state == state), key=lambda c: c.name)
        if found:
            named = "; ".join(
                f'"{c.name}"' + (f" ({c.message})" if c.message else "") for c in found
            )
            plural = "s" if len(found) > 1 else ""
            return Decision(
                action, found[0].name, f"AdmissionCheck{plural} in {state} state: {named}"
            )
    if all(check.state == READY for check in checks):
        return Decision(ADMIT)
    return Decision(WAIT)


def requeue_at(checks: Sequence[CheckState]) -> float | None:
    """When a Workload evicted for a check in Retry may be queued again: the latest of each
    Retry check's transition plus its requeueAfterSeconds (None: at once)."""
    times = [
        c.last_transition + c.requeue_after for c in checks if c.state == RETRY and c.requeue_after
    ]
    return max(times) if times else None


def reset_after_eviction(checks: Sequence[CheckState], now: float) -> list[CheckState]:
    """Kueue's reset when a reservation is given back: every check not Pending is Pending
    again, saying what it was; one in Retry counts one more retry."""
    out = []
    for c in checks:
        if c.state == PENDING:
            out.append(c)
            continue
        out.append(
            replace(
                c,
                state=PENDING,
                message=RESET_MESSAGE.format(state=c.state),
                last_transition=now,
                retry_count=c.retry_count + (1 if c.state == RETRY else 0),
                pod_set_updates=(),
            )
        )
    return out


class UpdateConflictError(Exception):
    """Two podSetUpdates (or one and the admission's flavors) set one key to different values:
    Kueue's permanent start failure (the Workload finishes with FailedToStart)."""


FAILED_TO_START = "FailedToStart"


def with_updates(
    infos: Mapping[str, PodSetInfo], checks: Sequence[CheckState]
) -> dict[str, PodSetInfo]:
    """Each podSet's PodSetInfo with the podSetUpdates of the checks merged in, check by check
    in name order, as Kueue merges them at start: labels, annotations and nodeSelector gain
    the update's keys (the same key with another value is an UpdateConflictError), tolerations
    are added unless already there."""
    out = dict(infos)
    for check in sorted(checks, key=lambda c: c.name):
        done: set[str] = set()
        for update in check.pod_set_updates:
            name = update.get("name")
            if not isinstance(name, str) or name not in out or name in done:
                continue
            done.add(name)
            info = out[name]
            merged = {
                part: _merged(current, update.get(part), part, check.name)
                for part, current in (
                    ("labels", info.labels),
                    ("annotations", info.annotations),
                    ("nodeSelector", info.node_selector),
                )
            }
            tolerations = list(info.tolerations)
            extra = update.get("tolerations")
            for toleration in extra if isinstance(extra, list) else ():
                if isinstance(toleration, Mapping) and toleration not in tolerations:
                    tolerations.append(dict(toleration))
            out[name] = replace(
                info,
                labels=merged["labels"],
                annotations=merged["annotations"],
                node_selector=merged["nodeSelector"],
                tolerations=tolerations,
            )
    return out


def _merged(current: Mapping[str, str], extra: object, part: str, check: str) -> dict[str, str]:
    out = dict(current)
    for key, value in extra.items() if isinstance(extra, Mapping) else ():
        value = str(value)
        if key in out and out[key] != value:
            raise UpdateConflictError(
                f'in admission check "{check}": invalid admission check PodSetUpdate: '
                f"conflict for {part}: conflict for key={key}, value1={out[key]}, value2={value}"
            )
        out[str(key)] = value
    return out


def with_placement_updates(workload: Workload, checks: Sequence[CheckState]) -> Workload | str:
    """The workload as a delayed topology placement sees it: each podSet's nodeSelector and
    tolerations with its Ready checks' podSetUpdates merged in (a ProvisioningRequest's
    node selector keeps the pods to the capacity it brought), as Kueue's second pass merges
    them; or Kueue's message when an update cannot be merged."""
    pod_sets = list(workload.pod_sets)
    for check in sorted(checks, key=lambda c: c.name):
        if check.state != READY:
            continue
        for update in check.pod_set_updates:
            name = update.get("name")
            for i, ps in enumerate(pod_sets):
                if ps.name != name:
                    continue
                try:
                    selector = _merged(
                        ps.node_selector, update.get("nodeSelector"), "nodeSelector", check.name
                    )
                    extra = parse.tolerations(update.get("tolerations") or [], "tolerations")
                except (UpdateConflictError, parse.ManifestError) as e:
                    return f"invalid podSetUpdate for PodSet {ps.name}, error: {e}"
                tolerations = ps.tolerations + tuple(t for t in extra if t not in ps.tolerations)
                pod_sets[i] = replace(ps, node_selector=selector, tolerations=tolerations)
    if pod_sets == list(workload.pod_sets):
        return workload
    return replace(workload, pod_sets=tuple(pod_sets))
