"""An elastic job's scale-up slice in the cycle: it needs only what its old slice does not hold,
keeps its old slice's flavor, waits with a reason that says so, may preempt others (never its
old slice), and takes the old slice's quota in the same step it is admitted (undone with it)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from extender.core.api.models import Workload
from extender.core.scheduling.cycle import ClusterState
from tests.builders import CQ, WL, admit, state_with

MILLI = 1


def job_slice(
    name: str, pods: int, replaces: str = "", uid: str = "", priority: int = 0
) -> Workload:
    built = WL(name).pod_set("main", pods, cpu="100m").created(1.0 if not replaces else 2.0)
    built = built.priority(priority)
    if uid:
        built = built.uid(uid)
    return replace(built.obj(), replacement_for=replaces)


def held(state: ClusterState, cq: str = "cq") -> int:
    return sum(v for (_, r), v in state.quota_usage(cq).items() if r == "cpu")


def one_cpu_queue(*flavors: str, within: str = "Never") -> ClusterState:
    cq = CQ("cq").preemption(within=within)
    cq.group(*((f, {"cpu": "1"}) for f in flavors or ("default",)))
    return state_with(cq.obj(), flavors=flavors or ("default",))


def test_a_scale_up_slice_needs_only_the_difference_and_takes_the_old_slices_quota():
    state = one_cpu_queue()
    admit(state, job_slice("job-a-1", 3))
    admit(state, job_slice("other", 5))  # 800m of 1 cpu held: 200m free
    assert held(state) == 800

    grown = job_slice("job-a-2", 5, replaces="default/job-a-1")  # 500m: 200m more
    state.add_workload(grown)
    result = state.schedule(10.0)

    assert [a.workload.key for a in result.admitted] == ["default/job-a-2"]
    assert [p.count for p in result.admitted[0].admission.pod_set_assignments] == [5]
    assert not state.is_admitted("default/job-a-1")  # its quota is the new slice's now
    assert held(state) == 1000  # 500 (new) + 500 (other): the old 300 is not counted twice
    assert state.scheduler.slices.replaced_slice("default/job-a-1") == "default/job-a-2"


def test_a_scale_up_slice_on_a_busy_queue_waits_and_the_old_slice_keeps_its_quota():
    state = one_cpu_queue()
    admit(state, job_slice("job-a-1", 3))
    admit(state, job_slice("other", 6))  # 900m held: 100m free
    state.add_workload(job_slice("job-a-2", 6, replaces="default/job-a-1"))  # 300m more

    result = state.schedule(10.0)

    assert result.admitted == ()
    assert state.is_admitted("default/job-a-1")
    assert held(state) == 900
    status = state.pending_status("default/job-a-2")
    assert status.reason == "WaitingForQuota"
    message = str(status.message)
    # 900m held, the old slice's 300m counted as its own: 400m free for its 600m.
    assert message.startswith("needs 600m cpu in flavor default; 400m of 1 free in cq ")
    assert "(counting the quota of default/job-a-1, the slice it replaces" in message

    state.finish("default/other")  # room: it is admitted, and replaces the old slice
    result = state.schedule(20.0)
    assert [a.workload.key for a in result.admitted] == ["default/job-a-2"]
    assert held(state) == 600


def test_a_scale_up_slice_keeps_the_flavor_of_its_old_slice():
    state = one_cpu_queue("small", "big")
    admit(state, job_slice("fill", 8))  # 800m of small
    admit(state, job_slice("job-a-1", 2))  # the last 200m of small
    state.add_workload(job_slice("job-a-2", 4, replaces="default/job-a-1"))

    result = state.schedule(10.0)

    assert result.admitted == ()  # big has room, but the old slice runs in small
    assert "in flavor small" in str(state.pending_status("default/job-a-2").message)


def test_an_undone_admission_gives_the_old_slice_its_quota_back():
    state = one_cpu_queue()
    admit(state, job_slice("job-a-1", 3))
    state.add_workload(job_slice("job-a-2", 5, replaces="default/job-a-1"))
    state.schedule(10.0)
    assert not state.is_admitted("default/job-a-1")

    state.forget("default/job-a-2")  # its write was refused

    assert state.is_admitted("default/job-a-1")
    assert held(state) == 300
    assert state.scheduler.slices.replaced_slice("default/job-a-1") is None


def test_once_the_old_slice_is_finished_the_new_ones_release_is_its_own():
    state = one_cpu_queue()
    admit(state, job_slice("job-a-1", 3))
    state.add_workload(job_slice("job-a-2", 5, replaces="default/job-a-1"))
    state.schedule(10.0)
    state.scheduler.slices.settled("default/job-a-1")

    state.finish("default/job-a-2")

    assert not state.is_admitted("default/job-a-1")
    assert held(state) == 0


def test_a_slice_whose_old_slice_holds_nothing_is_an_ordinary_workload():
    state = one_cpu_queue()
    state.add_workload(job_slice("job-a-2", 5, replaces="default/gone"))
    result = state.schedule(10.0)
    assert [a.workload.key for a in result.admitted] == ["default/job-a-2"]
    assert held(state) == 500


def test_with_the_gate_off_the_annotation_is_ignored():
    state = one_cpu_queue()
    state.scheduler.workload_slices = False
    admit(state, job_slice("job-a-1", 3))
    state.add_workload(job_slice("job-a-2", 8, replaces="default/job-a-1"))
    result = state.schedule(10.0)
    assert result.admitted == ()  # 800m does not fit beside 300m: no credit for the old
    assert state.is_admitted("default/job-a-1")


def evicted(result) -> list[str]:
    return sorted(e.workload.name for e in result.evicted)


# Preemption by a scale-up slice (Kueue lets it preempt as any workload; the old slice is
# never a victim). Each row: the old slice's priority and pods, the other workload's priority
# and pods, the new slice's priority and pods; who is evicted, and whether the new slice is
# admitted once its victims are gone.
PREEMPTION_ROWS = [
    # It needs 500m more than its 300m, 100m is free: the lower-priority filler goes.
    ("preempts a lower priority workload", (5, 3), (1, 6), (5, 8), ["other"], True),
    # Only the old slice is lower than it: the old slice is no victim, so nothing is evicted.
    ("never its old slice", (1, 3), (20, 2), (10, 9), [], False),
    # The old slice has the lowest priority of all, and the filler is still the one chosen.
    ("the filler, not the lower old slice", (1, 3), (5, 6), (10, 8), ["other"], True),
    # The filler's priority is its own: no preemption, it waits.
    ("no victim of equal priority", (5, 3), (5, 6), (5, 8), [], False),
]


@pytest.mark.parametrize(
    ("old", "other", "new", "victims", "admitted"),
    [row[1:] for row in PREEMPTION_ROWS],
    ids=[row[0] for row in PREEMPTION_ROWS],
)
def test_a_scale_up_slice_may_preempt_but_never_its_old_slice(old, other, new, victims, admitted):
    state = one_cpu_queue(within="LowerPriority")
    admit(state, job_slice("job-a-1", old[1], priority=old[0]))
    admit(state, job_slice("other", other[1], priority=other[0]))
    grown = job_slice("job-a-2", new[1], replaces="default/job-a-1", priority=new[0])
    state.add_workload(grown)

    result = state.schedule(10.0)

    assert evicted(result) == victims
    assert result.admitted == ()
    assert state.is_admitted("default/job-a-1")  # the old slice keeps its quota meanwhile
    for name in victims:
        state.release(f"default/{name}")
    result = state.schedule(20.0)
    assert [a.workload.key for a in result.admitted] == (["default/job-a-2"] if admitted else [])
    assert state.is_admitted("default/job-a-1") is not admitted
    if admitted:
        assert held(state) == 100 * new[1]


def test_a_preempting_slice_says_whom_it_waits_for():
    state = one_cpu_queue(within="LowerPriority")
    admit(state, job_slice("job-a-1", 3, priority=5))
    admit(state, job_slice("other", 6, priority=1))
    state.add_workload(job_slice("job-a-2", 8, replaces="default/job-a-1", priority=5))

    state.schedule(10.0)

    status = state.pending_status("default/job-a-2")
    assert status.reason == "WaitingForPreemptedWorkloads"
    assert str(status.message) == (
        "needs 800m cpu in flavor default; 400m of 1 free in cq (counting the quota of "
        "default/job-a-1, the slice it replaces: a scaled-up job keeps that quota until its "
        "new slice is admitted); waiting for preempted workloads to stop: default/other"
    )
