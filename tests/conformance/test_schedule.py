"""Kueue v0.19.2 pkg/scheduler/scheduler_test.go TestSchedule, ported case by case.

Each test is one row of Kueue's table, named after it, with its inputs written in Tower's
builders and its expectations checked as Kueue checks them after one scheduling cycle: every
admission in the cache with its flavors (wantAssignments), what was preempted, what is left
in the queues (wantLeft) and what was set aside (wantInadmissibleLeft), and the
QuotaReserved=False reason of what waits.
"""

from __future__ import annotations

from collections.abc import Iterable

from extender.core.labels import LabelSelector, Requirement, Taint
from extender.core.models import ClusterQueue, Cohort, LocalQueue
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
) -> Scenario:
    """TestSchedule's shared flavors, ClusterQueues and LocalQueues, plus the case's own."""
    extra = list(cluster_queues)
    names = {cq.name for cq in extra}
    return Scenario(
        flavors=FLAVORS,
        cluster_queues=[cq for cq in base_cluster_queues() if cq.name not in names] + extra,
        local_queues=[*BASE_LOCAL_QUEUES, *local_queues],
        cohorts=cohorts,
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
