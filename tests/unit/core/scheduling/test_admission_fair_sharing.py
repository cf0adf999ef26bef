"""Kueue's usage-based admission fair sharing (extender/core/scheduling/admission_fair_sharing.py): the
arithmetic, the order of heads, and the entry penalty, with rows of Kueue's own tables
(pkg/util/admissionfairsharing, pkg/controller/core/localqueue_controller_test.go,
pkg/cache/queue/cluster_queue_test.go TestFsAdmission, pkg/scheduler/scheduler_afs_test.go)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from extender.core.api.models import LocalQueue
from extender.core.scheduling import admission_fair_sharing as afs
from extender.core.scheduling.admission_fair_sharing import AfsConfig, UsageLedger
from extender.core.scheduling.cycle import ClusterState
from tests.builders import CQ, WL, flavor, run_until_quiet

# TestCalculateUsageWithDRA / WithNonPositiveWeight: (consumed, penalty, LQ weight, weights)
SCORES = [
    ({"gpu": 2}, {}, 1.0, {}, 2.0),
    ({"gpu": 2}, {}, 1.0, {"gpu": 3}, 6.0),
    ({"cpu": 4, "gpu": 2}, {}, 1.0, {"cpu": 1, "gpu": 5}, 14.0),
    ({"gpu": 10}, {}, 1.0, {"gpu": 0}, 0.0),
    ({}, {"gpu": 3}, 1.0, {}, 3.0),
    ({"gpu": 2}, {"gpu": 1}, 2.0, {"gpu": 4}, 6.0),
    ({}, {}, 0.0, {}, math.inf),
    ({"cpu": 1}, {}, -1.0, {}, math.inf),
]


@pytest.mark.parametrize(("consumed", "penalty", "weight", "weights", "expected"), SCORES)
def test_a_local_queues_usage(consumed, penalty, weight, weights, expected):
    assert afs.score(consumed, penalty, weight, weights) == expected


# TestLocalQueueReconcile's decay rows: (consumed cpu, held now, half-life s, elapsed s)
DECAYS = [
    (8, 0, 300, 300, 4.0),
    (8, 4, 300, 300, 6.0),
    (8, 4, 600, 300, 6.828427124),
    (8, 0, 86400, 300, 7.980769063),
]


@pytest.mark.parametrize(("consumed", "held", "half_life", "elapsed", "expected"), DECAYS)
def test_usage_decays_towards_what_is_held(consumed, held, half_life, elapsed, expected):
    ledger = UsageLedger(AfsConfig(half_life, 300))
    ledger.seed("ns/lq", {"cpu": consumed}, now=0.0)
    assert ledger.sample("ns/lq", {"cpu": held}, now=elapsed)
    assert ledger.consumed("ns/lq")["cpu"] == pytest.approx(expected, abs=1e-9)


def test_a_sample_waits_for_its_interval_and_no_half_life_keeps_no_history():
    ledger = UsageLedger(AfsConfig(300, 300))
    ledger.seed("ns/lq", {"cpu": 8}, now=0.0)
    assert not ledger.sample("ns/lq", {"cpu": 0}, now=240)  # 4 of 5 minutes
    assert ledger.due_in(["ns/lq"], now=240) == 60
    reset = UsageLedger(AfsConfig(0, 300))
    reset.seed("ns/lq", {"cpu": 8}, now=0.0)
    assert reset.sample("ns/lq", {"gpu": 4}, now=300)
    assert reset.consumed("ns/lq") == {}


def state(config: AfsConfig, *lqs: LocalQueue, fair: bool = True) -> ClusterState:
    cq = dataclasses.replace(
        CQ("cq").group(("default", {"cpu": "8", "gpu": "100"})).obj(),
        admission_fair_sharing=fair,
    )
    s = ClusterState()
    s.configure(flavors=[flavor("default")], cluster_queues=[cq], local_queues=list(lqs))
    s.configure_fair_sharing(config)
    return s


def lq(name: str, weight: float = 1.0) -> LocalQueue:
    return LocalQueue("default", name, "cq", fair_weight=weight)


def head(s: ClusterState) -> str:
    [(_, _, _, workload, _)] = s.queues.heads()
    return workload.name


# TestFsAdmission: (consumed of lq-a, of lq-b, LQ weights, resource weights, expected head)
ORDERS = [
    ({"cpu": 2}, {"cpu": 1}, (1, 1), {}, "b-low"),  # usage before priority
    ({"cpu": 1, "gpu": 10}, {"cpu": 1000, "gpu": 1}, (1, 1), {"cpu": 0, "gpu": 1}, "b-low"),
    ({"cpu": 10}, {"cpu": 6}, (1, 2), {}, "b-low"),  # 6 / 2 < 10
    ({"cpu": 1}, {"cpu": 2}, (1, 1), {}, "a-high"),
    ({"cpu": 5}, {"cpu": 5}, (1, 1), {}, "a-high"),  # equal usage: priority
]


@pytest.mark.parametrize(("used_a", "used_b", "lq_weights", "weights", "expected"), ORDERS)
def test_the_head_comes_from_the_local_queue_that_used_least(
    used_a, used_b, lq_weights, weights, expected
):
    s = state(AfsConfig(600, 60, weights), lq("lq-a", lq_weights[0]), lq("lq-b", lq_weights[1]))
    s.fair_usage.seed("default/lq-a", used_a, now=0.0)
    s.fair_usage.seed("default/lq-b", used_b, now=0.0)
    s.add_workload(WL("a-high").queue("lq-a").priority(2).created(1).request("cpu", "1").obj())
    s.add_workload(WL("b-low").queue("lq-b").priority(1).created(2).request("cpu", "1").obj())
    assert head(s) == expected


def test_without_usage_based_admission_scope_priority_decides():
    s = state(AfsConfig(600, 60), lq("lq-a"), lq("lq-b"), fair=False)
    s.fair_usage.seed("default/lq-a", {"cpu": 100}, now=0.0)
    s.add_workload(WL("a-high").queue("lq-a").priority(2).request("cpu", "1").obj())
    s.add_workload(WL("b-low").queue("lq-b").priority(1).request("cpu", "1").obj())
    assert head(s) == "a-high"


def test_a_local_queue_of_weight_zero_comes_last():
    s = state(AfsConfig(600, 60), lq("lq-a", 0.0), lq("lq-b"))
    s.fair_usage.seed("default/lq-b", {"cpu": 1000}, now=0.0)
    s.add_workload(WL("a-high").queue("lq-a").priority(2).created(1).request("cpu", "1").obj())
    s.add_workload(WL("b-low").queue("lq-b").priority(1).created(2).request("cpu", "1").obj())
    assert head(s) == "b-low"


def test_the_entry_penalty_lets_the_other_queue_go_next():
    """scheduler_afs_test.go "admits one workload from each localqueue when quota is
    limited": 8 cpu, both queues at cpu 4, four 4-cpu workloads a1, a2, b1, b2 in that order;
    half-life 10 s and sampling 1 s. a1 goes first (equal usage, created first); its penalty,
    4 × α(1 s), puts lq-a behind, so b1 goes next and the queue is full."""
    s = state(AfsConfig(10, 1), lq("lq-a"), lq("lq-b"))
    for name in ("lq-a", "lq-b"):
        s.fair_usage.seed(f"default/{name}", {"cpu": 4}, now=0.0)
    for i, name in enumerate(("a1", "a2", "b1", "b2")):
        s.add_workload(WL(name).queue(f"lq-{name[0]}").created(i).request("cpu", "4").obj())
    admitted = []
    for _ in range(4):
        result = s.schedule(1.0)
        admitted += [a.workload.name for a in result.admitted]
        if not result.progressed:
            break
    assert admitted == ["a1", "b1"]
    ledger = s.fair_sharing_ledger
    assert ledger is not None
    assert ledger.penalty("default/lq-a")["cpu"] == pytest.approx(4 * afs.alpha(1, 10))
    # Admitted: the penalty joins lq-a's history, which took one step towards what it holds.
    s.fair_usage.settle("default/a1", now=1.0)
    assert ledger.penalty("default/lq-a") == {}
    assert ledger.consumed("default/lq-a")["cpu"] == pytest.approx(
        4 * (1 - afs.alpha(1, 10)) + 4 * afs.alpha(1, 10) + 4 * afs.alpha(1, 10)
    )
    # A failed admission takes its penalty back.
    s.forget("default/b1")
    assert ledger.penalty("default/lq-b") == {}


def test_preemption_takes_from_the_busier_local_queue_first():
    """preemption_test.go "workloads with higher LQ usage first": in the preemptor's own
    ClusterQueue, a victim of the LocalQueue that used more goes before a lower-priority one
    of a LocalQueue that used less."""
    cq = dataclasses.replace(
        CQ("cq").group(("default", {"cpu": "2"})).preemption(within="LowerPriority").obj(),
        admission_fair_sharing=True,
    )
    s = ClusterState()
    s.configure(
        flavors=[flavor("default")], cluster_queues=[cq], local_queues=[lq("lq-a"), lq("lq-b")]
    )
    s.configure_fair_sharing(AfsConfig(600, 60))
    s.fair_usage.seed("default/lq-a", {"cpu": 50}, now=0.0)
    s.fair_usage.seed("default/lq-b", {"cpu": 1}, now=0.0)
    for name, queue, priority in (("busy", "lq-a", 10), ("quiet", "lq-b", 1)):
        s.add_workload(WL(name).queue(queue).priority(priority).request("cpu", "1").obj())
    run_until_quiet(s)
    assert s.is_admitted("default/busy")
    assert s.is_admitted("default/quiet")
    s.add_workload(WL("urgent").queue("lq-b").priority(100).request("cpu", "1").obj())
    [eviction] = s.schedule(1.0).evicted
    assert eviction.workload.name == "busy"
