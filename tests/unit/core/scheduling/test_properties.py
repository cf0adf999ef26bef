"""Properties over random flavors, cohorts and arrival sequences (hypothesis)."""

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.core.api.models import LocalQueue, QueueingStrategy
from extender.core.scheduling.cycle import ClusterState
from extender.core.scheduling.preemption import (
    candidates,
    fits,
    may_have_candidates,
    may_preempt_at_all,
)
from extender.core.scheduling.quota import QuotaTree, add_usage, available
from extender.core.scheduling.scheduler import _nominate_by_search, class_plan, judge_without_oracle
from tests.builders import CQ, WL, flavor

FLAVORS = ("f1", "f2")


@st.composite
def cluster_queues(draw):
    count = draw(st.integers(1, 5))
    cqs = []
    for i in range(count):
        cohort = draw(st.sampled_from([None, "c1", "c1", "c2"]))
        builder = CQ(f"cq{i}")
        if cohort:
            builder = builder.cohort(cohort)
        if draw(st.booleans()):
            builder = builder.strict()
        within = draw(st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"]))
        reclaim = draw(st.sampled_from(["Never", "LowerPriority", "Any"])) if cohort else "Never"
        borrow = (
            draw(st.sampled_from(["Never", "LowerPriority"])) if reclaim != "Never" else "Never"
        )
        builder = builder.preemption(within=within, reclaim=reclaim, borrow=borrow)
        flavors = []
        for name in draw(st.sampled_from([("f1",), ("f2",), ("f1", "f2")])):
            nominal = draw(st.integers(0, 8))
            limit = (
                (lambda: draw(st.one_of(st.none(), st.integers(0, 6))))
                if cohort
                else (lambda: None)
            )
            borrow_limit = limit()
            lend = limit()
            if lend is not None:
                lend = min(lend, nominal)
            flavors.append(
                (
                    name,
                    {
                        "cpu": (
                            str(nominal),
                            None if borrow_limit is None else str(borrow_limit),
                            None if lend is None else str(lend),
                        )
                    },
                )
            )
        cqs.append(builder.group(*flavors).obj())
    return cqs


operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 4), st.integers(1, 6), st.integers(0, 3)),
        st.tuples(st.just("cycle")),
        st.tuples(st.just("finish"), st.integers(0, 50)),
    ),
    min_size=1,
    max_size=60,
)


def build_state(cqs, fair_sharing):
    state = ClusterState(fair_sharing=fair_sharing)
    state.configure(
        flavors=[flavor(f) for f in FLAVORS],
        cluster_queues=cqs,
        local_queues=[LocalQueue("default", f"lq{i}", cq.name) for i, cq in enumerate(cqs)],
    )
    return state


def check_quota_invariants(state):
    # Never over quota or limits: every ClusterQueue still has a non-negative availability.
    for node in state.cache.tree.cluster_queues.values():
        for fr in set(node.subtree) | set(node.usage):
            assert available(node, fr) >= 0, (node.name, fr)
    # The incremental usage equals usage recomputed from the admitted workloads.
    fresh = QuotaTree.build(state.cache.cluster_queues.values(), state.cache.cohorts.values())
    for admitted in state.admitted_workloads():
        add_usage(fresh.cluster_queues[admitted.admission.cluster_queue], admitted.usage)
    for name, node in {**state.cache.tree.cluster_queues, **state.cache.tree.cohorts}.items():
        other = {**fresh.cluster_queues, **fresh.cohorts}[name]
        assert {k: v for k, v in node.usage.items() if v} == {
            k: v for k, v in other.usage.items() if v
        }, name


def check_tree_requeued(state, node):
    """Quota given back in a tree makes every workload set aside there eligible again."""
    for member in node.root().cluster_queues():
        assert state.pending_in(member.name)[1] == 0, member.name


def order_key(workload):
    return (-workload.priority, workload.creation_time, workload.uid)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cqs=cluster_queues(), ops=operations, fair_sharing=st.booleans())
def test_random_sequences_keep_every_invariant(cqs, ops, fair_sharing):
    state = build_state(cqs, fair_sharing)
    now = 0.0
    serial = 0
    for op in ops:
        now += 1
        if op[0] == "add":
            _, queue, cpu, priority = op
            serial += 1
            state.add_workload(
                WL(f"w{serial}")
                .queue(f"lq{queue % len(cqs)}")
                .created(now)
                .priority(priority)
                .uid(f"u{serial:04d}")
                .request("cpu", str(cpu))
                .obj()
            )
        elif op[0] == "finish" and state.admitted_count():
            keys = sorted(a.workload.key for a in state.admitted_workloads())
            key = keys[op[1] % len(keys)]
            holder = state.admitted_workload(key)
            held, node = holder.usage, holder.node
            before = dict(node.usage)
            state.finish(key)
            # A finished workload releases exactly what it held.
            for fr, amount in held.items():
                assert before[fr] - node.usage.get(fr, 0) == amount
            check_tree_requeued(state, node)
        else:
            check_judged_without_oracle(state)
            pending_before = {
                name: [w for w, _ in state.pending() if state.queued_in(w.key) == name]
                for name in state.cluster_queue_names()
            }
            result = state.schedule(now)
            for decision in result.admitted:
                cq = state.cluster_queue(decision.admission.cluster_queue)
                if cq.queueing_strategy is QueueingStrategy.STRICT_FIFO:
                    # StrictFIFO never admits past a blocked head.
                    first = min(pending_before[cq.name], key=order_key)
                    assert first.key == decision.workload.key
            for eviction in result.evicted:
                node = state.admitted_workload(eviction.workload.key).node
                state.release(eviction.workload.key)
                check_tree_requeued(state, node)
        check_quota_invariants(state)
        check_candidate_precheck(state)


def check_judged_without_oracle(state):
    # A head judged without the oracle (the pre-check finds nothing to preempt) gets the
    # verdict the search with the oracle gives.
    scheduler = state.scheduler
    for cq, node, queue, workload, _ in state.queues.heads():
        plan = class_plan(None, workload, cq, state.cache)
        may_preempt = may_preempt_at_all(cq, node)
        judged = judge_without_oracle(
            state.cache,
            cq,
            node,
            workload,
            plan,
            may_preempt=may_preempt,
            fair_sharing=state.fair_sharing,
            partial_admission=scheduler.partial_admission,
        )
        if judged is None:
            continue
        searched = _nominate_by_search(
            scheduler, cq, node, queue, workload, None, plan, None, may_preempt
        )
        assert searched.assignment == judged, (cq.name, workload.key)
        assert searched.targets == ()


def check_candidate_precheck(state):
    # may_have_candidates answers False only where candidates() finds nobody to preempt.
    for name in state.cluster_queue_names():
        cq, node = state.cluster_queue(name), state.cache.tree.cluster_queues[name]
        for priority, created in itertools.product(range(4), (-1.0, 1e9)):
            preemptor = WL("p").priority(priority).created(created).obj()
            for need in ({("f1", "cpu")}, {("f2", "cpu")}, {("f1", "cpu"), ("f2", "cpu")}):
                need = frozenset(need)
                if not may_have_candidates(
                    preemptor,
                    cq,
                    node,
                    need,
                    state.lowest_priority,
                    fair_sharing=state.fair_sharing,
                ):
                    found = candidates(
                        preemptor,
                        cq,
                        node,
                        need,
                        state.admitted_in,
                        fair_sharing=state.fair_sharing,
                        lowest_priority=state.lowest_priority,
                    )
                    assert found == [], (name, priority, need)


@st.composite
def single_queue_preemption(draw):
    nominal = draw(st.integers(2, 10))
    running = draw(
        st.lists(st.tuples(st.integers(1, 4), st.integers(0, 5)), min_size=1, max_size=8)
    )
    request = draw(st.integers(1, nominal))
    return nominal, running, request


@settings(max_examples=200, deadline=None)
@given(single_queue_preemption())
def test_a_preemption_set_is_minimal(case):
    nominal, running, request = case
    cq = CQ("cq").preemption(within="LowerPriority").group(("f1", {"cpu": str(nominal)})).obj()
    state = build_state([cq], False)
    for i, (cpu, priority) in enumerate(running):
        wl = WL(f"r{i}").queue("lq0").priority(priority).created(i).request("cpu", str(cpu)).obj()
        state.add_workload(wl)
        for _ in range(3):
            for eviction in state.schedule(i).evicted:
                state.release(eviction.workload.key)
    preemptor = WL("p").queue("lq0").priority(9).created(100).request("cpu", str(request)).obj()
    state.add_workload(preemptor)
    result = state.schedule(100)
    if not result.evicted:
        return
    node = state.cache.tree.cluster_queues["cq"]
    want = {("f1", "cpu"): request * 1000}
    victims = [state.admitted_workload(e.workload.key) for e in result.evicted]
    assert all(v.priority < 9 for v in victims)
    for victim in victims:
        add_usage(victim.node, victim.usage, -1)
    assert fits(node, want, True)
    for keep in victims:
        # Keeping any one victim must make the preemptor not fit: nothing evicted needlessly.
        add_usage(keep.node, keep.usage)
        assert not fits(node, want, True)
        add_usage(keep.node, keep.usage, -1)
