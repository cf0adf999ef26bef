"""What a cycle keeps per equivalence class is reused only where it is still the answer.

A "does not fit" verdict is reused only while its state is unchanged (verdicts.py); an
admission only for a member admitted to the same flavors. The oracle is the same ClusterState
with reuse switched off: every head judged and admitted from scratch. Every cycle of both must
decide and explain the same, whatever happened between cycles.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import extender.core.scheduling.scheduler as scheduler_module
from extender.core.api.labels import Taint
from extender.core.api.models import Admission, LocalQueue, PodSetAssignment, ResourceFlavor
from extender.core.scheduling.cycle import ClusterState, CycleResult
from extender.core.scheduling.verdicts import Verdict, state_of
from tests.builders import CQ, WL, cohort, flavor
from tests.unit.core.scheduling.test_properties import FLAVORS, cluster_queues


def twins(build):
    """Two states built alike: one reuses verdicts, the other judges every head in full."""
    fast, full = build(), build()
    full.scheduler.reuse_by_class = False
    return fast, full


def decided(result: CycleResult) -> tuple[object, ...]:
    return (
        [(a.workload.key, a.admission) for a in result.admitted],
        [(e.workload.key, e.reason, e.preemption_reason, e.message) for e in result.evicted],
        [(w.key, status) for w, status in result.pending],
        result.heads,
        result.progressed,
    )


def explained(state: ClusterState) -> list[tuple[str, object]]:
    return [(w.key, status) for w, status in state.pending()]


class Searches:
    """Counts full judgements: flavor searches, and judgements by a plan with one flavor per
    group, which stand for the search (a reused verdict makes neither)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        search = scheduler_module.search_flavors
        by_plan = scheduler_module.judge_by_plan

        def counting(*args, **kwargs):
            self.count += 1
            return search(*args, **kwargs)

        def counting_by_plan(*args, **kwargs):
            judged = by_plan(*args, **kwargs)
            self.count += judged is not None
            return judged

        monkeypatch.setattr(scheduler_module, "search_flavors", counting)
        monkeypatch.setattr(scheduler_module, "judge_by_plan", counting_by_plan)


# ----- one head that fits nowhere, and each kind of change ------------------------------


def _cq(name: str, nominal: str = "4", cohort_name: str = "all", strict: bool = True) -> CQ:
    builder = CQ(name).cohort(cohort_name).preemption(within="LowerPriority", reclaim="Any")
    if strict:
        builder = builder.strict()  # the head stays the head: every cycle nominates it
    return builder.group(("default", {"cpu": (nominal, "4")}))


def _build() -> ClusterState:
    state = ClusterState()
    state.configure(
        flavors=[flavor("default")],
        cluster_queues=[
            _cq("a").obj(),
            _cq("b").obj(),
            _cq("d").obj(),
            _cq("c", cohort_name="other").obj(),
        ],
        local_queues=[LocalQueue("default", f"lq-{n}", n) for n in "abcde"],
    )
    return state


def _wl(name: str, cq: str, cpu: str, priority: int = 0, created: float = 0.0):
    return WL(name).queue(f"lq-{cq}").request("cpu", cpu).priority(priority).created(created)


def _admission(cq: str, cpu: int) -> Admission:
    return Admission(cq, (PodSetAssignment("main", {"cpu": "default"}, {"cpu": cpu}, 1),))


def _assume(state: ClusterState, name: str, cq: str, cpu: str, priority: int) -> None:
    workload = _wl(name, cq, cpu, priority).obj()
    state.assume(workload, _admission(cq, workload.pod_sets[0].totals["cpu"]), 0.0)


def _setup(state: ClusterState) -> None:
    # a holds 4 cpu at priority 5, b 2 and d 4; a's head asks 6 at priority 1: 2 free in the
    # cohort (b's), nothing a may preempt in itself, nobody borrows: no fit, no candidates.
    _assume(state, "held", "a", "4", 5)
    _assume(state, "b-own", "b", "2", 0)
    _assume(state, "d-own", "d", "4", 0)
    state.add_workload(_wl("head", "a", "6", priority=1, created=1).obj())


CHANGES = {
    "usage elsewhere in the cohort": lambda s: _assume(s, "b1", "b", "1", 0),
    "usage in another cohort (no change)": lambda s: _assume(s, "c1", "c", "1", 0),
    "quota of its ClusterQueue": lambda s: s.apply_cluster_queue(_cq("a", nominal="5").obj()),
    "quota of a sibling": lambda s: s.apply_cluster_queue(_cq("b", nominal="2").obj()),
    "cohort membership": lambda s: s.apply_cluster_queue(_cq("b", cohort_name="other").obj()),
    "a ClusterQueue joins the cohort": lambda s: s.apply_cluster_queue(_cq("e").obj()),
    "the workload": lambda s: s.add_workload(_wl("head", "a", "5", 1, 1).obj()),
    "the workload's priority": lambda s: s.add_workload(_wl("head", "a", "6", 9, 1).obj()),
    "a flavor's taints": lambda s: s.apply_flavor(
        ResourceFlavor("default", {}, (Taint("gpu", "yes", "NoSchedule"),))
    ),
    "the flavor deleted": lambda s: s.delete_flavor("default"),
    "something lower to preempt in its ClusterQueue": lambda s: _assume(s, "low", "a", "1", 0),
    "a sibling borrows": lambda s: _assume(s, "b-big", "b", "6", 0),
    "fair sharing switched on": lambda s: setattr(s.scheduler, "fair_sharing", True),
    "its own workload released": lambda s: s.finish("default/held"),
    # The same usage on every node the search reads, but who holds it changed:
    "a sibling borrows what another gave back": lambda s: (
        s.finish("default/b-own"),
        _assume(s, "d-more", "d", "2", 0),
    ),
    "something lower holds what its own gave back": lambda s: (
        s.finish("default/held"),
        _assume(s, "low", "a", "4", 0),
    ),
}
# Changes after which the kept state still matches: the verdict is reused, and must be right.
UNCHANGED = {"usage in another cohort (no change)"}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_kept_verdict_is_reused_only_while_nothing_it_read_changed(change, monkeypatch):
    fast, full = twins(_build)
    for state in (fast, full):
        _setup(state)
    first = fast.schedule(1.0)
    assert decided(first) == decided(full.schedule(1.0))
    assert first.pending
    assert first.pending[0][1].reason == "WaitingForQuota"
    searches = Searches(monkeypatch)
    # Nothing changed: the head is nominated again and its verdict reused.
    again = fast.schedule(2.0)
    assert searches.count == 0
    assert decided(again) == decided(first)
    assert decided(full.schedule(2.0)) == decided(again)
    assert searches.count == 1  # the oracle judged it in full

    for state in (fast, full):
        CHANGES[change](state)
    searches.count = 0
    after = fast.schedule(3.0)
    # Reused: the head was nominated, stays pending, and was not searched for (a deleted
    # flavor leaves no head at all; a head that fits now needs no search either).
    reused = searches.count == 0 and any(w.name == "head" for w, _ in after.pending)
    assert decided(after) == decided(full.schedule(3.0))
    assert explained(fast) == explained(full)
    assert reused == (change in UNCHANGED), "reused" if reused else "judged again"


def test_usage_within_the_quota_a_queue_never_lends_is_its_own_part_of_the_state(monkeypatch):
    # a lends at most 2 of its 4: 2 are its own (local), and usage within them does not reach
    # the cohort. Its head, 8 cpu, fits only once everything is free.
    def build() -> ClusterState:
        state = ClusterState()
        state.configure(
            flavors=[flavor("default")],
            cluster_queues=[
                CQ("a").cohort("all").strict().group(("default", {"cpu": ("4", "4", "2")})).obj(),
                _cq("b").obj(),
            ],
            local_queues=[LocalQueue("default", f"lq-{n}", n) for n in "ab"],
        )
        return state

    fast, full = twins(build)
    for state in (fast, full):
        _assume(state, "one", "a", "1", 5)
        state.add_workload(_wl("head", "a", "8", priority=1, created=1).obj())
    first = fast.schedule(1.0)
    assert decided(first) == decided(full.schedule(1.0))
    searches = Searches(monkeypatch)
    for state in (fast, full):
        _assume(state, "two", "a", "1", 5)  # still within a's own 2: the cohort sees nothing
    assert fast.cache.tree.cohorts["all"].usage.get(("default", "cpu"), 0) == 0
    after = fast.schedule(2.0)
    assert searches.count == 1  # judged again
    assert decided(after) == decided(full.schedule(2.0))
    assert decided(after) != decided(first)  # its message tells the new numbers


def test_equal_lowest_priorities_that_answer_alike_keep_the_state_equal():
    state = _build()
    cq, node = state.cluster_queue("a"), state.cache.tree.cluster_queues["a"]
    key = {lowest: state_of(cq, node, 3, lowest, 1, False) for lowest in (None, 2, 3, 5, 9)}
    # A LowerPriority ClusterQueue may preempt for priority 3 only what is below 3.
    assert key[None] == key[3] == key[5] == key[9]
    assert key[2] != key[3]


def test_the_verdict_lives_on_the_equivalence_class(monkeypatch):
    state = _build()
    _setup(state)
    state.schedule(1.0)
    queue = state.queues._queues["a"]
    head = state.workload("default/head")
    kept = queue.memo(head).verdict
    assert isinstance(kept, Verdict)
    # A second workload of the same class shares it; one of another shape does not.
    twin = _wl("head2", "a", "6", priority=1, created=2).obj()
    other = _wl("other", "a", "7", priority=1, created=3).obj()
    state.add_workload(twin)
    state.add_workload(other)
    assert queue.memo(twin).verdict is kept
    assert queue.memo(other).verdict is None


def test_a_kept_admission_is_reused_only_for_the_same_flavors():
    def build() -> ClusterState:
        state = ClusterState()
        cq = CQ("a").group(("f1", {"cpu": "2"}), ("f2", {"cpu": "4"})).obj()
        state.configure(
            flavors=[flavor("f1"), flavor("f2")],
            cluster_queues=[cq],
            local_queues=[LocalQueue("default", "lq-a", "a")],
        )
        return state

    fast, full = twins(build)
    members = [
        WL(f"w{i}").queue("lq-a").created(i).pod_set("x", cpu="1").pod_set("y", cpu="1").obj()
        for i in range(4)
    ]
    flavors = []
    for state in (fast, full):
        for workload in members:
            state.add_workload(workload)
    for now in range(1, 5):
        result = fast.schedule(now)
        assert decided(result) == decided(full.schedule(now))
        flavors += [
            [dict(psa.flavors) for psa in a.admission.pod_set_assignments] for a in result.admitted
        ]
    # f1 holds the first, f2 the next two; the fourth fits nowhere.
    assert flavors == [[{"cpu": "f1"}] * 2] + [[{"cpu": "f2"}] * 2] * 2
    second, third = (fast.admitted_workload(f"default/w{i}").admission for i in (1, 2))
    assert second is third  # the same flavors: one admission shared


# ----- random sequences: reuse never changes a decision or an explanation ---------------


def _random_flavor(name: str, tainted: bool) -> ResourceFlavor:
    return ResourceFlavor(name, {}, (Taint("t", "x", "NoSchedule"),) if tainted else ())


operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 4), st.integers(1, 9), st.integers(0, 3)),
        st.tuples(st.just("add"), st.integers(0, 4), st.integers(1, 9), st.integers(0, 3)),
        st.tuples(st.just("cycle")),
        st.tuples(st.just("cycle")),
        st.tuples(st.just("finish"), st.integers(0, 50)),
        st.tuples(st.just("update"), st.integers(0, 50), st.integers(1, 9)),
        st.tuples(st.just("quota"), st.integers(0, 4), st.integers(0, 8)),
        st.tuples(st.just("move"), st.integers(0, 4), st.sampled_from([None, "c1", "c2"])),
        st.tuples(st.just("flavor"), st.sampled_from(FLAVORS), st.booleans()),
        st.tuples(st.just("nested"), st.booleans()),
    ),
    min_size=1,
    max_size=50,
)


def _with_quota(cq, nominal: int):
    groups = tuple(
        dataclasses.replace(
            group,
            flavors=tuple(
                dataclasses.replace(
                    fq,
                    resources=tuple(
                        dataclasses.replace(q, nominal=nominal * 1000) for q in fq.resources
                    ),
                )
                for fq in group.flavors
            ),
        )
        for group in cq.resource_groups
    )
    return dataclasses.replace(cq, resource_groups=groups)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cqs=cluster_queues(), ops=operations, fair_sharing=st.booleans())
def test_reusing_verdicts_decides_and_explains_as_judging_every_head(cqs, ops, fair_sharing):
    def build() -> ClusterState:
        state = ClusterState(fair_sharing=fair_sharing)
        state.configure(
            flavors=[flavor(f) for f in FLAVORS],
            cluster_queues=cqs,
            local_queues=[LocalQueue("default", f"lq{i}", cq.name) for i, cq in enumerate(cqs)],
        )
        return state

    fast, full = twins(build)
    current = {cq.name: cq for cq in cqs}
    now, serial = 0.0, 0
    for op in ops:
        now += 1
        kind = op[0]
        if kind == "cycle":
            results = [state.schedule(now) for state in (fast, full)]
            assert decided(results[0]) == decided(results[1])
            for state, result in zip((fast, full), results, strict=True):
                for eviction in result.evicted:
                    state.release(eviction.workload.key)
        elif kind == "add":
            _, queue, cpu, priority = op
            serial += 1
            workload = (
                WL(f"w{serial}")
                .queue(f"lq{queue % len(cqs)}")
                .created(now)
                .priority(priority)
                .uid(f"u{serial:04d}")
                .request("cpu", str(cpu))
                .obj()
            )
            for state in (fast, full):
                state.add_workload(workload)
        elif kind == "update":
            pending = sorted(w.key for w, _ in full.pending())
            if pending:
                key = pending[op[1] % len(pending)]
                old = full.workload(key)
                new = (
                    WL(old.name)
                    .queue(old.queue_name)
                    .created(old.creation_time)
                    .priority(old.priority)
                    .uid(old.uid)
                    .request("cpu", str(op[2]))
                    .obj()
                )
                for state in (fast, full):
                    state.add_workload(new)
        elif kind == "finish":
            keys = sorted(a.workload.key for a in full.admitted_workloads())
            if keys:
                key = keys[op[1] % len(keys)]
                for state in (fast, full):
                    state.finish(key)
        elif kind == "quota":
            name = cqs[op[1] % len(cqs)].name
            current[name] = _with_quota(current[name], op[2])
            for state in (fast, full):
                state.apply_cluster_queue(current[name])
        elif kind == "move":
            name = cqs[op[1] % len(cqs)].name
            current[name] = dataclasses.replace(current[name], cohort=op[2])
            for state in (fast, full):
                state.apply_cluster_queue(current[name])
        elif kind == "flavor":
            for state in (fast, full):
                state.apply_flavor(_random_flavor(op[1], op[2]))
        else:  # nested: c1 and c2 under one root cohort, or apart
            for state in (fast, full):
                if op[1]:
                    state.configure(
                        cohorts=[cohort("root"), cohort("c1", "root"), cohort("c2", "root")]
                    )
                else:
                    state.configure(cohorts=[cohort("c1"), cohort("c2")])
        assert explained(fast) == explained(full)


class Plans:
    """Counts the flavor plans and the admissions made, and where: when a workload was queued,
    or in a cycle."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, state: ClusterState) -> None:
        self.made: list[str] = []
        self.admissions: list[str] = []
        plan = scheduler_module.quick_plan
        admission = scheduler_module.Assignment.admission
        schedule = state.scheduler.schedule

        def counting(*args, **kwargs):
            self.made.append(self.where)
            return plan(*args, **kwargs)

        def counting_admissions(*args, **kwargs):
            self.admissions.append(self.where)
            return admission(*args, **kwargs)

        def in_cycle(now):
            self.where = "cycle"
            try:
                return schedule(now)
            finally:
                self.where = "queued"

        self.where = "queued"
        monkeypatch.setattr(scheduler_module, "quick_plan", counting)
        monkeypatch.setattr(scheduler_module.Assignment, "admission", counting_admissions)
        monkeypatch.setattr(state.scheduler, "schedule", in_cycle)


def test_a_class_plan_is_made_when_it_is_queued_and_again_in_a_cycle_after_a_change(
    monkeypatch,
):
    state = _build()
    plans = Plans(monkeypatch, state)
    state.add_workload(_wl("one", "a", "1", created=1).obj())
    state.add_workload(_wl("two", "a", "1", created=2).obj())  # the same class: no new plan
    state.add_workload(_wl("big", "a", "3", created=3).obj())  # a new class
    assert plans.made == plans.admissions == ["queued", "queued"]
    admitted = state.schedule(1.0).admitted
    assert [a.workload.key for a in admitted] == ["default/one"]
    assert admitted[0].admission == _admission("a", 1000)
    # The cycle used the plans and the admission it found.
    assert plans.made == plans.admissions == ["queued", "queued"]
    state.apply_flavor(ResourceFlavor("default", {}, (Taint("gpu", "yes", "NoSchedule"),)))
    result = state.schedule(2.0)
    assert not result.admitted  # the plan made anew sees the taint
    assert plans.made == ["queued", "queued", "cycle"]
    assert [status.reason for _, status in result.pending] == ["NoMatchingFlavor"]
