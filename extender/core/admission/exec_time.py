"""A Workload's maximum execution time, as Kueue keeps it: the time left, the time run."""

from __future__ import annotations

# The DeactivationTarget Kueue sets once the time is up (its Evicted reason is then
# DeactivatedDueToMaximumExecutionTimeExceeded).
EXCEEDED = "MaximumExecutionTimeExceeded"
EXCEEDED_MESSAGE = "exceeding the maximum execution time"


def time_left(
    limit: int | None, past: int | None, admitted_since: float, now: float
) -> float | None:
    """Seconds an admitted Workload may still run: its limit, less the seconds it ran in
    earlier admissions, less the time since this one. None with no limit; 0 or less: the
    time is up."""
    if limit is None:
        return None
    return float(limit - (past or 0)) - (now - admitted_since)


def accumulated(past: int | None, admitted_since: float, now: float) -> int:
    """status.accumulatedPastExecutionTimeSeconds once an admission ends: the seconds of this
    one added, whole seconds truncated, as Kueue adds them."""
    return (past or 0) + int(max(0.0, now - admitted_since))


def stopped_reason(limit: int | None, past: int | None, namespace: str, name: str) -> str:
    """What `kubectl tower why` says of a Workload its limit stopped, and how to run it again
    (the seconds of its last admission still count, as Kueue counts them)."""
    allowed = f"{limit}s" if limit is not None else "its limit"
    ran = f" ({past}s count against it)" if past else ""
    return (
        f"stopped by its execution-time limit: it was admitted {allowed} in all "
        f"(spec.maximumExecutionTimeSeconds), so it was deactivated; "
        f"`kubectl tower resume workload {name} -n {namespace}` queues it again{ran}"
    )
