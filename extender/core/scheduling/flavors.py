"""Flavor assignment, as Kueue's: each pod set's flavor per resource group, and whether it fits."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from enum import IntEnum
from types import MappingProxyType
from typing import NamedTuple

from extender.core.api.labels import flavor_matches_node_constraints, tolerated
from extender.core.api.models import (
    MAY_STOP_SEARCH,
    RECLAIM_ANY,
    RECLAIM_NEVER,
    TRY_NEXT_FLAVOR,
    WITHIN_NEVER,
    Admission,
    ClusterQueue,
    FlavorFungibility,
    FlavorResource,
    PodSet,
    PodSetAssignment,
    ResourceFlavor,
    Workload,
    new_tuple,
)
from extender.core.api.quantity import format_amount
from extender.core.api.topology import has_levels
from extender.core.scheduling.partial import scaled
from extender.core.scheduling.quota import (
    QuotaNode,
    available,
    borrowing_level,
    lowest_subtree_that_fits,
    potential_available,
)
from extender.core.scheduling.text import Lazy, Text, join

PODS = "pods"

# Kueue's QuotaReserved=False reasons (UnadmittedWorkloadsObservability).
NO_MATCHING_FLAVOR = "NoMatchingFlavor"
WAITING_FOR_QUOTA = "WaitingForQuota"
EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"


class Mode(IntEnum):
    """How well a workload fits one flavor, worst to best (Kueue's preemption modes)."""

    NO_FIT = 0
    NO_CANDIDATES = 1  # would fit after preemption, but nothing may be preempted
    PREEMPT = 2  # fits after preempting, some of it in its own ClusterQueue
    RECLAIM = 3  # fits after reclaiming only what other ClusterQueues borrowed
    FIT = 4

    @property
    def preempts(self) -> bool:
        """Whether this mode admits only after preemption."""
        return self in PREEMPTING


# The members as plain names for the hot paths (see the note in api/models.py: on Python 3.11
# `Mode.FIT` costs a metaclass __getattr__ call).
NO_FIT = Mode.NO_FIT
NO_CANDIDATES = Mode.NO_CANDIDATES
PREEMPT = Mode.PREEMPT
RECLAIM = Mode.RECLAIM
FIT = Mode.FIT
PREEMPTING = frozenset((PREEMPT, RECLAIM))


PreemptionOracle = Callable[[FlavorResource, int], "tuple[Mode, int] | None"]
"""Given a flavor-resource and how much of it is needed: could preemption make room, and of
what kind (PREEMPT or RECLAIM), at what borrowing level afterwards? None: no candidates."""


_NO_USAGE: Mapping[FlavorResource, int] = MappingProxyType({})
_NOTHING: frozenset[FlavorResource] = frozenset()


class Assignment(NamedTuple):
    """The outcome of flavor assignment for one workload in one ClusterQueue.

    A NamedTuple rather than a frozen dataclass: one is built per head per cycle, and
    tuples are three times cheaper to build.
    """

    mode: Mode
    borrowing_level: int = 0
    pod_set_flavors: tuple[Mapping[str, str], ...] = ()
    usage: Mapping[FlavorResource, int] = _NO_USAGE
    needs_preemption: frozenset[FlavorResource] = _NOTHING
    reason: str = ""
    message: Text = ""  # made when first read (text.Lazy) for a head that waits
    # For a fit judged by quick_fit: the least that was left free of any of its
    # flavor-resources after the request (-1: not known). Admissions in the same tree take at
    # most what they hold from it, so while they took no more in all, the fit still holds.
    slack: int = -1
    # Partial admission: the pods admitted of each pod set (empty: all it asks for).
    counts: tuple[int, ...] = ()

    def admission(self, cluster_queue: str, workload: Workload) -> Admission:
        """The Workload.status.admission this assignment amounts to."""
        assignments = []
        pod_sets = workload.pod_sets if not self.counts else scaled(workload, self.counts).pod_sets
        for ps, flavors in zip(pod_sets, self.pod_set_flavors, strict=True):
            totals = ps.totals
            # Flavors cover every resource the pod set requests but those it asks none of.
            usage = (
                totals
                if len(flavors) == len(totals)
                else {r: v for r, v in totals.items() if r in flavors}
            )
            if PODS in flavors and PODS not in totals:
                usage = {**usage, PODS: ps.count}
            assignments.append(PodSetAssignment(ps.name, flavors, usage, ps.count))
        return Admission(cluster_queue, tuple(assignments))


class _Verdict(NamedTuple):
    flavor: str
    mode: Mode
    level: int
    need: frozenset[FlavorResource]
    reason: str
    note: Text


def preferred(
    a: tuple[Mode, int], b: tuple[Mode, int], preemption_over_borrowing: bool = False
) -> bool:
    """Kueue's isPreferred: whether (mode, borrowing level) a is a better flavor than b."""
    a_mode, a_level = a
    b_mode, b_level = b
    if a_mode == NO_FIT:
        return False
    if b_mode == NO_FIT:
        return True
    # A flavor without preemption candidates cannot admit now: below every viable one.
    if (a_mode == NO_CANDIDATES) != (b_mode == NO_CANDIDATES):
        return b_mode == NO_CANDIDATES
    if preemption_over_borrowing:
        if a_level != b_level:
            return a_level < b_level
        return a_mode > b_mode
    if a_mode != b_mode:
        return a_mode > b_mode
    return a_level < b_level


def _preferred(a: _Verdict, b: _Verdict, preemption_over_borrowing: bool) -> bool:
    return preferred((a.mode, a.level), (b.mode, b.level), preemption_over_borrowing)


def _try_next_flavor(verdict: _Verdict, fungibility: FlavorFungibility) -> bool:
    """Kueue's shouldTryNextFlavor: whether the search goes on past this flavor."""
    if verdict.mode <= NO_CANDIDATES:
        return True
    if verdict.mode in PREEMPTING and fungibility.when_can_preempt is TRY_NEXT_FLAVOR:
        return True
    return verdict.level > 0 and fungibility.when_can_borrow is TRY_NEXT_FLAVOR


def topology_only(cq: ClusterQueue, flavors: Mapping[str, ResourceFlavor]) -> bool:
    """Kueue's TAS-only ClusterQueue: every flavor it names is a topology flavor (then a
    podSet without a topology request of its own is placed on topology implicitly)."""
    for name in cq.flavor_names():
        flavor = flavors.get(name)
        if flavor is None or not flavor.topology_name:
            return False
    return True


def _incompatibility(
    flavor: ResourceFlavor,
    pod_set: PodSet,
    topology_only: bool = False,
    resources: Iterable[str] = (),
) -> str | None:
    # Kueue's checkPodSetAndFlavorMatchForTAS: a podSet that asks for a topology needs a
    # topology flavor with the levels it names (a plain flavor still serves resources the
    # pod itself does not request: quota-only ones made by resources.transformations), and
    # one that does not ask is kept off topology flavors unless its ClusterQueue has no
    # other kind.
    asks = pod_set.topology is not None and pod_set.topology.explicit
    if flavor.topology_name and not asks and not topology_only:
        return f'Flavor "{flavor.name}" supports only TopologyAwareScheduling'
    if asks and not flavor.topology_name:
        if any(r in pod_set.pod_requests for r in resources):
            return f'Flavor "{flavor.name}" does not support TopologyAwareScheduling'
    elif (
        asks
        and pod_set.topology is not None
        and flavor.topology_levels
        and not has_levels(pod_set.topology, flavor.topology_levels, False)
    ):
        return f'Flavor "{flavor.name}" does not contain the requested level'
    if not flavor.node_taints and not flavor.node_labels:
        return None
    for taint in flavor.node_taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if tolerated(taint, flavor.tolerations) or tolerated(taint, pod_set.tolerations):
            continue
        value = f"={taint.value}" if taint.value else ""
        return (
            f"flavor {flavor.name} has taint {taint.key}{value}:{taint.effect} "
            f"that pod set {pod_set.name} does not tolerate"
        )
    if not flavor_matches_node_constraints(
        flavor.node_labels, pod_set.node_selector, pod_set.required_terms
    ):
        labels = ",".join(f"{k}={v}" for k, v in sorted(flavor.node_labels.items()))
        return (
            f"flavor {flavor.name} (nodes {labels}) does not match the nodeSelector "
            f"or node affinity of pod set {pod_set.name}"
        )
    return None


_Note = tuple[Callable[..., str], tuple[object, ...]]
"""How to spell one quota note, and the numbers it spells: read when the head is judged,
spelled when the message is first read (after the cycle)."""


def _quota_note(
    node: QuotaNode, fr: FlavorResource, amount: int, free: int, *, never: bool
) -> _Note:
    nominal = node.nominal(fr)
    if node.parent is None:
        return _note_at_root, (node.name, fr, amount, free, nominal, never)
    root = node.root()
    limit = node.borrowing_limit(fr)
    if never:
        most = potential_available(node, fr)
        return _note_never, (node.name, fr, amount, most, nominal, root.name, limit)
    unused = root.subtree.get(fr, 0) - root.usage.get(fr, 0)
    used = node.usage.get(fr, 0)
    name = node.name
    return _note_borrowing, (name, fr, amount, free, used, nominal, limit, root.name, unused)


def _spelled_later(notes: list[_Note], tail: str = "") -> Text:
    """One message of the notes (and a last sentence), made when first read."""
    if not notes:
        return tail
    if len(notes) == 1 and not tail:
        spell, numbers = notes[0]
        return Lazy(spell, *numbers)
    return Lazy(_spell_notes, tuple(notes), tail)


def _spell_notes(notes: tuple[_Note, ...], tail: str) -> str:
    parts = [spell(*numbers) for spell, numbers in notes]
    if tail:
        parts.append(tail)
    return "; ".join(parts)


def _note_head(fr: FlavorResource, amount: int) -> str:
    flavor, resource = fr
    return f"needs {format_amount(resource, amount)} {resource} in flavor {flavor}"


def _note_at_root(
    name: str, fr: FlavorResource, amount: int, free: int, nominal: int, never: bool
) -> str:
    resource, fmt, head = fr[1], format_amount, _note_head(fr, amount)
    if never:
        return f"{head}; more than the {fmt(resource, nominal)} {name} has in all"
    return f"{head}; {fmt(resource, free)} of {fmt(resource, nominal)} free in {name}"


def _limit_text(resource: str, limit: int | None) -> str:
    return "" if limit is None else f", borrowingLimit {format_amount(resource, limit)}"


def _note_never(
    name: str, fr: FlavorResource, amount: int, most: int, nominal: int, cohort: str,
    limit: int | None,
) -> str:  # fmt: skip
    resource, fmt = fr[1], format_amount
    return (
        f"{_note_head(fr, amount)}; more than {name} can ever use ({fmt(resource, most)}: "
        f"nominal {fmt(resource, nominal)} plus what cohort {cohort} can lend"
        f"{_limit_text(resource, limit)})"
    )


def _note_borrowing(
    name: str, fr: FlavorResource, amount: int, free: int, used: int, nominal: int,
    limit: int | None, cohort: str, unused: int,
) -> str:  # fmt: skip
    resource, fmt = fr[1], format_amount
    return (
        f"{_note_head(fr, amount)}; {fmt(resource, free)} free to {name} (it uses "
        f"{fmt(resource, used)} of its {fmt(resource, nominal)} nominal"
        f"{_limit_text(resource, limit)}; cohort {cohort} has "
        f"{fmt(resource, max(0, unused))} unused)"
    )


def assign_flavors(
    workload: Workload,
    cq: ClusterQueue,
    flavors: Mapping[str, ResourceFlavor],
    node: QuotaNode,
    oracle: PreemptionOracle | None = None,
) -> Assignment:
    """Choose flavors group by group in the ClusterQueue's order, honouring fungibility."""
    if len(workload.pod_sets) == 1:
        quick = quick_fit(workload.pod_sets[0], cq, flavors, node)
        if quick is not None:
            return quick
    return search_flavors(workload, cq, flavors, node, oracle)


class QuickPlan(NamedTuple):
    """What `quick_fit` decides without reading usage: for each resource group of a single pod
    set, the first usable flavor and what is asked of it.

    It depends only on the pod set, the ClusterQueue and the flavors, so it is built once per
    equivalence class and configuration; its dicts are shared by every Assignment and
    admission made from it, and never changed.
    """

    groups: tuple[tuple[tuple[FlavorResource, int], ...], ...]
    pod_set_flavors: tuple[Mapping[str, str], ...]
    usage: Mapping[FlavorResource, int]
    may_stop_borrowing: bool
    # Each group lists only its planned flavor: the search would judge that one flavor per
    # group and nothing else, so `judge_by_plan` may answer for it.
    sole_flavors: bool = False
    # Per group, its flavor and what is asked of it by resource (what `judge_by_plan` reads).
    requests: tuple[tuple[str, Mapping[str, int]], ...] = ()


def quick_plan(
    pod_set: PodSet, cq: ClusterQueue, flavors: Mapping[str, ResourceFlavor]
) -> QuickPlan | None:
    """The plan for `quick_fit`, or None where only the search can decide (the ClusterQueue
    counts pods, a resource has no quota, or a group has no usable flavor)."""
    group_of = cq.group_of
    if PODS in group_of:
        return None  # the search counts the pods
    needs: dict[int, dict[str, int]] = {}
    for resource, amount in pod_set.totals.items():
        if amount <= 0:
            continue
        group = group_of.get(resource)
        if group is None:
            if cq.ignores_undeclared:
                continue  # Kueue's IgnoreUndeclaredResources: neither blocks nor counts
            return None
        needs.setdefault(group, {})[resource] = amount
    assigned: dict[str, str] = {}
    usage: dict[FlavorResource, int] = {}
    groups: list[tuple[tuple[FlavorResource, int], ...]] = []
    requests: list[tuple[str, Mapping[str, int]]] = []
    only = topology_only(cq, flavors)
    sole = True
    for group_index in sorted(needs):
        request = needs[group_index]
        offered = cq.resource_groups[group_index].flavors
        sole = sole and len(offered) == 1
        for flavor_quotas in offered:
            name = flavor_quotas.name
            flavor = flavors.get(name)
            if flavor is None:
                continue  # a missing flavor is passed over, as the search does
            if _incompatibility(flavor, pod_set, only, request) is not None:
                continue
            groups.append(tuple(((name, resource), amount) for resource, amount in request.items()))
            requests.append((name, request))
            for resource, amount in request.items():
                usage[(name, resource)] = amount
                assigned[resource] = name
            break
        else:
            return None
    return QuickPlan(
        tuple(groups),
        (assigned,),
        usage,
        cq.flavor_fungibility.when_can_borrow is MAY_STOP_SEARCH,
        sole,
        tuple(requests),
    )


def fit_by_plan(plan: QuickPlan, node: QuotaNode) -> Assignment | None:
    """`quick_fit` on a plan: the plan's flavors if each takes the request now (without
    borrowing, or borrowing where that may stop the search), else None."""
    node_usage, node_subtree = node.usage, node.subtree
    level = 0
    slack = -1
    for group in plan.groups:
        group_level = 0
        for fr, amount in group:
            left = available(node, fr) - amount
            if left < 0:
                return None  # preemption or a later flavor: the search decides
            if slack < 0 or left < slack:
                slack = left
            if node_usage.get(fr, 0) + amount > node_subtree.get(fr, 0):
                # Beyond its own quota (within it, the level is 0 without asking).
                fr_level = borrowing_level(node, fr, amount)
                if fr_level > group_level:
                    group_level = fr_level
        if group_level:
            if not plan.may_stop_borrowing:
                return None  # a later flavor might fit without borrowing
            if group_level > level:
                level = group_level
    fields = (FIT, level, plan.pod_set_flavors, plan.usage, _NOTHING, "", "", slack, ())
    return new_tuple(Assignment, fields)


def quick_fit(
    pod_set: PodSet,
    cq: ClusterQueue,
    flavors: Mapping[str, ResourceFlavor],
    node: QuotaNode,
) -> Assignment | None:
    """The common case without the search: a single pod set that fits the first usable flavor
    of each resource group (without borrowing, or borrowing where that may stop the search).

    Returns exactly what `search_flavors` returns in that case, and None in every other case
    (a test holds the two together). One head per ClusterQueue is nominated every cycle, so
    this is the admission core's hottest path: the scheduler keeps the plan per class.
    """
    plan = quick_plan(pod_set, cq, flavors)
    return None if plan is None else fit_by_plan(plan, node)


def judge_by_plan(
    plan: QuickPlan,
    workload: Workload,
    cq: ClusterQueue,
    flavors: Mapping[str, ResourceFlavor],
    node: QuotaNode,
    oracle: PreemptionOracle | None = None,
    *,
    fair_sharing: bool = False,
) -> Assignment | None:
    """`search_flavors`' answer for the single pod set of a plan whose resource groups each
    offer only the planned flavor, without the search's general machinery (there is nothing
    to choose: the search would judge just those flavors); None for any other plan. A head
    that quick_fit turned down and that has no verdict yet is judged here (a test holds the
    two answers equal)."""
    if not plan.sole_flavors:
        return None
    pod_set = workload.pod_sets[0]
    rules = _Rules.of(cq, node, fair_sharing)
    mode, level = FIT, 0
    need: frozenset[FlavorResource] = frozenset()
    notes_text: Text = ""
    for name, request in plan.requests:
        flavor = flavors.get(name)
        if flavor is None:
            return None
        verdict = _judge(flavor, pod_set, request, _NO_USAGE, node, rules, oracle, compatible=True)
        if verdict.mode == NO_FIT:
            return _waits_on(verdict, NO_FIT)
        if verdict.mode == NO_CANDIDATES and rules.always_reclaims:
            return _waits_on(verdict, NO_CANDIDATES)
        mode, level, need, notes_text = _with_group((mode, level, need, notes_text), verdict)
    return Assignment(
        mode,
        level,
        plan.pod_set_flavors,
        plan.usage,
        need,
        WAITING_FOR_QUOTA if mode != FIT else "",
        notes_text,
    )


def search_flavors(
    workload: Workload,
    cq: ClusterQueue,
    flavors: Mapping[str, ResourceFlavor],
    node: QuotaNode,
    oracle: PreemptionOracle | None = None,
    *,
    fair_sharing: bool = False,
    start: Mapping[tuple[int, int], int] | None = None,
) -> Assignment:
    """The full search: pod set by pod set and resource group by resource group, every
    flavor judged and fungibility choosing among them. Each pod set gets its own flavor, as
    in Kueue; what earlier pod sets were given counts against the quota later ones see.
    `start`: per (pod set, group), the flavor index an earlier cycle stopped at; the search
    resumes after it (scan_progress.py)."""
    group_of = cq.group_of
    requests: list[dict[int, dict[str, int]]] = []
    counts_pods = PODS in group_of
    for pod_set in workload.pod_sets:
        needs: dict[int, dict[str, int]] = {}
        totals = pod_set.totals
        if counts_pods and PODS not in totals:
            # A ClusterQueue with quota for "pods" counts each pod as one, as Kueue does.
            totals = {**totals, PODS: pod_set.count}
        for resource, amount in totals.items():
            if amount <= 0:
                continue
            group = group_of.get(resource)
            if group is None:
                if cq.ignores_undeclared:
                    # Kueue's assignFlavors under quotaCheckStrategy IgnoreUndeclared: a
                    # resource the ClusterQueue has no quota for is skipped, never counted.
                    continue
                return Assignment(
                    NO_FIT,
                    reason=NO_MATCHING_FLAVOR,
                    message=f"pod set {pod_set.name} requests {resource}, "
                    f"which ClusterQueue {cq.name} has no quota for",
                )
            needs.setdefault(group, {})[resource] = amount
        requests.append(needs)
    own = [{r for need in needs.values() for r in need} for needs in requests]
    groups = _pod_set_groups(workload, requests)

    fungibility = cq.flavor_fungibility
    rules = _Rules.of(cq, node, fair_sharing)
    only = topology_only(cq, flavors)
    pod_set_flavors: list[dict[str, str]] = [{} for _ in workload.pod_sets]
    usage: dict[FlavorResource, int] = {}
    mode, level = FIT, 0
    need: frozenset[FlavorResource] = frozenset()
    notes_text: Text = ""
    for index, needs in enumerate(requests):
        for group_index in sorted(needs) if len(needs) > 1 else needs:
            request = needs[group_index]
            best: _Verdict | None = None
            notes: list[_Verdict] = []
            group_flavors = cq.resource_groups[group_index].flavors
            if start:
                group_flavors = group_flavors[start.get((index, group_index), -1) + 1 :]
            for flavor_quotas in group_flavors:
                name = flavor_quotas.name
                flavor = flavors.get(name)
                if flavor is None:
                    verdict = _Verdict(
                        name,
                        NO_FIT,
                        0,
                        _NOTHING,
                        NO_MATCHING_FLAVOR,
                        f"flavor {name} does not exist",
                    )
                else:
                    verdict = _judge(
                        flavor, workload.pod_sets[index], request, usage, node, rules, oracle, only
                    )
                notes.append(verdict)
                if not _try_next_flavor(verdict, fungibility):
                    best = verdict
                    break
                if best is None or _preferred(verdict, best, rules.preemption_over_borrowing):
                    best = verdict
            assert best is not None
            if best.mode == NO_FIT:
                return _no_fit(workload, notes)
            if best.mode == NO_CANDIDATES:
                no_fit = _no_fit(workload, notes, NO_CANDIDATES)
                if cq.preemption.reclaim_within_cohort is RECLAIM_ANY:
                    return no_fit
                # Kept with its flavors: a ClusterQueue that cannot always reclaim holds this
                # quota for it (Kueue reserves capacity for an unreclaimable preemptor). The
                # pod sets are named once, in front of the whole message, below.
                best = best._replace(note=join("; ", [v.note for v in notes]))
            flavor_name = best.flavor
            assigned = pod_set_flavors[index]
            for resource, amount in request.items():
                fr = (flavor_name, resource)
                usage[fr] = usage.get(fr, 0) + amount
                assigned[resource] = flavor_name
            mode, level, need, notes_text = _with_group((mode, level, need, notes_text), best)
    for members in groups:
        # One flavor per resource for the whole group (Kueue's grouped requests): each member
        # names those of the resources it requests; one that requests none is placed with
        # its group, on the group's topology flavors.
        chosen = pod_set_flavors[members[0]]
        for m in members:
            pod_set_flavors[m] = {
                r: f
                for r, f in chosen.items()
                if (r in own[m] if own[m] else _is_topology(flavors.get(f)))
            }
    if notes_text and mode != FIT and len(workload.pod_sets) > 1:
        notes_text = f"pod sets {', '.join(p.name for p in workload.pod_sets)}: " + notes_text
    return Assignment(
        mode,
        level,
        tuple(pod_set_flavors),
        usage,
        need,
        WAITING_FOR_QUOTA if mode != FIT else "",
        notes_text,
    )


_Standing = tuple[Mode, int, frozenset[FlavorResource], Text]


def _with_group(standing: _Standing, verdict: _Verdict) -> _Standing:
    """A workload's standing after one more resource group's chosen verdict: the worst mode,
    the highest borrowing level, all that needs preemption, every note."""
    mode, level, need, notes = standing
    if verdict.mode < mode:
        mode = verdict.mode
    if verdict.level > level:
        level = verdict.level
    if verdict.need:
        need = need | verdict.need
    if verdict.note:
        notes = join("; ", (notes, verdict.note)) if notes else verdict.note
    return mode, level, need, notes


def _is_topology(flavor: ResourceFlavor | None) -> bool:
    return flavor is not None and flavor.topology_name is not None


def _pod_set_groups(
    workload: Workload, requests: list[dict[int, dict[str, int]]]
) -> list[list[int]]:
    """Pod sets of one podSetGroupName (a leader and its workers) are searched as one: the
    group's requests are summed into its first member's (which `requests` then holds), so
    the whole group gets one flavor per resource, as Kueue assigns them."""
    by_name: dict[str, list[int]] = {}
    for i, pod_set in enumerate(workload.pod_sets):
        name = pod_set.topology.group if pod_set.topology is not None else None
        if name:
            by_name.setdefault(name, []).append(i)
    groups = [members for members in by_name.values() if len(members) > 1]
    for members in groups:
        first = requests[members[0]]
        for m in members[1:]:
            for group_index, need in requests[m].items():
                into = first.setdefault(group_index, {})
                for resource, amount in need.items():
                    into[resource] = into.get(resource, 0) + amount
            requests[m] = {}
    return groups


class _Rules(NamedTuple):
    """What a ClusterQueue's preemption and fungibility policies say to the search."""

    # Kueue's canPreemptWhileBorrowing: preemption is tried even for more than the nominal
    # quota and outside the subtrees the preemptor may reclaim.
    preempts_while_borrowing: bool
    preempts: bool
    preemption_over_borrowing: bool
    always_reclaims: bool

    @staticmethod
    def of(cq: ClusterQueue, node: QuotaNode, fair_sharing: bool) -> _Rules:
        policy = cq.preemption
        reclaims = node.parent is not None and policy.reclaim_within_cohort is not RECLAIM_NEVER
        rules = (
            policy.borrow_within_cohort != "Never" or (fair_sharing and reclaims),
            reclaims or policy.within_cluster_queue is not WITHIN_NEVER,
            cq.flavor_fungibility.preference == "PreemptionOverBorrowing",
            policy.reclaim_within_cohort is RECLAIM_ANY,
        )
        return new_tuple(_Rules, rules)


def _judge(
    flavor: ResourceFlavor,
    pod_set: PodSet,
    request: Mapping[str, int],
    assigned: Mapping[FlavorResource, int],
    node: QuotaNode,
    rules: _Rules,
    oracle: PreemptionOracle | None,
    topology_only: bool = False,
    *,
    compatible: bool = False,
) -> _Verdict:
    """How one pod set's request for one resource group fits one flavor, on top of what
    earlier pod sets of the workload were assigned: the worst of its resources' verdicts.
    (`compatible`: the flavor is known to take the pod set, as a plan's flavors do.)"""
    if not compatible:
        problem = _incompatibility(flavor, pod_set, topology_only, request)
        if problem is not None:
            return _Verdict(flavor.name, NO_FIT, 0, _NOTHING, NO_MATCHING_FLAVOR, problem)
    preempts_while_borrowing, preempts, preemption_over_borrowing, always_reclaims = rules
    # The worst (mode, level) so far, as plain values: one verdict is built, at the end.
    worst_mode, worst_level = FIT, 0
    need: set[FlavorResource] = set()
    notes: list[_Note] = []
    for resource, own in request.items():
        fr = (flavor.name, resource)
        amount = own + assigned.get(fr, 0) if assigned else own
        free = available(node, fr)
        if amount <= free:
            mode, level = FIT, borrowing_level(node, fr, amount)
            if worst_mode == FIT:  # of two fits the worse borrows more
                if level > worst_level:
                    worst_level = level
                continue
        elif amount > potential_available(node, fr):
            never = _spelled_later([_quota_note(node, fr, amount, free, never=True)])
            return _Verdict(flavor.name, NO_FIT, 0, _NOTHING, EXCEEDS_MAX_QUOTA, never)
        else:
            notes.append(_quota_note(node, fr, amount, free, never=False))
            level = -1  # not known yet
            may_try = amount <= node.nominal(fr) or preempts_while_borrowing
            if not may_try:
                level, may_try = lowest_subtree_that_fits(node, fr, amount)
            if may_try:
                found = oracle(fr, amount) if oracle is not None else None
                if found is not None:
                    mode, level = found
                else:
                    mode = NO_CANDIDATES
                    if level < 0:
                        # Where the queue can always reclaim, a flavor without candidates
                        # stops the search with no admission: its level cannot matter.
                        level = 0 if always_reclaims else borrowing_level(node, fr, amount)
                need.add(fr)
            else:
                mode = NO_FIT
        if len(request) == 1 or preferred(
            (worst_mode, worst_level), (mode, level), preemption_over_borrowing
        ):
            worst_mode, worst_level = mode, level
    if worst_mode == FIT:
        return new_tuple(_Verdict, (flavor.name, FIT, worst_level, _NOTHING, "", ""))
    if worst_mode == NO_FIT:
        note = _spelled_later(notes)
        fields = (flavor.name, NO_FIT, worst_level, _NOTHING, WAITING_FOR_QUOTA, note)
        return new_tuple(_Verdict, fields)
    tail = "no admitted workload may be preempted to make room"
    note = _spelled_later(notes, tail if worst_mode == NO_CANDIDATES and preempts else "")
    fields = (flavor.name, worst_mode, worst_level, frozenset(need), WAITING_FOR_QUOTA, note)
    return new_tuple(_Verdict, fields)


_NO_FLAVOR = frozenset({NO_MATCHING_FLAVOR})
_NEVER_FITS = frozenset({NO_MATCHING_FLAVOR, EXCEEDS_MAX_QUOTA})


def _waits_on(verdict: _Verdict, mode: Mode) -> Assignment:
    """A single pod set that waits on one flavor's verdict: in its own words."""
    reason = verdict.reason if verdict.reason in _NEVER_FITS else WAITING_FOR_QUOTA
    fields = (mode, 0, (), _NO_USAGE, _NOTHING, reason, verdict.note, -1, ())
    return new_tuple(Assignment, fields)


def _no_fit(workload: Workload, notes: list[_Verdict], mode: Mode = NO_FIT) -> Assignment:
    if len(notes) == 1 and len(workload.pod_sets) == 1:
        return _waits_on(notes[0], mode)
    reasons = {v.reason for v in notes}
    if reasons == _NO_FLAVOR:
        reason = NO_MATCHING_FLAVOR
    elif reasons <= _NEVER_FITS:
        reason = EXCEEDS_MAX_QUOTA
    else:
        reason = WAITING_FOR_QUOTA
    message = join("; ", [v.note for v in notes])
    if len(workload.pod_sets) > 1:
        message = f"pod sets {', '.join(p.name for p in workload.pod_sets)}: " + message
    return Assignment(mode, reason=reason, message=message)
