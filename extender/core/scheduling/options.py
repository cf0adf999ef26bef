"""The scheduler's choices that Kueue's Configuration and feature gates make, in one value."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from extender.core.scheduling.preemption import (
    DEFAULT_STRATEGIES,
    KUEUE_FAIR_PREEMPTION,
    FairPreemption,
)

IGNORE_UNDECLARED = "IgnoreUndeclared"
BLOCK_UNDECLARED = "BlockUndeclared"


@dataclass(frozen=True, slots=True)
class SchedulingOptions:
    """Kueue v0.19.2's defaults unless the Configuration or a feature gate says otherwise."""

    # fairSharing.preemptionStrategies and FairSharingPreemptWithinNominal.
    fair_preemption: FairPreemption = KUEUE_FAIR_PREEMPTION
    # resources.quotaCheckStrategy IgnoreUndeclared (with the QuotaCheckStrategy gate on): a
    # request for a resource the ClusterQueue has no quota for neither blocks nor counts.
    ignore_undeclared_resources: bool = False
    # Kueue's ConcurrentAdmission gate: variants and their rules in the cycle (concurrent.py).
    concurrent_admission: bool = False
    # Kueue's MultiKueueOrchestratedPreemption gate: a Workload whose preemption gate is
    # closed waits instead of preempting (a worker's MultiKueue copy, concurrent.py).
    orchestrated_preemption: bool = False

    @classmethod
    def of(
        cls,
        *,
        strategies: Sequence[str] | None,
        quota_check_strategy: str | None,
        gates: Mapping[str, bool],
    ) -> SchedulingOptions:
        """The options a Configuration (its fields as written) and the resolved gates make;
        a field left out is Kueue's default (cmd/kueue/main.go quotaCheckStrategy,
        preemption.go parseStrategies)."""
        return cls(
            FairPreemption(
                tuple(strategies or DEFAULT_STRATEGIES),
                gates.get("FairSharingPreemptWithinNominal", True),
            ),
            gates.get("QuotaCheckStrategy", True) and quota_check_strategy == IGNORE_UNDECLARED,
            gates.get("ConcurrentAdmission", False),
            gates.get("MultiKueueOrchestratedPreemption", False),
        )
