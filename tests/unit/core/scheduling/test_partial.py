"""Partial admission's search for the largest counts that fit, and what an admission of them holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from extender.core.api import parse
from extender.core.api.models import Namespace, PodSet, Workload
from extender.core.api.quantity import to_amount
from extender.core.jobframework.adapter import merge
from extender.core.jobframework.jobs import workload_for
from extender.core.scheduling.cycle import ClusterState
from extender.core.scheduling.flavors import FIT, Assignment
from extender.core.scheduling.partial import counts_at, largest_fit, may_shrink
from extender.kube.api import objects as o
from tests import yamlc
from tests.builders import CQ, WL, run_until_quiet, state_with


def pod_sets(*shape: tuple[int, int | None]) -> tuple[PodSet, ...]:
    return tuple(
        PodSet(f"p{i}", count, {"cpu": 1000}, min_count=least)
        for i, (count, least) in enumerate(shape)
    )


@pytest.mark.parametrize(
    ("shape", "room", "want"),
    [
        # Kueue's rows: 50 pods of 2 cpu, at least 20, in 50 cpu -> 25 pods.
        pytest.param([(50, 20)], 25, (25,), id="one-variable-pod-set"),
        # A fixed pod set keeps its count; the variable ones give up in proportion.
        pytest.param([(20, None), (30, 10), (15, 5)], 50, (20, 20, 10), id="proportional"),
        pytest.param([(10, 1)], 9, (9,), id="one-pod-less"),
        pytest.param([(10, 4)], 4, (4,), id="only-the-minimum"),
        pytest.param([(10, 4)], 3, None, id="not-even-the-minimum"),
        pytest.param([(10, 4), (6, None)], 9, None, id="the-fixed-pod-set-leaves-too-little"),
        pytest.param([(10, None)], 5, None, id="no-min-count"),
        pytest.param([(10, 10)], 5, None, id="min-count-equal-to-count"),
        pytest.param([(3, 0)], 1, (1,), id="never-below-one-pod"),
    ],
)
def test_the_largest_counts_that_fit(shape, room, want):
    asked: list[tuple[int, ...]] = []

    def fits(counts: tuple[int, ...]) -> str | None:
        asked.append(counts)
        pods = sum(counts)
        return f"{pods} pods" if 0 < pods <= room else None

    found = largest_fit(pod_sets(*shape), fits)
    if want is None:
        assert found is None
    else:
        assert found == (want, f"{sum(want)} pods")
    full = tuple(count for count, _ in shape)
    assert full not in asked  # the caller judged the full counts already
    steps = sum(count - least for count, least in shape if least is not None)
    assert len(asked) <= max(steps, 1).bit_length()  # a binary search, not a walk


@pytest.mark.parametrize(
    ("full", "deltas", "step", "steps", "want"),
    [
        ((30, 15), (20, 10), 0, 30, (30, 15)),
        ((30, 15), (20, 10), 14, 30, (21, 11)),  # 280/30 and 140/30, rounded down
        ((30, 15), (20, 10), 15, 30, (20, 10)),
        ((30, 15), (20, 10), 30, 30, (10, 5)),
        ((20, 30), (0, 20), 7, 20, (20, 23)),  # a fixed pod set never shrinks
    ],
)
def test_each_step_shrinks_every_variable_pod_set_in_proportion(full, deltas, step, steps, want):
    assert counts_at(full, deltas, step, steps) == want


@pytest.mark.parametrize(
    ("shape", "want"),
    [([(5, None)], False), ([(5, 5)], False), ([(5, 4)], True), ([(5, None), (2, 1)], True)],
)
def test_a_workload_may_shrink_when_some_min_count_is_below_its_count(shape, want):
    workload = Workload("ns", "wl", "uid", "q", pod_sets(*shape))
    assert may_shrink(workload) is want


def test_an_admission_of_fewer_pods_holds_their_requests_only():
    workload = Workload("ns", "wl", "uid", "q", pod_sets((20, None), (30, 10)))
    flavors = ({"cpu": "default"}, {"cpu": "default"})
    admission = Assignment(FIT, pod_set_flavors=flavors, counts=(20, 12)).admission("cq", workload)
    assert [(p.name, p.count, dict(p.resource_usage)) for p in admission.pod_set_assignments] == [
        ("p0", 20, {"cpu": 20_000}),
        ("p1", 12, {"cpu": 12_000}),
    ]
    whole = Assignment(FIT, pod_set_flavors=flavors).admission("cq", workload)
    assert [p.count for p in whole.pod_set_assignments] == [20, 30]


def counts_of(state: ClusterState, key: str) -> list[int]:
    return [p.count for p in state.admitted_workload(key).admission.pod_set_assignments]


@pytest.mark.parametrize("reuse", [True, False], ids=["class-reuse", "from-scratch"])
def test_a_class_admitted_whole_once_is_shrunk_when_only_part_fits(reuse):
    """Two Jobs of one shape: the first takes all its 50 pods, the second only the 10 left.
    The admission kept for their equivalence class must not give the second 50."""
    state = state_with(CQ("cq").group(("default", {"cpu": "60"})).obj())
    state.scheduler.reuse_by_class = reuse
    first = WL("first").created(0).pod_set("main", 50, min_count=5, cpu="1").obj()
    second = WL("second").created(1).pod_set("main", 50, min_count=5, cpu="1").obj()
    state.add_workload(first)
    state.add_workload(second)
    run_until_quiet(state)
    assert counts_of(state, first.key) == [50]
    assert counts_of(state, second.key) == [10]


def test_without_the_feature_gate_a_workload_waits_for_all_its_pods():
    state = state_with(CQ("cq").group(("default", {"cpu": "10"})).obj())
    state.scheduler.partial_admission = False
    wl = WL("w").pod_set("main", 20, min_count=5, cpu="1").obj()
    state.add_workload(wl)
    assert run_until_quiet(state) == []
    assert state.pending_status(wl.key).reason == "ExceedsMaxQuota"


def test_a_workload_that_may_shrink_is_not_judged_by_one_of_its_shape_that_may_not():
    state = state_with(CQ("cq").group(("default", {"cpu": "10"})).obj())
    whole = WL("whole").created(0).pod_set("main", 20, cpu="1").obj()
    shrinks = WL("shrinks").created(1).pod_set("main", 20, min_count=5, cpu="1").obj()
    state.add_workload(whole)
    state.add_workload(shrinks)
    run_until_quiet(state)
    assert counts_of(state, shrinks.key) == [10]
    assert state.pending_status(whole.key).reason == "ExceedsMaxQuota"


EXAMPLES = Path(__file__).resolve().parents[3] / "data" / "kueue-v0.19.2" / "examples"


def test_kueues_documentation_example_runs_with_9_of_its_20_pods():
    """Kueue's "Partial admission" example, applied unchanged: "When queued in a ClusterQueue
    with only 9 CPUs available, it will be admitted with parallelism=9. Note that the number
    of completions doesn't change." And a stop gives the Job its 20 back."""
    flavor, cq, lq = yamlc.safe_load_all((EXAMPLES / "single-clusterqueue-setup.yaml").read_text())
    job = yamlc.safe_load((EXAMPLES / "sample-job-partial-admission.yaml").read_text())
    job["metadata"]["uid"] = "uid-1"
    job["spec"]["suspend"] = True  # as the webhook queues it
    state = ClusterState()
    flavors = {"default-flavor": parse.resource_flavor(flavor)}
    state.configure(
        flavors=flavors.values(),
        cluster_queues=[parse.cluster_queue(cq)],
        local_queues=[parse.local_queue(lq)],
        namespaces=[Namespace("default")],
    )
    workload = workload_for(job, uid="uid-1", creation_time=0.0)
    state.add_workload(workload)
    [admitted] = run_until_quiet(state)
    [main] = admitted.admission.pod_set_assignments
    assert main.count == 9
    assert dict(main.resource_usage) == {
        "cpu": to_amount("cpu", "9"),
        "memory": to_amount("memory", "1800Mi"),
    }
    started = merge(job, o.start_patch(job, admitted.admission, flavors, "user-queue"))
    assert started["spec"]["suspend"] is False
    assert started["spec"]["parallelism"] == 9
    assert started["spec"]["completions"] == 20
    stopped = merge(started, o.restore_patch(started, o.workload_manifest(job, workload)))
    assert (stopped["spec"]["parallelism"], stopped["spec"]["completions"]) == (20, 20)
