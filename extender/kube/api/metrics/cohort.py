"""Kueue's Cohort metrics: each cohort's subtree, summed over the ClusterQueues below it."""

from __future__ import annotations

from dataclasses import dataclass

from extender.core.config.custom_labels import CLUSTER_QUEUE, COHORT
from extender.kube.api.metrics.families import Custom, Families
from extender.kube.api.metrics.texts import SHARE

_BY_COHORT = Custom((COHORT,), ("cohort",))  # its custom_ labels, from the Cohort


@dataclass(frozen=True, slots=True)
class CohortReport:
    """What the gauges of one cohort say now."""

    name: str
    parent: str  # "" at the top of its tree
    root: str
    quota: dict[tuple[str, str], float]  # (flavor, resource) -> its subtree's quota
    reserved: dict[tuple[str, str], float]  # (flavor, resource) -> held below it
    admitted: int  # admitted workloads below it
    weighted_share: float | None = None  # None: fair sharing off, or an implicit cohort


class CohortMetrics:
    """The families labelled by a cohort (6 of Kueue's 60)."""

    def __init__(self, f: Families, *, info: bool) -> None:
        self.info_on = info  # feature gate MetricsForCohorts
        by_resource = ["cohort", "flavor", "resource"]
        self.weighted_share = f.gauge(
            "kueue_cohort_weighted_share",
            SHARE.format(where="Cohort", what="Cohort"),
            ["cohort"],
            custom=_BY_COHORT,
        )
        self.subtree_quota = f.gauge(
            "kueue_cohort_subtree_quota",
            "Reports the cohort's nominal quota aggregated within the cohort's subtree. The "
            "values are reported per resource and flavor",
            by_resource,
            custom=_BY_COHORT,
        )
        self.subtree_admitted_total = f.counter(
            "kueue_cohort_subtree_admitted_workloads_total",
            "The total number of admitted workloads per cohort's subtree",
            ["cohort", "priority_class"],
            custom=_BY_COHORT,
        )
        self.subtree_reservations = f.gauge(
            "kueue_cohort_subtree_resource_reservations",
            "Reports the cohort's resource reservations aggregated within the cohort's "
            "subtree. The values are reported per resource and flavor",
            by_resource,
            custom=_BY_COHORT,
        )
        self.subtree_admitted_active = f.gauge(
            "kueue_cohort_subtree_admitted_active_workloads",
            "The number of admitted Workloads that are active, per cohort's subtree",
            ["cohort"],
            custom=Custom((CLUSTER_QUEUE,)),
        )
        self.info = f.gauge(
            "kueue_cohort_info",
            "Reports Cohort hierarchy information. The metric has value 1 and can be joined "
            "using labels.",
            ["cohort", "parent_cohort", "root_cohort"],
            custom=_BY_COHORT,
        )
        self._reported: dict[str, CohortReport] = {}

    def report(self, r: CohortReport) -> None:
        """Every gauge of one cohort, as it is now. A quota or a reservation of zero has no
        series, as in Kueue."""
        before = self._reported.get(r.name)
        self._reported[r.name] = r
        for (flavor, resource), amount in r.quota.items():
            if amount > 0:
                self.subtree_quota.labels(r.name, flavor, resource).set(amount)
        for (flavor, resource), amount in r.reserved.items():
            if amount > 0:
                self.subtree_reservations.labels(r.name, flavor, resource).set(amount)
        if before is not None:
            for fr, amount in before.quota.items():
                if amount > 0 and r.quota.get(fr, 0) <= 0:
                    self.subtree_quota.remove(r.name, *fr)
            for fr, amount in before.reserved.items():
                if amount > 0 and r.reserved.get(fr, 0) <= 0:
                    self.subtree_reservations.remove(r.name, *fr)
            if (before.parent, before.root) != (r.parent, r.root):
                self.info.remove(r.name, before.parent, before.root)
        self.subtree_admitted_active.labels(r.name).set(r.admitted)
        if self.info_on:
            self.info.labels(r.name, r.parent, r.root).set(1)
        if r.weighted_share is not None:
            self.weighted_share.labels(r.name).set(r.weighted_share)

    def reported(self) -> list[str]:
        return list(self._reported)

    def forget(self, name: str) -> None:
        """A cohort gone from the tree: its series go (Kueue's ClearCohortMetrics and
        ClearCohortAdmittedWorkloadsMetrics)."""
        for vec in (
            self.weighted_share,
            self.subtree_quota,
            self.subtree_admitted_total,
            self.subtree_reservations,
            self.subtree_admitted_active,
            self.info,
        ):
            vec.remove_matching(cohort=name)
        self._reported.pop(name, None)

    def relabelled(self, name: str) -> None:
        """The cohort's custom values changed: its series go (Kueue's ClearCohortMetrics),
        and its next report makes them anew."""
        reported = self._reported.get(name)
        self.forget(name)
        if reported is not None:
            self._reported[name] = reported  # still in the tree: still forgotten when gone

    def end_of_term(self) -> None:
        self._reported.clear()
