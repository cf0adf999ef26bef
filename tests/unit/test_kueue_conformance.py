"""Kueue's own scheduler test cases, ported case by case (the start of issue #16's suite).

Each test names the Kueue v0.19.2 file and case it ports; the inputs are written with Tower's
builders and the outcome checked is Kueue's: who is admitted, and who stays pending.
"""

from __future__ import annotations

from extender.core.models import Cohort, LocalQueue
from tests.builders import CQ, WL, run_until_quiet, state_with


def test_schedule_in_a_hierarchical_cohort_workload_borrowing_less_is_scheduled_first() -> None:
    """pkg/scheduler/scheduler_test.go TestSchedule: "in a hierarchical cohort, workload
    borrowing less is scheduled first". Both must borrow, the lower-priority one only from the
    small cohort it is in, the higher-priority one from the root; Kueue orders by the height
    of the smallest subtree that fits (1 against 2) before priority."""
    guaranteed_quota = CQ("q").group(("default", {"cpu": "4"})).obj().resource_groups
    state = state_with(
        CQ("guaranteed").cohort("guaranteed").group(("default", {"cpu": "0"})).obj(),
        CQ("best-effort").cohort("root").group(("default", {"cpu": "0"})).obj(),
        cohorts=(Cohort("root"), Cohort("guaranteed", "root", guaranteed_quota)),
    )
    state.configure(
        flavors=list(state.flavors.values()),
        cluster_queues=list(state.cluster_queues.values()),
        cohorts=list(state.cohorts.values()),
        local_queues=[
            LocalQueue("eng-alpha", "lq-guaranteed", "guaranteed"),
            LocalQueue("eng-alpha", "lq-best-effort", "best-effort"),
        ],
    )
    state.add_workload(
        WL("guaranteed", "eng-alpha")
        .queue("lq-guaranteed")
        .priority(0)
        .pod_set("one", cpu="4")
        .obj()
    )
    state.add_workload(
        WL("best-effort", "eng-alpha")
        .queue("lq-best-effort")
        .priority(3)
        .pod_set("one", cpu="4")
        .obj()
    )
    first = state.schedule(0.0)
    assert [a.workload.key for a in first.admitted] == ["eng-alpha/guaranteed"]
    run_until_quiet(state)
    assert set(state.admitted) == {"eng-alpha/guaranteed"}
