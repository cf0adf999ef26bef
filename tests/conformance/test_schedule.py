"""Kueue v0.19.2 pkg/scheduler/scheduler_test.go TestSchedule, ported case by case.

Each test is one row of Kueue's table, named after it, with its inputs written in Tower's
builders and its expectations checked as Kueue checks them after one scheduling cycle: every
admission in the cache with its flavors (wantAssignments), what was preempted, what is left
in the queues (wantLeft) and what was set aside (wantInadmissibleLeft), and the
QuotaReserved=False reason of what waits.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import pytest

from extender.core.api.labels import LabelSelector, Requirement, Taint
from extender.core.api.models import ClusterQueue, Cohort, LocalQueue
from extender.core.api.quantity import to_amount
from tests.builders import CQ, WL, flavor
from tests.conformance.harness import Scenario, assignment, lq

FILE = "pkg/scheduler/scheduler_test.go TestSchedule"
UNSUPPORTED = "docs/kueue.md#conformance"


def dep(value: str) -> LabelSelector:
    return LabelSelector(match_expressions=(Requirement("dep", "In", (value,)),))


FLAVORS = [
    flavor("default"),
    flavor("on-demand"),
    flavor("spot"),
    flavor("model-a"),
    flavor("spot-tainted", taints=(Taint("key", "val", "NoSchedule"),)),
    flavor("spot-tainted-2", taints=(Taint("key", "val2", "NoSchedule"),)),
]


def base_cluster_queues() -> list[ClusterQueue]:
    return [
        CQ("sales").selector(dep("sales")).strict().group(("default", {"cpu": ("50", "0")})).obj(),
        CQ("eng-alpha")
        .cohort("eng")
        .selector(dep("eng"))
        .strict()
        .group(("on-demand", {"cpu": ("50", "50")}), ("spot", {"cpu": ("100", "0")}))
        .obj(),
        CQ("eng-beta")
        .cohort("eng")
        .selector(dep("eng"))
        .strict()
        .preemption(within="LowerPriority", reclaim="Any")
        .group(("on-demand", {"cpu": ("50", "10")}), ("spot", {"cpu": ("0", "100")}))
        .group(("model-a", {"example.com/gpu": ("20", "0")}))
        .obj(),
        CQ("flavor-nonexistent-cq").strict().group(("nonexistent-flavor", {"cpu": "50"})).obj(),
        CQ("lend-a")
        .cohort("lend")
        .selector(dep("lend"))
        .group(("default", {"cpu": ("3", None, "2")}))
        .obj(),
        CQ("lend-b")
        .cohort("lend")
        .selector(dep("lend"))
        .group(("default", {"cpu": ("2", None, "2")}))
        .obj(),
    ]


BASE_LOCAL_QUEUES = [
    lq("sales", "main", "sales"),
    lq("sales", "blocked", "eng-alpha"),
    lq("eng-alpha", "main", "eng-alpha"),
    lq("eng-beta", "main", "eng-beta"),
    lq("sales", "flavor-nonexistent-queue", "flavor-nonexistent-cq"),
    lq("sales", "cq-nonexistent-queue", "nonexistent-cq"),
    lq("lend", "lend-a-queue", "lend-a"),
    lq("lend", "lend-b-queue", "lend-b"),
]


def scenario(
    cluster_queues: Iterable[ClusterQueue] = (),
    local_queues: Iterable[LocalQueue] = (),
    cohorts: Iterable[Cohort] = (),
    *,
    partial_admission: bool = True,
) -> Scenario:
    """TestSchedule's shared flavors, ClusterQueues and LocalQueues, plus the case's own
    (with Kueue's PartialAdmission feature gate on, as those rows set it, unless said)."""
    extra = list(cluster_queues)
    names = {cq.name for cq in extra}
    return Scenario(
        flavors=FLAVORS,
        cluster_queues=[cq for cq in base_cluster_queues() if cq.name not in names] + extra,
        local_queues=[*BASE_LOCAL_QUEUES, *local_queues],
        cohorts=cohorts,
        partial_admission=partial_admission,
    )


def test_use_second_flavor_when_the_first_has_no_preemption_candidates_when_can_preempt_may_stop_search() -> (
    None
):
    s = scenario(
        [
            CQ("other-alpha")
            .preemption(within="LowerPriority")
            .fungibility(preempt="MayStopSearch")
            .group(("on-demand", {"cpu": ("50", "50")}), ("spot", {"cpu": ("100", "0")}))
            .obj()
        ],
        [lq("eng-alpha", "other", "other-alpha")],
    )
    s.admitted(
        WL("admitted", "eng-alpha").queue("other").request("cpu", "50"),
        "other-alpha",
        cpu="on-demand",
    )
    s.pending(WL("new", "eng-alpha").queue("other").request("cpu", "20"))
    out = s.cycle()
    assert out.assignments == {
        "eng-alpha/admitted": assignment("other-alpha", cpu="on-demand"),
        "eng-alpha/new": assignment("other-alpha", cpu="spot"),
    }


def test_workload_fits_in_single_cluster_queue_with_check_state_ready() -> None:
    s = scenario()
    s.pending(WL("foo", "sales").queue("main").pod_set("one", 10, cpu="1"))
    out = s.cycle()
    assert out.assignments == {"sales/foo": assignment("sales", {"one": {"cpu": "default"}})}


def test_skip_workload_with_missing_or_deleted_cluster_queue_no_fit() -> None:
    s = scenario()
    s.pending(
        WL("missing-cq-workload", "sales").queue("non-existent-queue").pod_set("set", 1, cpu="1")
    )
    out = s.cycle()
    assert out.assignments == {}
    assert out.left == {}
    assert out.inadmissible == {}


def test_flavors_with_mixed_misconfiguration_and_insufficient_quota() -> None:
    s = scenario(
        [
            CQ("custom-cq")
            .strict()
            .group(("spot-tainted", {"cpu": ("20", "20")}), ("on-demand", {"cpu": ("15", "15")}))
            .obj()
        ],
        [lq("sales", "custom-q", "custom-cq")],
    )
    s.admitted(
        WL("existing-on-demand-job", "sales").queue("custom-q").request("cpu", "10"),
        "custom-cq",
        cpu="on-demand",
    )
    s.pending(WL("new-job", "sales").queue("custom-q").request("cpu", "10"))
    out = s.cycle()
    assert out.assignments == {
        "sales/existing-on-demand-job": assignment("custom-cq", cpu="on-demand")
    }
    assert out.left == {"custom-cq": {"sales/new-job"}}
    assert out.reasons["sales/new-job"] == "WaitingForQuota"


def test_flavors_with_mixed_taint_mismatch_and_exceeding_limits() -> None:
    s = scenario(
        [
            CQ("custom-cq2")
            .strict()
            .group(("spot-tainted", {"cpu": ("20", "20")}), ("on-demand", {"cpu": ("5", "5")}))
            .obj()
        ],
        [lq("sales", "custom-q2", "custom-cq2")],
    )
    s.pending(WL("new-job2", "sales").queue("custom-q2").request("cpu", "10"))
    out = s.cycle()
    assert out.assignments == {}
    assert out.left == {"custom-cq2": {"sales/new-job2"}}
    assert out.reasons["sales/new-job2"] == "ExceedsMaxQuota"


def test_flavors_are_structurally_incompatible() -> None:
    s = scenario(
        [
            CQ("custom-cq3")
            .strict()
            .group(("spot-tainted", {"cpu": ("20", "20")}), ("spot-tainted-2", {"cpu": ("5", "5")}))
            .obj()
        ],
        [lq("sales", "custom-q3", "custom-cq3")],
    )
    s.pending(WL("new-job3", "sales").queue("custom-q3").request("cpu", "1"))
    out = s.cycle()
    assert out.assignments == {}
    assert out.left == {"custom-cq3": {"sales/new-job3"}}
    assert out.reasons["sales/new-job3"] == "NoMatchingFlavor"


def test_workload_fits_in_single_cluster_queue_with_check_state_pending() -> None:
    s = scenario()
    s.pending(WL("foo", "sales").queue("main").pod_set("one", 10, cpu="1"))
    out = s.cycle()
    assert out.assignments == {"sales/foo": assignment("sales", {"one": {"cpu": "default"}})}


def test_error_during_admission() -> None:
    s = scenario()
    s.pending(WL("foo", "sales").queue("main").pod_set("one", 10, cpu="1"))
    result = s.state.schedule(0.0)
    s.state.forget("sales/foo")  # the status write failed
    out = s.outcome()
    assert [a.workload.key for a in result.admitted] == ["sales/foo"]
    assert out.assignments == {}
    assert out.left == {"sales": {"sales/foo"}}


def test_single_cluster_queue_full() -> None:
    s = scenario()
    s.pending(WL("new", "sales").queue("main").pod_set("one", 11, cpu="1"))
    s.admitted(
        WL("assigned", "sales").pod_set("one", 40, cpu="1"), "sales", {"one": {"cpu": "default"}}
    )
    out = s.cycle()
    assert out.assignments == {"sales/assigned": assignment("sales", {"one": {"cpu": "default"}})}
    assert out.left == {"sales": {"sales/new"}}
    assert out.reasons["sales/new"] == "WaitingForQuota"


def test_failed_to_match_cluster_queue_selector() -> None:
    s = scenario()
    s.pending(WL("new", "sales").queue("blocked").pod_set("one", 1, cpu="1"))
    out = s.cycle()
    assert out.assignments == {}
    assert out.inadmissible == {"eng-alpha": {"sales/new"}}
    assert out.reasons["sales/new"] == "Misconfigured"


def test_admit_in_different_cohorts() -> None:
    s = scenario()
    s.pending(
        WL("new", "sales").queue("main").pod_set("one", 1, cpu="1"),
        WL("new", "eng-alpha").queue("main").pod_set("one", 51, cpu="1"),
    )
    out = s.cycle()
    assert out.assignments == {
        "sales/new": assignment("sales", {"one": {"cpu": "default"}}),
        "eng-alpha/new": assignment("eng-alpha", {"one": {"cpu": "on-demand"}}),
    }


def test_admit_in_same_cohort_with_no_borrowing() -> None:
    s = scenario()
    s.pending(
        WL("new", "eng-alpha").queue("main").pod_set("one", 40, cpu="1"),
        WL("new", "eng-beta").queue("main").pod_set("one", 40, cpu="1"),
    )
    out = s.cycle()
    assert out.assignments == {
        "eng-alpha/new": assignment("eng-alpha", {"one": {"cpu": "on-demand"}}),
        "eng-beta/new": assignment("eng-beta", {"one": {"cpu": "on-demand"}}),
    }


def test_assign_multiple_resources_and_flavors() -> None:
    s = scenario()
    s.pending(
        WL("new", "eng-beta")
        .queue("main")
        .pod_set("one", 10, cpu="6", **{"example.com/gpu": "1"})
        .pod_set("two", 40, cpu="1")
    )
    out = s.cycle()
    assert out.assignments == {
        "eng-beta/new": assignment(
            "eng-beta",
            {"one": {"cpu": "on-demand", "example.com/gpu": "model-a"}, "two": {"cpu": "spot"}},
        )
    }


def test_cannot_borrow_if_cohort_was_assigned_and_would_result_in_overadmission() -> None:
    s = scenario()
    s.pending(
        WL("new", "eng-alpha").queue("main").pod_set("one", 45, cpu="1"),
        WL("new", "eng-beta").queue("main").pod_set("one", 56, cpu="1"),
    )
    out = s.cycle()
    assert out.assignments == {
        "eng-alpha/new": assignment("eng-alpha", {"one": {"cpu": "on-demand"}})
    }
    assert out.left == {"eng-beta": {"eng-beta/new"}}
    assert out.reasons["eng-beta/new"] == "WaitingForQuota"


def test_can_borrow_if_cohort_was_assigned_and_will_not_result_in_overadmission() -> None:
    s = scenario()
    s.pending(
        WL("new", "eng-alpha").queue("main").pod_set("one", 45, cpu="1"),
        WL("new", "eng-beta").queue("main").pod_set("one", 55, cpu="1"),
    )
    out = s.cycle()
    assert out.assignments == {
        "eng-alpha/new": assignment("eng-alpha", {"one": {"cpu": "on-demand"}}),
        "eng-beta/new": assignment("eng-beta", {"one": {"cpu": "on-demand"}}),
    }


def test_can_borrow_if_needs_reclaim_from_cohort_in_different_flavor() -> None:
    s = scenario()
    s.pending(
        WL("can-reclaim", "eng-alpha").queue("main").request("cpu", "100"),
        WL("needs-to-borrow", "eng-beta").queue("main").request("cpu", "1"),
    )
    s.admitted(WL("user-on-demand", "eng-beta").request("cpu", "50"), "eng-beta", cpu="on-demand")
    s.admitted(WL("user-spot", "eng-beta").request("cpu", "1"), "eng-beta", cpu="spot")
    out = s.cycle()
    assert out.assignments == {
        "eng-beta/user-spot": assignment("eng-beta", cpu="spot"),
        "eng-beta/user-on-demand": assignment("eng-beta", cpu="on-demand"),
        "eng-beta/needs-to-borrow": assignment("eng-beta", cpu="on-demand"),
    }
    assert out.left == {"eng-alpha": {"eng-alpha/can-reclaim"}}
    assert out.reasons["eng-alpha/can-reclaim"] == "WaitingForQuota"


def test_workload_exceeds_lending_limit_when_borrow_in_cohort() -> None:
    s = scenario()
    s.admitted(WL("a", "lend").request("cpu", "2"), "lend-b", cpu="default")
    s.pending(WL("b", "lend").queue("lend-b-queue").request("cpu", "3"))
    out = s.cycle()
    assert out.assignments == {"lend/a": assignment("lend-b", cpu="default")}
    assert out.inadmissible == {"lend-b": {"lend/b"}}
    assert out.reasons["lend/b"] == "WaitingForQuota"


def _lender_borrower(lending_limit: str) -> Scenario:
    return scenario(
        [
            CQ("cq-lender")
            .cohort("child")
            .selector(dep("eng"))
            .group(("on-demand", {"cpu": ("10", None, lending_limit)}))
            .obj(),
            CQ("cq-borrower")
            .cohort("child")
            .selector(dep("eng"))
            .group(("on-demand", {"cpu": ("5", "10")}))
            .obj(),
        ],
        [lq("eng-alpha", "lq-lender", "cq-lender"), lq("eng-alpha", "lq-borrower", "cq-borrower")],
        [Cohort("root"), Cohort("child", "root")],
    )


def test_hierarchical_cohort_respects_lending_limit_when_borrowing() -> None:
    s = _lender_borrower("3")
    s.admitted(WL("wl-existing", "eng-alpha").request("cpu", "5"), "cq-borrower", cpu="on-demand")
    s.pending(WL("wl-pending", "eng-alpha").queue("lq-borrower").request("cpu", "4"))
    out = s.cycle()
    assert out.assignments == {"eng-alpha/wl-existing": assignment("cq-borrower", cpu="on-demand")}
    assert out.inadmissible == {"cq-borrower": {"eng-alpha/wl-pending"}}
    assert out.reasons["eng-alpha/wl-pending"] == "WaitingForQuota"


def test_hierarchical_cohort_allows_borrowing_up_to_lending_limit() -> None:
    s = _lender_borrower("5")
    s.admitted(WL("wl-existing", "eng-alpha").request("cpu", "5"), "cq-borrower", cpu="on-demand")
    s.pending(WL("wl-borrowing", "eng-alpha").queue("lq-borrower").request("cpu", "5"))
    out = s.cycle()
    assert out.assignments == {
        "eng-alpha/wl-existing": assignment("cq-borrower", cpu="on-demand"),
        "eng-alpha/wl-borrowing": assignment("cq-borrower", cpu="on-demand"),
    }


def test_preempt_workloads_in_cluster_queue_and_cohort() -> None:
    s = scenario()
    s.pending(WL("preemptor", "eng-beta").queue("main").request("cpu", "20"))
    s.admitted(WL("use-all-spot", "eng-alpha").request("cpu", "100"), "eng-alpha", cpu="spot")
    s.admitted(
        WL("low-1", "eng-beta").priority(-1).request("cpu", "30"), "eng-beta", cpu="on-demand"
    )
    s.admitted(
        WL("low-2", "eng-beta").priority(-2).request("cpu", "10"), "eng-beta", cpu="on-demand"
    )
    s.admitted(WL("borrower", "eng-alpha").request("cpu", "60"), "eng-alpha", cpu="on-demand")
    out = s.cycle()
    assert out.preempted == {
        "eng-alpha/borrower": "InCohortReclamation",
        "eng-beta/low-2": "InClusterQueue",
    }
    assert out.assignments == {
        "eng-alpha/use-all-spot": assignment("eng-alpha", cpu="spot"),
        "eng-beta/low-1": assignment("eng-beta", cpu="on-demand"),
        "eng-beta/low-2": assignment("eng-beta", cpu="on-demand"),
        "eng-alpha/borrower": assignment("eng-alpha", cpu="on-demand"),
    }
    assert out.left == {"eng-beta": {"eng-beta/preemptor"}}
    assert out.reasons["eng-beta/preemptor"] == "WaitingForPreemptedWorkloads"


def test_multiple_cluster_queues_need_preemption() -> None:
    """multiple CQs need preemption"""
    s = scenario(
        [
            CQ("other-alpha").cohort("other").group(("on-demand", {"cpu": ("50", "50")})).obj(),
            CQ("other-beta")
            .cohort("other")
            .preemption(within="LowerPriority", reclaim="Any")
            .group(("on-demand", {"cpu": ("50", "10")}))
            .obj(),
        ],
        [lq("eng-alpha", "other", "other-alpha"), lq("eng-beta", "other", "other-beta")],
    )
    s.pending(
        WL("preemptor", "eng-beta").priority(-1).queue("other").request("cpu", "1"),
        WL("pending", "eng-alpha").priority(1).queue("other").request("cpu", "1"),
    )
    s.admitted(WL("use-all", "eng-alpha").request("cpu", "100"), "other-alpha", cpu="on-demand")
    out = s.cycle()
    assert out.preempted == {"eng-alpha/use-all": "InCohortReclamation"}
    assert out.assignments == {"eng-alpha/use-all": assignment("other-alpha", cpu="on-demand")}
    assert out.left == {"other-beta": {"eng-beta/preemptor"}}
    assert out.inadmissible == {"other-alpha": {"eng-alpha/pending"}}
    assert out.reasons["eng-alpha/pending"] == "WaitingForQuota"
    assert out.reasons["eng-beta/preemptor"] == "WaitingForPreemptedWorkloads"


def test_cannot_borrow_resource_not_listed_in_cluster_queue() -> None:
    s = scenario()
    s.pending(WL("new", "eng-alpha").queue("main").request("example.com/gpu", "1"))
    out = s.cycle()
    assert out.assignments == {}
    assert out.left == {"eng-alpha": {"eng-alpha/new"}}
    assert out.reasons["eng-alpha/new"] == "NoMatchingFlavor"


def test_not_enough_resources_to_borrow_fallback_to_next_flavor_when_can_preempt_try_next_flavor() -> (
    None
):
    s = scenario()
    s.pending(WL("new", "eng-alpha").queue("main").pod_set("one", 60, cpu="1"))
    s.admitted(
        WL("existing", "eng-beta").pod_set("one", 45, cpu="1"),
        "eng-beta",
        {"one": {"cpu": "on-demand"}},
    )
    out = s.cycle()
    assert out.assignments == {
        "eng-alpha/new": assignment("eng-alpha", {"one": {"cpu": "spot"}}),
        "eng-beta/existing": assignment("eng-beta", {"one": {"cpu": "on-demand"}}),
    }


def test_workload_should_not_fit_in_nonexistent_cluster_queue() -> None:
    s = scenario()
    s.pending(WL("foo", "sales").queue("cq-nonexistent-queue").request("cpu", "1"))
    out = s.cycle()
    assert out.assignments == {}
    assert out.left == {}
    assert out.inadmissible == {}


def test_workload_should_not_fit_in_cluster_queue_with_nonexistent_flavor() -> None:
    s = scenario()
    s.pending(WL("foo", "sales").queue("flavor-nonexistent-queue").request("cpu", "1"))
    out = s.cycle()
    assert out.assignments == {}
    assert out.left == {"flavor-nonexistent-cq": {"sales/foo"}}


def test_no_overadmission_while_borrowing() -> None:
    s = scenario(
        [
            CQ("eng-gamma")
            .cohort("eng")
            .preemption(within="LowerPriority", reclaim="Any")
            .group(("on-demand", {"cpu": ("50", "10")}), ("spot", {"cpu": ("0", "100")}))
            .obj()
        ],
        [lq("eng-gamma", "main", "eng-gamma")],
    )
    s.pending(
        WL("new", "eng-beta").queue("main").created(-2).pod_set("one", 50, cpu="1"),
        WL("new-alpha", "eng-alpha").queue("main").created(-1).pod_set("one", 1, cpu="1"),
        WL("new-gamma", "eng-gamma").queue("main").created(0).pod_set("one", 50, cpu="1"),
    )
    s.admitted(
        WL("existing", "eng-gamma")
        .pod_set("borrow-on-demand", 51, cpu="1")
        .pod_set("use-all-spot", 100, cpu="1"),
        "eng-gamma",
        {"borrow-on-demand": {"cpu": "on-demand"}, "use-all-spot": {"cpu": "spot"}},
    )
    out = s.cycle()
    assert out.preempted == {}
    assert out.assignments == {
        "eng-gamma/existing": assignment(
            "eng-gamma", {"borrow-on-demand": {"cpu": "on-demand"}, "use-all-spot": {"cpu": "spot"}}
        ),
        "eng-beta/new": assignment("eng-beta", {"one": {"cpu": "on-demand"}}),
        "eng-alpha/new-alpha": assignment("eng-alpha", {"one": {"cpu": "on-demand"}}),
    }
    assert out.inadmissible == {"eng-gamma": {"eng-gamma/new-gamma"}}
    assert out.reasons["eng-gamma/new-gamma"] == "WaitingForQuota"


def held(s: Scenario, key: str) -> dict[str, dict[str, int]]:
    """The quota an admitted workload holds per pod set (status.admission's resourceUsage)."""
    admitted = next(a for a in s.state.admitted_workloads() if a.workload.key == key)
    return {psa.name: dict(psa.resource_usage) for psa in admitted.admission.pod_set_assignments}


def test_partial_admission_single_variable_pod_set() -> None:
    s = scenario()
    s.pending(WL("new", "sales").queue("main").pod_set("one", 50, cpu="2", min_count=20))
    out = s.cycle()
    assert out.assignments == {"sales/new": assignment("sales", {"one": {"cpu": "default"}})}
    assert out.counts == {"sales/new": {"one": 25}}
    assert held(s, "sales/new") == {"one": {"cpu": to_amount("cpu", "50")}}


def test_partial_admission_single_variable_pod_set_preempt_first() -> None:
    s = scenario()
    s.pending(
        WL("new", "eng-beta")
        .queue("main")
        .priority(4)
        .pod_set("one", 20, min_count=10, **{"example.com/gpu": "1"})
    )
    s.admitted(
        WL("old", "eng-beta").priority(-4).pod_set("one", 10, **{"example.com/gpu": "1"}),
        "eng-beta",
        {"one": {"example.com/gpu": "model-a"}},
    )
    out = s.cycle()
    # Kueue preempts for the whole count before it tries a smaller one.
    assert out.preempted == {"eng-beta/old": "InClusterQueue"}
    assert out.left == {"eng-beta": {"eng-beta/new"}}
    assert out.reasons["eng-beta/new"] == "WaitingForPreemptedWorkloads"
    assert out.counts == {"eng-beta/old": {"one": 10}}


def test_partial_admission_single_variable_pod_set_preempt_with_partial_admission() -> None:
    s = scenario()
    s.pending(
        WL("new", "eng-beta")
        .queue("main")
        .priority(4)
        .pod_set("one", 30, min_count=10, **{"example.com/gpu": "1"})
    )
    s.admitted(
        WL("old", "eng-beta").priority(-4).pod_set("one", 10, **{"example.com/gpu": "1"}),
        "eng-beta",
        {"one": {"example.com/gpu": "model-a"}},
    )
    out = s.cycle()
    assert out.preempted == {"eng-beta/old": "InClusterQueue"}
    assert out.left == {"eng-beta": {"eng-beta/new"}}
    assert out.reasons["eng-beta/new"] == "WaitingForPreemptedWorkloads"
    # Kueue's message counts 10 more needed: it preempts for 20 of the 30, what fits once
    # "old" is gone, not for all 30.
    assert "needs 20 example.com/gpu in flavor model-a" in out.messages["eng-beta/new"]


def test_partial_admission_multiple_variable_pod_sets() -> None:
    s = scenario()
    s.pending(
        WL("new", "sales")
        .queue("main")
        .pod_set("one", 20, cpu="1")
        .pod_set("two", 30, cpu="1", min_count=10)
        .pod_set("three", 15, cpu="1", min_count=5)
    )
    out = s.cycle()
    assert out.assignments == {
        "sales/new": assignment("sales", {p: {"cpu": "default"} for p in ("one", "two", "three")})
    }
    assert out.counts == {"sales/new": {"one": 20, "two": 20, "three": 10}}
    assert held(s, "sales/new") == {
        p: {"cpu": to_amount("cpu", n)} for p, n in (("one", "20"), ("two", "20"), ("three", "10"))
    }


def test_partial_admission_disabled_multiple_variable_pod_sets() -> None:
    s = scenario(partial_admission=False)
    s.pending(
        WL("new", "sales")
        .queue("main")
        .pod_set("one", 20, cpu="1")
        .pod_set("two", 30, cpu="1", min_count=10)
        .pod_set("three", 15, cpu="1", min_count=5)
    )
    out = s.cycle()
    assert out.assignments == {}
    assert out.left == {"sales": {"sales/new"}}
    assert out.reasons["sales/new"] == "ExceedsMaxQuota"


def _three_cqs_two_resources() -> Scenario:
    def cq(name: str) -> ClusterQueue:
        return (
            CQ(name)
            .cohort("co")
            .preemption(within="LowerPriority", reclaim="Any")
            .group(("default", {"r1": ("10", "10"), "r2": ("10", "10")}))
            .obj()
        )

    return scenario(
        [cq("cq1"), cq("cq2"), cq("cq3")],
        [lq("sales", "lq1", "cq1"), lq("sales", "lq2", "cq2"), lq("sales", "lq3", "cq3")],
    )


def test_two_workloads_can_borrow_different_resources_from_the_same_flavor_in_the_same_cycle() -> (
    None
):
    s = _three_cqs_two_resources()
    s.pending(
        WL("wl1", "sales").queue("lq1").priority(-1).request("r1", "16"),
        WL("wl2", "sales").queue("lq2").priority(-2).request("r2", "16"),
    )
    out = s.cycle()
    assert out.assignments == {
        "sales/wl1": assignment("cq1", r1="default"),
        "sales/wl2": assignment("cq2", r2="default"),
    }


def test_two_workloads_can_borrow_the_same_resources_from_the_same_flavor_in_the_same_cycle_if_fits_in_the_cohort_quota() -> (
    None
):
    s = _three_cqs_two_resources()
    s.pending(
        WL("wl1", "sales").queue("lq1").priority(-1).request("r1", "16"),
        WL("wl2", "sales").queue("lq2").priority(-2).request("r1", "14"),
    )
    out = s.cycle()
    assert out.assignments == {
        "sales/wl1": assignment("cq1", r1="default"),
        "sales/wl2": assignment("cq2", r1="default"),
    }


def test_only_one_workload_can_borrow_one_resources_from_the_same_flavor_in_the_same_cycle_if_cohort_quota_cannot_fit() -> (
    None
):
    s = _three_cqs_two_resources()
    s.pending(
        WL("wl1", "sales").queue("lq1").priority(-1).request("r1", "16"),
        WL("wl2", "sales").queue("lq2").priority(-2).request("r1", "16"),
    )
    out = s.cycle()
    assert out.assignments == {"sales/wl1": assignment("cq1", r1="default")}
    assert out.left == {"cq2": {"sales/wl2"}}
    assert out.reasons["sales/wl2"] == "WaitingForQuota"


def test_preemption_while_borrowing_workload_waiting_for_preemption_should_not_block_a_borrowing_workload_in_another_cq() -> (
    None
):
    s = scenario(
        [
            CQ("cq_shared")
            .cohort("preemption-while-borrowing")
            .group(("default", {"cpu": ("4", "0")}))
            .obj(),
            CQ("cq_a")
            .cohort("preemption-while-borrowing")
            .preemption(reclaim="LowerPriority", borrow="LowerPriority")
            .group(("default", {"cpu": ("0", "3")}))
            .obj(),
            CQ("cq_b")
            .cohort("preemption-while-borrowing")
            .preemption(reclaim="LowerPriority", borrow="LowerPriority")
            .group(("default", {"cpu": "0"}))
            .obj(),
        ],
        [lq("eng-alpha", "lq_a", "cq_a"), lq("eng-beta", "lq_b", "cq_b")],
    )
    s.pending(
        WL("a", "eng-alpha").queue("lq_a").created(1).request("cpu", "3"),
        WL("b", "eng-beta").queue("lq_b").created(2).request("cpu", "1"),
    )
    s.admitted(
        WL("admitted_a", "eng-alpha").queue("lq_a").request("cpu", "2"), "cq_a", cpu="default"
    )
    out = s.cycle()
    assert out.preempted == {}
    assert out.assignments == {
        "eng-alpha/admitted_a": assignment("cq_a", cpu="default"),
        "eng-beta/b": assignment("cq_b", cpu="default"),
    }
    assert out.inadmissible == {"cq_a": {"eng-alpha/a"}}
    assert out.reasons["eng-alpha/a"] == "WaitingForQuota"


def test_minimal_preemptions_when_target_queue_is_exhausted() -> None:
    s = scenario(
        [
            CQ("other-alpha")
            .cohort("other")
            .preemption(within="LowerPriority", reclaim="Any")
            .group(("on-demand", {"cpu": "2"}))
            .obj(),
            CQ("other-beta").cohort("other").group(("on-demand", {"cpu": "2"})).obj(),
            CQ("other-gamma").cohort("other").group(("on-demand", {"cpu": "2"})).obj(),
        ],
        [
            lq("eng-alpha", "other", "other-alpha"),
            lq("eng-beta", "other", "other-beta"),
            lq("eng-gamma", "other", "other-gamma"),
        ],
    )
    for name, priority in (("a1", -2), ("a2", -2), ("a3", -1)):
        s.admitted(
            WL(name, "eng-alpha").priority(priority).queue("other").request("cpu", "1"),
            "other-alpha",
            cpu="on-demand",
        )
    for name in ("b1", "b2", "b3"):
        s.admitted(
            WL(name, "eng-beta").priority(0).queue("other").request("cpu", "1"),
            "other-beta",
            cpu="on-demand",
        )
    s.pending(WL("incoming", "eng-alpha").priority(0).queue("other").request("cpu", "2"))
    out = s.cycle()
    assert out.preempted == {"eng-alpha/a1": "InClusterQueue", "eng-alpha/a2": "InClusterQueue"}
    assert out.left == {"other-alpha": {"eng-alpha/incoming"}}
    assert out.reasons["eng-alpha/incoming"] == "WaitingForPreemptedWorkloads"
    assert set(out.assignments) == {f"eng-alpha/a{i}" for i in (1, 2, 3)} | {
        f"eng-beta/b{i}" for i in (1, 2, 3)
    }


def test_a_workload_is_only_eligible_to_do_preemptions_if_it_fits_fully_within_nominal_quota() -> (
    None
):
    s = scenario(
        [
            CQ("other-alpha")
            .cohort("other")
            .preemption(within="LowerPriority", reclaim="Any")
            .group(("on-demand", {"cpu": "2"}))
            .obj(),
            CQ("other-beta").cohort("other").group(("on-demand", {"cpu": "2"})).obj(),
        ],
        [lq("eng-alpha", "other", "other-alpha"), lq("eng-beta", "other", "other-beta")],
    )
    s.admitted(
        WL("a1", "eng-alpha").priority(-1).queue("other").request("cpu", "1"),
        "other-alpha",
        cpu="on-demand",
    )
    s.admitted(
        WL("b1", "eng-beta").priority(-1).queue("other").request("cpu", "1"),
        "other-beta",
        cpu="on-demand",
    )
    s.pending(WL("incoming", "eng-alpha").priority(1).queue("other").request("cpu", "3"))
    out = s.cycle()
    assert out.preempted == {}
    assert out.inadmissible == {"other-alpha": {"eng-alpha/incoming"}}
    assert out.reasons["eng-alpha/incoming"] == "WaitingForQuota"
    assert out.assignments == {
        "eng-alpha/a1": assignment("other-alpha", cpu="on-demand"),
        "eng-beta/b1": assignment("other-beta", cpu="on-demand"),
    }


def _other_cohort(*cqs: ClusterQueue) -> Scenario:
    namespaces = {"other-alpha": "eng-alpha", "other-beta": "eng-beta", "other-gamma": "eng-gamma"}
    return scenario(
        cqs, [lq(namespaces[cq.name], "other", cq.name) for cq in cqs if cq.name in namespaces]
    )


def test_multiple_preemptions_without_borrowing() -> None:
    s = _other_cohort(
        CQ("other-alpha")
        .cohort("other")
        .preemption(within="LowerPriority")
        .group(("default", {"cpu": "2"}))
        .obj(),
        CQ("other-beta")
        .cohort("other")
        .preemption(within="LowerPriority")
        .group(("default", {"cpu": "2"}))
        .obj(),
    )
    s.admitted(
        WL("a1", "eng-alpha").priority(0).queue("other").request("cpu", "2"),
        "other-alpha",
        cpu="default",
    )
    s.admitted(
        WL("b1", "eng-beta").priority(0).queue("other").request("cpu", "2"),
        "other-beta",
        cpu="default",
    )
    s.pending(
        WL("preemptor", "eng-alpha").priority(100).queue("other").request("cpu", "2"),
        WL("preemptor", "eng-beta").priority(100).queue("other").request("cpu", "2"),
    )
    out = s.cycle()
    assert out.preempted == {"eng-alpha/a1": "InClusterQueue", "eng-beta/b1": "InClusterQueue"}
    assert out.left == {
        "other-alpha": {"eng-alpha/preemptor"},
        "other-beta": {"eng-beta/preemptor"},
    }
    assert out.reasons["eng-alpha/preemptor"] == "WaitingForPreemptedWorkloads"
    assert out.reasons["eng-beta/preemptor"] == "WaitingForPreemptedWorkloads"
    assert set(out.assignments) == {"eng-alpha/a1", "eng-beta/b1"}


def test_multiple_preemptions_preemption_possible_after_earlier_workload_fits() -> None:
    s = _other_cohort(
        CQ("other-alpha")
        .cohort("other")
        .preemption(within="LowerPriority")
        .group(("default", {"cpu": "1"}))
        .obj(),
        CQ("other-beta")
        .cohort("other")
        .preemption(within="LowerPriority")
        .group(("default", {"cpu": "2"}))
        .obj(),
    )
    s.admitted(
        WL("b1", "eng-beta").priority(0).queue("other").request("cpu", "2"),
        "other-beta",
        cpu="default",
    )
    s.pending(
        WL("fit", "eng-alpha").priority(100).queue("other").request("cpu", "1"),
        WL("preemptor", "eng-beta").priority(99).queue("other").request("cpu", "2"),
    )
    out = s.cycle()
    assert out.preempted == {"eng-beta/b1": "InClusterQueue"}
    assert out.assignments == {
        "eng-alpha/fit": assignment("other-alpha", cpu="default"),
        "eng-beta/b1": assignment("other-beta", cpu="default"),
    }
    assert out.left == {"other-beta": {"eng-beta/preemptor"}}
    assert out.reasons["eng-beta/preemptor"] == "WaitingForPreemptedWorkloads"


def test_multiple_preemptions_skip_preemption_when_shared_limited_resource() -> None:
    s = _other_cohort(
        CQ("other-alpha")
        .cohort("other")
        .preemption(within="LowerPriority", borrow="LowerPriority")
        .group(("default", {"cpu": "2"}))
        .obj(),
        CQ("other-beta")
        .cohort("other")
        .preemption(within="LowerPriority", borrow="LowerPriority")
        .group(("default", {"cpu": "2"}))
        .obj(),
        CQ("resource-bank").cohort("other").group(("default", {"cpu": "1"})).obj(),
    )
    s.admitted(
        WL("a1", "eng-alpha").priority(0).queue("other").request("cpu", "2"),
        "other-alpha",
        cpu="default",
    )
    s.admitted(
        WL("b1", "eng-beta").priority(0).queue("other").request("cpu", "2"),
        "other-beta",
        cpu="default",
    )
    s.pending(
        WL("preemptor", "eng-alpha").priority(100).queue("other").request("cpu", "3"),
        WL("pretending-preemptor", "eng-beta").priority(99).queue("other").request("cpu", "3"),
    )
    out = s.cycle()
    assert out.preempted == {"eng-alpha/a1": "InClusterQueue"}
    assert out.left == {
        "other-alpha": {"eng-alpha/preemptor"},
        "other-beta": {"eng-beta/pretending-preemptor"},
    }
    assert out.reasons["eng-alpha/preemptor"] == "WaitingForPreemptedWorkloads"
    assert out.reasons["eng-beta/pretending-preemptor"] == "WaitingForQuota"
    assert set(out.assignments) == {"eng-alpha/a1", "eng-beta/b1"}


def test_not_enough_resources() -> None:
    s = scenario()
    s.pending(WL("new", "sales").queue("main").pod_set("one", 1, cpu="100"))
    out = s.cycle()
    assert out.assignments == {}
    assert out.left == {"sales": {"sales/new"}}
    assert out.reasons["sales/new"] == "ExceedsMaxQuota"


def _gpu_cohort(beta_preempts: bool) -> Scenario:
    beta = CQ("other-beta").cohort("other")
    if beta_preempts:
        beta = beta.preemption(within="LowerPriority", reclaim="LowerPriority")
    return _other_cohort(
        CQ("other-alpha")
        .cohort("other")
        .preemption(within="LowerPriority", reclaim="LowerPriority")
        .group(("on-demand", {"gpu": "10"}), ("spot", {"gpu": "10"}))
        .obj(),
        beta.group(("on-demand", {"gpu": "0"}), ("spot", {"gpu": "0"})).obj(),
    )


def test_prefer_reclamation_over_cq_priority_based_preemption() -> None:
    s = _gpu_cohort(beta_preempts=True)
    s.admitted(
        WL("a1", "eng-alpha").priority(50).queue("other").request("gpu", "5"),
        "other-alpha",
        gpu="on-demand",
    )
    s.admitted(
        WL("b1", "eng-beta").priority(50).queue("other").request("gpu", "5"),
        "other-beta",
        gpu="spot",
    )
    s.pending(WL("preemptor", "eng-alpha").priority(100).queue("other").request("gpu", "6"))
    out = s.cycle()
    assert out.preempted == {"eng-beta/b1": "InCohortReclamation"}
    assert out.left == {"other-alpha": {"eng-alpha/preemptor"}}
    assert out.reasons["eng-alpha/preemptor"] == "WaitingForPreemptedWorkloads"


def test_prefer_first_preemption_flavor_when_second_flavor_requires_both_reclaim_and_cq_priority_preemption() -> (
    None
):
    s = _gpu_cohort(beta_preempts=False)
    s.admitted(
        WL("a1", "eng-alpha").priority(50).queue("other").request("gpu", "5"),
        "other-alpha",
        gpu="on-demand",
    )
    s.admitted(
        WL("a2", "eng-alpha").priority(50).queue("other").request("gpu", "5"),
        "other-alpha",
        gpu="spot",
    )
    s.admitted(
        WL("b1", "eng-beta").priority(50).queue("other").request("gpu", "5"),
        "other-beta",
        gpu="spot",
    )
    s.pending(WL("preemptor", "eng-alpha").priority(100).queue("other").request("gpu", "6"))
    out = s.cycle()
    assert out.preempted == {"eng-alpha/a1": "InClusterQueue"}
    assert out.left == {"other-alpha": {"eng-alpha/preemptor"}}
    assert out.reasons["eng-alpha/preemptor"] == "WaitingForPreemptedWorkloads"


def test_prefer_first_preemption_flavor_when_second_flavor_also_requires_cq_preemption() -> None:
    s = _gpu_cohort(beta_preempts=False)
    s.admitted(
        WL("a1", "eng-alpha").priority(50).queue("other").request("gpu", "6"),
        "other-alpha",
        gpu="on-demand",
    )
    s.admitted(
        WL("a2", "eng-alpha").priority(50).queue("other").request("gpu", "5"),
        "other-alpha",
        gpu="spot",
    )
    s.admitted(
        WL("b1", "eng-beta").priority(9001).queue("other").request("gpu", "5"),
        "other-beta",
        gpu="spot",
    )
    s.pending(WL("preemptor", "eng-alpha").priority(100).queue("other").request("gpu", "5"))
    out = s.cycle()
    assert out.preempted == {"eng-alpha/a1": "InClusterQueue"}
    assert out.left == {"other-alpha": {"eng-alpha/preemptor"}}
    assert out.reasons["eng-alpha/preemptor"] == "WaitingForPreemptedWorkloads"


def test_workload_requiring_reclaimation_prioritized_over_wl_in_another_full_cq() -> None:
    s = scenario(
        [
            CQ("CQ1").cohort("other").group(("on-demand", {"gpu": "10"})).obj(),
            CQ("CQ2")
            .cohort("other")
            .preemption(reclaim="Any")
            .group(("on-demand", {"gpu": "10"}))
            .obj(),
            CQ("CQ3").cohort("other").group(("on-demand", {"gpu": "0"})).obj(),
        ],
        [lq("eng-alpha", "lq", "CQ1"), lq("eng-beta", "lq", "CQ2"), lq("eng-gamma", "lq", "CQ3")],
    )
    s.admitted(
        WL("Admitted-Workload-1", "eng-alpha").queue("lq").request("gpu", "5"),
        "CQ1",
        gpu="on-demand",
    )
    s.pending(
        WL("WL1", "eng-alpha").created(0).queue("lq").request("gpu", "10"),
        WL("WL2", "eng-beta").created(1).queue("lq").request("gpu", "10"),
    )
    s.admitted(
        WL("Admitted-Workload-2", "eng-gamma").queue("lq").priority(0).request("gpu", "5"),
        "CQ3",
        gpu="on-demand",
    )
    s.admitted(
        WL("Admitted-Workload-3", "eng-gamma").queue("lq").priority(1).request("gpu", "5"),
        "CQ3",
        gpu="on-demand",
    )
    out = s.cycle()
    assert out.preempted == {"eng-gamma/Admitted-Workload-2": "InCohortReclamation"}
    assert out.left == {"CQ2": {"eng-beta/WL2"}}
    assert out.inadmissible == {"CQ1": {"eng-alpha/WL1"}}
    assert out.reasons["eng-alpha/WL1"] == "WaitingForQuota"
    assert out.reasons["eng-beta/WL2"] == "WaitingForPreemptedWorkloads"


def _lending_queue(reclaim: str) -> Scenario:
    return scenario(
        [
            CQ("ClusterQueueA")
            .cohort("root")
            .group(("on-demand", {"gpu": "2"}))
            .preemption(reclaim=reclaim)
            .obj(),
            CQ("ClusterQueueB").cohort("root").group(("on-demand", {"gpu": "0"})).obj(),
        ],
        [lq("eng-alpha", "lq", "ClusterQueueA"), lq("eng-beta", "lq", "ClusterQueueB")],
    )


def test_capacity_not_blocked_when_lending_clusterqueue_can_reclaim_reclaim_within_cohort_any() -> (
    None
):
    s = _lending_queue("Any")
    s.admitted(
        WL("a1-admitted", "eng-alpha").queue("lq").request("gpu", "1"),
        "ClusterQueueA",
        gpu="on-demand",
    )
    s.pending(
        WL("a2-pending", "eng-alpha").queue("lq").request("gpu", "2"),
        WL("b1-pending", "eng-beta").created(1).queue("lq").request("gpu", "1"),
    )
    out = s.cycle()
    assert out.assignments == {
        "eng-alpha/a1-admitted": assignment("ClusterQueueA", gpu="on-demand"),
        "eng-beta/b1-pending": assignment("ClusterQueueB", gpu="on-demand"),
    }
    assert out.left == {}
    assert out.inadmissible == {"ClusterQueueA": {"eng-alpha/a2-pending"}}
    assert out.reasons["eng-alpha/a2-pending"] == "WaitingForQuota"


@pytest.mark.parametrize(
    ("row", "reclaim"),
    [
        (
            "capacity blocked when lending clusterqueue not guaranteed to reclaim "
            "(ReclaimWithinCohort=LowerPriority)",
            "LowerPriority",
        ),
        (
            "capacity blocked when lending clusterqueue not guaranteed to reclaim "
            "(ReclaimWithinCohort=Never)",
            "Never",
        ),
    ],
)
def test_capacity_blocked_when_lending_clusterqueue_not_guaranteed_to_reclaim(
    row: str, reclaim: str
) -> None:
    s = _lending_queue(reclaim)
    s.admitted(
        WL("a1-admitted", "eng-alpha").queue("lq").request("gpu", "1"),
        "ClusterQueueA",
        gpu="on-demand",
    )
    s.pending(
        WL("a2-pending", "eng-alpha").queue("lq").request("gpu", "2"),
        WL("b1-pending", "eng-beta").created(1).queue("lq").request("gpu", "1"),
    )
    out = s.cycle()
    assert out.assignments == {
        "eng-alpha/a1-admitted": assignment("ClusterQueueA", gpu="on-demand")
    }
    assert out.left == {"ClusterQueueB": {"eng-beta/b1-pending"}}
    assert out.inadmissible == {"ClusterQueueA": {"eng-alpha/a2-pending"}}
    assert out.reasons["eng-beta/b1-pending"] == "WaitingForQuota"


def test_in_a_hierarchical_cohort_workload_borrowing_less_is_scheduled_first() -> None:
    guaranteed_quota = CQ("q").group(("default", {"cpu": "4"})).obj().resource_groups
    s = scenario(
        [
            CQ("guaranteed").cohort("guaranteed").group(("default", {"cpu": "0"})).obj(),
            CQ("best-effort").cohort("root").group(("default", {"cpu": "0"})).obj(),
        ],
        [
            lq("eng-alpha", "lq-guaranteed", "guaranteed"),
            lq("eng-alpha", "lq-best-effort", "best-effort"),
        ],
        [Cohort("root"), Cohort("guaranteed", "root", guaranteed_quota)],
    )
    s.pending(
        WL("guaranteed", "eng-alpha").queue("lq-guaranteed").priority(0).pod_set("one", 1, cpu="4"),
        WL("best-effort", "eng-alpha")
        .queue("lq-best-effort")
        .priority(3)
        .pod_set("one", 1, cpu="4"),
    )
    out = s.cycle()
    assert out.assignments == {
        "eng-alpha/guaranteed": assignment("guaranteed", {"one": {"cpu": "default"}})
    }
    assert out.left == {"best-effort": {"eng-alpha/best-effort"}}
    assert out.reasons["eng-alpha/best-effort"] == "WaitingForQuota"


def test_dont_assign_flavor_if_there_are_no_candidates_for_preemption() -> None:
    s = scenario(
        [
            CQ("cq1")
            .cohort("cohort")
            .preemption(within="LowerPriority", reclaim="Any", borrow="LowerPriority")
            .fungibility(borrow="MayStopSearch", preempt="MayStopSearch")
            .group(("on-demand", {"cpu": ("0", "1")}), ("spot", {"cpu": ("0", "1")}))
            .obj(),
            CQ("cq2")
            .cohort("cohort")
            .group(("on-demand", {"cpu": "1"}), ("spot", {"cpu": "1"}))
            .obj(),
        ],
        [lq("eng-alpha", "lq1", "cq1"), lq("eng-alpha", "lq2", "cq2")],
    )
    s.admitted(
        WL("admitted", "eng-alpha").queue("lq2").request("cpu", "1").priority(0),
        "cq2",
        cpu="on-demand",
        at=-1,
    )
    s.pending(WL("new", "eng-alpha").queue("lq1").request("cpu", "1").priority(100))
    out = s.cycle()
    assert out.preempted == {}
    assert out.assignments == {
        "eng-alpha/new": assignment("cq1", cpu="spot"),
        "eng-alpha/admitted": assignment("cq2", cpu="on-demand"),
    }


def test_pending_admission_check_with_nofit_and_fit_flavors() -> None:
    s = scenario()
    s.pending(WL("pending-check", "eng-beta").queue("main").request("cpu", "80"))
    out = s.cycle()
    assert out.assignments == {"eng-beta/pending-check": assignment("eng-beta", cpu="spot")}


def test_admit_to_second_flavor_when_first_needs_preemption_when_can_preempt_try_next_flavor() -> (
    None
):
    s = scenario(
        [
            CQ("preempt-attempts-cq")
            .preemption(within="LowerPriority")
            .fungibility(preempt="TryNextFlavor")
            .group(("on-demand", {"cpu": "1"}), ("spot", {"cpu": "1"}))
            .obj()
        ],
        [lq("eng-alpha", "preempt-attempts-lq", "preempt-attempts-cq")],
    )
    s.admitted(
        WL("blocker", "eng-alpha").queue("preempt-attempts-lq").request("cpu", "1").priority(50),
        "preempt-attempts-cq",
        cpu="on-demand",
    )
    s.pending(
        WL("test-wl", "eng-alpha").queue("preempt-attempts-lq").request("cpu", "1").priority(100)
    )
    out = s.cycle()
    assert out.preempted == {}
    assert out.assignments == {
        "eng-alpha/test-wl": assignment("preempt-attempts-cq", cpu="spot"),
        "eng-alpha/blocker": assignment("preempt-attempts-cq", cpu="on-demand"),
    }


def test_admit_workload_with_zero_quantity_request_for_resource_not_in_cluster_queue() -> None:
    s = scenario()
    s.pending(
        WL("zero-resource-wl", "sales")
        .queue("main")
        .request("cpu", "1")
        .request("example.com/gpu", "0")
    )
    out = s.cycle()
    assert out.assignments == {"sales/zero-resource-wl": assignment("sales", cpu="default")}


def test_preempt_when_workload_requests_zero_of_a_resource_not_defined_in_cluster_queue() -> None:
    s = scenario(
        [
            CQ("preempt-zero-gpu-cq")
            .preemption(within="LowerPriority")
            .group(("default", {"cpu": "4"}))
            .obj()
        ],
        [lq("sales", "preempt-zero-gpu-lq", "preempt-zero-gpu-cq")],
    )
    s.pending(
        WL("preemptor", "sales")
        .queue("preempt-zero-gpu-lq")
        .request("cpu", "2")
        .request("example.com/gpu", "0")
    )
    s.admitted(
        WL("low-priority", "sales").priority(-1).queue("preempt-zero-gpu-lq").request("cpu", "4"),
        "preempt-zero-gpu-cq",
        cpu="default",
    )
    out = s.cycle()
    assert out.preempted == {"sales/low-priority": "InClusterQueue"}
    assert out.left == {"preempt-zero-gpu-cq": {"sales/preemptor"}}
    assert out.reasons["sales/preemptor"] == "WaitingForPreemptedWorkloads"


def _preference_cohort(name: str, preference: str) -> Scenario:
    return scenario(
        [
            CQ(f"{name}-cq")
            .cohort(f"{name}-cohort")
            .preemption(within="LowerPriority")
            .fungibility(borrow="TryNextFlavor", preempt="TryNextFlavor", pref=preference)
            .group(("on-demand", {"cpu": ("5", "0")}), ("spot", {"cpu": ("0", "5")}))
            .obj(),
            CQ(f"{name}-lender")
            .cohort(f"{name}-cohort")
            .group(("on-demand", {"cpu": "0"}), ("spot", {"cpu": "5"}))
            .obj(),
        ],
        [lq("default", f"{name}-queue", f"{name}-cq")],
    )


def test_preemption_over_borrowing_preference_preempt_in_first_flavor_instead_of_borrowing_in_second() -> (
    None
):
    s = _preference_cohort("pob", "PreemptionOverBorrowing")
    s.admitted(
        WL("low-pob", "default").queue("pob-queue").priority(-1).request("cpu", "5"),
        "pob-cq",
        cpu="on-demand",
    )
    s.pending(WL("high-pob", "default").queue("pob-queue").priority(0).request("cpu", "5"))
    out = s.cycle()
    assert out.preempted == {"default/low-pob": "InClusterQueue"}
    assert out.left == {"pob-cq": {"default/high-pob"}}
    assert out.reasons["default/high-pob"] == "WaitingForPreemptedWorkloads"


def test_preemption_over_borrowing_preference_select_fitting_second_flavor_over_first_flavor_with_no_preemption_candidates() -> (
    None
):
    root_quota = (
        CQ("q").group(("on-demand", {"cpu": "0"}), ("spot", {"cpu": "5"})).obj().resource_groups
    )
    s = scenario(
        [
            CQ("nopc-cq")
            .cohort("nopc-mid")
            .preemption(within="LowerPriority")
            .fungibility(
                borrow="TryNextFlavor", preempt="TryNextFlavor", pref="PreemptionOverBorrowing"
            )
            .group(("on-demand", {"cpu": ("5", "0")}), ("spot", {"cpu": "0"}))
            .obj(),
            CQ("nopc-sibling")
            .cohort("nopc-mid")
            .group(("on-demand", {"cpu": "5"}), ("spot", {"cpu": "0"}))
            .obj(),
        ],
        [lq("default", "nopc-queue", "nopc-cq")],
        [Cohort("nopc-root", None, root_quota), Cohort("nopc-mid", "nopc-root")],
    )
    s.admitted(
        WL("admitted-nopc", "default").queue("nopc-queue").priority(0).request("cpu", "5"),
        "nopc-cq",
        cpu="on-demand",
    )
    s.pending(WL("pending-nopc", "default").queue("nopc-queue").priority(0).request("cpu", "5"))
    out = s.cycle()
    assert out.preempted == {}
    assert out.assignments == {
        "default/admitted-nopc": assignment("nopc-cq", cpu="on-demand"),
        "default/pending-nopc": assignment("nopc-cq", cpu="spot"),
    }


def test_borrowing_over_preemption_preference_borrow_in_second_flavor_instead_of_preempting_in_first() -> (
    None
):
    s = _preference_cohort("bop", "BorrowingOverPreemption")
    s.admitted(
        WL("low-bop", "default").queue("bop-queue").priority(-1).request("cpu", "5"),
        "bop-cq",
        cpu="on-demand",
    )
    s.pending(WL("high-bop", "default").queue("bop-queue").priority(0).request("cpu", "5"))
    out = s.cycle()
    assert out.preempted == {}
    assert out.assignments == {
        "default/low-bop": assignment("bop-cq", cpu="on-demand"),
        "default/high-bop": assignment("bop-cq", cpu="spot"),
    }


GATED = pytest.mark.xfail(
    strict=True,
    reason="preemption gates: Tower does not act on spec.preemptionGates, so a Workload that "
    f"sets one waits whole (parked, with a reason naming the field); {UNSUPPORTED}",
)


def _gated(s: Scenario) -> WL:
    return (
        WL("preemptor", "eng-beta")
        .queue("main")
        .request("example.com/gpu", "20")
        .unacted("spec.preemptionGates")
    )


@GATED
def test_block_preemptions_and_signal_blocked_on_preemption_gates_when_a_preemption_gate_is_present() -> (
    None
):
    s = scenario()
    s.pending(_gated(s))
    s.admitted(
        WL("low-priority", "eng-beta").priority(-1).request("example.com/gpu", "20"),
        "eng-beta",
        **{"example.com/gpu": "model-a"},
    )
    out = s.cycle()
    assert out.preempted == {}
    assert out.left == {"eng-beta": {"eng-beta/preemptor"}}


@GATED
def test_do_not_signal_blocked_on_preemption_gates_when_a_preemption_gate_is_present_but_the_workload_fits_without_preemption() -> (
    None
):
    s = scenario()
    s.pending(_gated(s))
    out = s.cycle()
    assert out.assignments == {
        "eng-beta/preemptor": assignment("eng-beta", **{"example.com/gpu": "model-a"})
    }


@GATED
def test_do_not_signal_blocked_on_preemption_gates_when_a_preemption_gate_is_present_but_the_workload_had_nothing_to_preempt() -> (
    None
):
    s = scenario()
    s.pending(_gated(s))
    s.admitted(
        WL("high-priority", "eng-beta").priority(1).request("example.com/gpu", "20"),
        "eng-beta",
        **{"example.com/gpu": "model-a"},
    )
    out = s.cycle()
    assert out.left == {"eng-beta": {"eng-beta/preemptor"}}
    assert out.reasons["eng-beta/preemptor"] == "WaitingForQuota"


def _overflow(cpu_quota: str) -> Scenario:
    return scenario(
        [CQ("overflow-cq").group(("default", {"cpu": cpu_quota})).obj()],
        [lq("default", "overflow-queue", "overflow-cq")],
    )


def test_prevent_integer_overflow_when_sum_of_requests_over_podsets_exceeds_max_int64() -> None:
    s = _overflow("10000")
    s.pending(
        WL("vuln-wl", "default")
        .queue("overflow-queue")
        .pod_set("ps1", 1, cpu="1000000m")
        .pod_set("ps2", 1, cpu="9223372036854775000m")
    )
    out = s.cycle()
    assert out.assignments == {}
    assert out.inadmissible == {"overflow-cq": {"default/vuln-wl"}}
    assert out.reasons["default/vuln-wl"] == "ExceedsMaxQuota"


def test_prevent_integer_overflow_in_resource_value_conversion_to_milli_value() -> None:
    s = _overflow("10")
    s.pending(
        WL("vuln-wl", "default").queue("overflow-queue").pod_set("ps1", 1, cpu="9223372036854776")
    )
    out = s.cycle()
    assert out.assignments == {}
    assert out.inadmissible == {"overflow-cq": {"default/vuln-wl"}}
    assert out.reasons["default/vuln-wl"] == "ExceedsMaxQuota"


def test_workload_slice_fits_in_single_cluster_queue() -> None:
    s = scenario()
    s.admitted(WL("foo-1", "sales").queue("main").pod_set("one", 10, cpu="1"), "sales",
               {"one": {"cpu": "default"}})  # fmt: skip
    grown = WL("foo-2", "sales").queue("main").pod_set("one", 15, cpu="1").obj()
    s.pending(replace(grown, replacement_for="sales/foo-1"))
    out = s.cycle()
    # Kueue's cache still lists foo-1 until its Finished status comes back; Tower's takes the
    # old slice out in the same step, and keeps which slice replaced it until then.
    assert out.assignments == {"sales/foo-2": assignment("sales", {"one": {"cpu": "default"}})}
    assert out.counts["sales/foo-2"] == {"one": 15}
    assert s.state.scheduler.slices.replaced_slice("sales/foo-1") == "sales/foo-2"
    assert out.left == {}


# Rows of TestSchedule whose input the core's models cannot express, and why.
NOT_PORTED = {
    "container does not satisfy limitRange constraints": "LimitRange validation is the "
    "webhook's and kube-apiserver's, not the scheduling core's",
    "container resource requests exceed limits": "requests above limits are refused by "
    "kube-apiserver before a Job exists; the core sees only requests",
}
