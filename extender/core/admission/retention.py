"""Kueue's objectRetentionPolicies for Workloads: when a finished or deactivated one goes.

`workloads.afterFinished`: a Workload is deleted that long after it finished (its Finished
condition's lastTransitionTime; Kueue's workload controller). `workloads.afterDeactivatedByKueue`:
a job whose Workload Kueue deactivated (evicted with a reason DeactivatedDueTo<cause>: its
requeuing limit, its maximum execution time, a rejected admission check) is deleted that long
after the eviction, its Workload with it (Kueue's job reconciler). A Workload deactivated by
hand (`spec.active: false`, reason Deactivated) is kept. Unset: kept for ever; 0: at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from extender.core.admission.pods_ready import DEACTIVATED

DEACTIVATED_BY_KUEUE = f"{DEACTIVATED}DueTo"  # Kueue's ReasonWithCause(Deactivated, "")

# Kueue's Events (workload_controller.go, jobframework/reconciler.go).
DELETED = "Deleted"
FINISHED_DELETED = "Deleted finished workload due to elapsed retention"
JOB_DELETED = "Deleted job: deactivation retention period expired"


@dataclass(frozen=True, slots=True)
class WorkloadRetention:
    """objectRetentionPolicies.workloads, in seconds (None: not set, nothing deleted)."""

    after_finished: float | None = None
    after_deactivated_by_kueue: float | None = None


def finished_left(policy: WorkloadRetention, finished_at: float, now: float) -> float | None:
    """Seconds until a finished Workload is deleted (0 or less: now); None: kept."""
    if policy.after_finished is None:
        return None
    return finished_at + policy.after_finished - now


def deactivated_by_kueue(active: bool, evicted: bool, reason: str) -> bool:
    """Whether a Workload is one Kueue deactivated: inactive, and evicted as Kueue evicts
    what it deactivates (Kueue's IsEvictedDueToDeactivationByKueue)."""
    return not active and evicted and reason.startswith(DEACTIVATED_BY_KUEUE)


def deactivated_left(policy: WorkloadRetention, evicted_at: float, now: float) -> float | None:
    """Seconds until the job of a Workload Kueue deactivated is deleted; None: kept."""
    if policy.after_deactivated_by_kueue is None:
        return None
    return evicted_at + policy.after_deactivated_by_kueue - now
