"""Kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner_test.go TestAssignFlavors, ported
row by row.

Each row gives pod sets, a ClusterQueue (and maybe a second one in its cohort) with usage,
and what Kueue's preemption oracle answers per flavor-resource; the expectation is Kueue's
representative mode (Fit, Preempt, NoFit), the flavor and mode of each pod set's resources,
the borrowing level and, where Kueue states it, the NoFit reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pytest

from extender.core.api.labels import NodeSelectorTerm, Requirement, Taint, Toleration
from extender.core.api.models import (
    ClusterQueue,
    Cohort,
    FlavorResource,
    PodSet,
    ResourceFlavor,
    Workload,
)
from extender.core.api.quantity import to_amount
from extender.core.jobframework import reclaimable
from extender.core.scheduling.flavors import Assignment, Mode, preferred, search_flavors
from extender.core.scheduling.quota import QuotaTree, add_usage
from tests.builders import CQ, WL
from tests.conformance.harness import Outcome, Scenario, lq

FILE = "pkg/scheduler/flavorassigner/flavorassigner_test.go TestAssignFlavors"
UNSUPPORTED = "docs/kueue.md#conformance"
MI = 1024 * 1024
SPOT = Taint("instance", "spot", "NoSchedule")
TOLERATE_SPOT = Toleration("instance", "Equal", "spot", "NoSchedule")

FLAVORS = {
    f.name: f
    for f in (
        ResourceFlavor("default"),
        ResourceFlavor("one", {"type": "one"}),
        ResourceFlavor("two", {"type": "two"}),
        ResourceFlavor("b_one", {"b_type": "one"}),
        ResourceFlavor("b_two", {"b_type": "two"}),
        ResourceFlavor("tainted", node_taints=(SPOT,)),
        ResourceFlavor("taint_and_toleration", node_taints=(SPOT,), tolerations=(TOLERATE_SPOT,)),
        ResourceFlavor("label-x-a", {"x": "a"}),
        ResourceFlavor("label-xy-b", {"x": "b", "y": "k"}),
    )
}

# Kueue's preemption possibilities, as Tower's oracle answers them (None: no candidates).
PREEMPT, RECLAIM, NO_CANDIDATES = Mode.PREEMPT, Mode.RECLAIM, None


def pods(
    name: str = "main",
    count: int = 1,
    *,
    selector: Mapping[str, str] | None = None,
    affinity: tuple[tuple[tuple[str, str, tuple[str, ...]], ...], ...] = (),
    tolerations: tuple[Toleration, ...] = (),
    exact: Mapping[str, str] | None = None,
    **requests: str,
) -> PodSet:
    """A pod set: requests per pod (cpu="1", memory="1Mi", gpu="1" for example.com/gpu; `exact`
    for resource names taken as they are)."""
    per_pod = {}
    for key, value in requests.items():
        resource = "example.com/gpu" if key == "gpu" else key
        per_pod[resource] = to_amount(resource, value)
    for resource, value in (exact or {}).items():
        per_pod[resource] = to_amount(resource, value)
    terms = tuple(
        NodeSelectorTerm(tuple(Requirement(k, op, v) for k, op, v in t)) for t in affinity
    )
    return PodSet(name, count, per_pod, dict(selector or {}), terms, tolerations)


def assign(
    cq: ClusterQueue,
    *pod_sets: PodSet,
    usage: Mapping[FlavorResource, int] | None = None,
    secondary: ClusterQueue | None = None,
    secondary_usage: Mapping[FlavorResource, int] | None = None,
    oracle: Mapping[FlavorResource, tuple[Mode | None, int]] | None = None,
    fair_sharing: bool = False,
) -> Assignment:
    """Kueue's flavor assigner for one workload in TestAssignFlavors' setting: the
    ClusterQueue (and a second one in its cohort) with usage, the shared flavors."""
    cqs = [cq] + ([secondary] if secondary is not None else [])
    used = {cq.name: usage or {}}
    if secondary is not None:
        used[secondary.name] = secondary_usage or {}
    cohorts = [Cohort(cq.cohort)] if cq.cohort else []
    return run_assigner(cqs, cohorts, FLAVORS, pod_sets, used, oracle, fair_sharing)


def run_assigner(
    cluster_queues: list[ClusterQueue],
    cohorts: list[Cohort],
    flavors: Mapping[str, ResourceFlavor],
    pod_sets: tuple[PodSet, ...],
    usage: Mapping[str, Mapping[FlavorResource, int]],
    oracle: Mapping[FlavorResource, tuple[Mode | None, int]] | None = None,
    fair_sharing: bool = False,
) -> Assignment:
    """The flavor search for the first ClusterQueue, with Kueue's test oracle: Preempt at
    borrowing level 0 unless the row says otherwise for a flavor-resource."""
    tree = QuotaTree.build(cluster_queues, cohorts)
    for name, used in usage.items():
        if used:
            add_usage(tree.cluster_queues[name], used)
    answers = dict(oracle or {})

    def simulate(fr: FlavorResource, amount: int) -> tuple[Mode, int] | None:
        mode, level = answers.get(fr, (PREEMPT, 0))
        return None if mode is None else (mode, level)

    cq = cluster_queues[0]
    workload = Workload("ns", "wl", "uid", "lq", pod_sets)
    return search_flavors(
        workload, cq, flavors, tree.cluster_queues[cq.name], simulate, fair_sharing=fair_sharing
    )


def rep_mode(a: Assignment) -> str:
    """Kueue's representative mode: NoFit, Preempt (with or without candidates) or Fit."""
    if a.mode == Mode.NO_FIT:
        return "NoFit"
    return "Fit" if a.mode == Mode.FIT else "Preempt"


def flavors(a: Assignment, *names: str) -> dict[str, dict[str, str]]:
    """Per pod set, each resource's "flavor/Mode" as Kueue's wantAssignment lists them."""
    return {
        name: {
            r: f"{f}/{'Preempt' if (f, r) in a.needs_preemption else 'Fit'}"
            for r, f in chosen.items()
        }
        for name, chosen in zip(names, a.pod_set_flavors, strict=True)
    }


def test_single_flavor_fits() -> None:
    cq = CQ("test-clusterqueue").group(("default", {"cpu": "1", "memory": "2Mi"})).obj()
    a = assign(cq, pods(cpu="1", memory="1Mi"))
    assert rep_mode(a) == "Fit"
    assert flavors(a, "main") == {"main": {"cpu": "default/Fit", "memory": "default/Fit"}}


def test_single_flavor_fits_tainted_flavor() -> None:
    cq = CQ("test-clusterqueue").group(("tainted", {"cpu": "4"})).obj()
    a = assign(cq, pods(cpu="1", tolerations=(TOLERATE_SPOT,)))
    assert flavors(a, "main") == {"main": {"cpu": "tainted/Fit"}}


def test_single_flavor_fits_tainted_flavor_with_toleration() -> None:
    cq = CQ("test-clusterqueue").group(("taint_and_toleration", {"cpu": "4"})).obj()
    a = assign(cq, pods(cpu="1"))
    assert flavors(a, "main") == {"main": {"cpu": "taint_and_toleration/Fit"}}


def test_single_flavor_used_resources_doesnt_fit() -> None:
    cq = CQ("test-clusterqueue").group(("default", {"cpu": "4"})).obj()
    a = assign(cq, pods(cpu="2"), usage={("default", "cpu"): 3_000})
    assert rep_mode(a) == "Preempt"
    assert flavors(a, "main") == {"main": {"cpu": "default/Preempt"}}


def test_multiple_resource_groups_fits() -> None:
    cq = (
        CQ("test-clusterqueue")
        .group(("one", {"cpu": "2"}), ("two", {"cpu": "4"}))
        .group(("b_one", {"memory": "1Gi"}), ("b_two", {"memory": "5Gi"}))
        .obj()
    )
    a = assign(cq, pods(cpu="3", memory="10Mi"))
    assert rep_mode(a) == "Fit"
    assert flavors(a, "main") == {"main": {"cpu": "two/Fit", "memory": "b_one/Fit"}}


def test_multiple_resource_groups_one_could_fit_with_preemption_other_doesnt_fit() -> None:
    cq = (
        CQ("test-clusterqueue")
        .group(("one", {"cpu": "3"}))
        .group(("b_one", {"memory": "1Mi"}))
        .obj()
    )
    a = assign(cq, pods(cpu="3", memory="10Mi"), usage={("one", "cpu"): 1_000})
    assert rep_mode(a) == "NoFit"
    assert a.reason == "ExceedsMaxQuota"


def test_multiple_resource_groups_with_multiple_resources_fits() -> None:
    cq = (
        CQ("test-clusterqueue")
        .group(("one", {"cpu": "2", "memory": "1Gi"}), ("two", {"cpu": "4", "memory": "15Mi"}))
        .group(("b_one", {"example.com/gpu": "4"}), ("b_two", {"example.com/gpu": "2"}))
        .obj()
    )
    a = assign(cq, pods(cpu="3", memory="10Mi", gpu="3"))
    assert rep_mode(a) == "Fit"
    assert flavors(a, "main") == {
        "main": {"cpu": "two/Fit", "memory": "two/Fit", "example.com/gpu": "b_one/Fit"}
    }


def test_multiple_resource_groups_with_multiple_resources_fits_with_different_modes() -> None:
    cq = (
        CQ("test-clusterqueue")
        .cohort("test-cohort")
        .group(("one", {"cpu": "2", "memory": "1Gi"}), ("two", {"cpu": "4", "memory": "15Mi"}))
        .group(("b_one", {"example.com/gpu": "4"}))
        .obj()
    )
    secondary = (
        CQ("test-secondary-clusterqueue")
        .cohort("test-cohort")
        .group(("b_one", {"example.com/gpu": "0"}))
        .obj()
    )
    a = assign(
        cq,
        pods(cpu="3", memory="10Mi", gpu="3"),
        usage={("two", "memory"): 10 * MI},
        secondary=secondary,
        secondary_usage={("b_one", "example.com/gpu"): 2},
        oracle={("two", "memory"): (PREEMPT, 1)},
    )
    assert rep_mode(a) == "Preempt"
    assert flavors(a, "main") == {
        "main": {"cpu": "two/Fit", "memory": "two/Preempt", "example.com/gpu": "b_one/Preempt"}
    }
    assert a.borrowing_level == 1


def test_multiple_resources_in_a_group_doesnt_fit() -> None:
    cq = (
        CQ("test-clusterqueue")
        .group(("one", {"cpu": "2", "memory": "1Gi"}), ("two", {"cpu": "4", "memory": "5Mi"}))
        .obj()
    )
    a = assign(cq, pods(cpu="3", memory="10Mi"))
    assert rep_mode(a) == "NoFit"
    assert a.reason == "ExceedsMaxQuota"


def test_multiple_flavors_fits_while_skipping_tainted_flavor() -> None:
    cq = CQ("test-clusterqueue").group(("tainted", {"cpu": "4"}), ("two", {"cpu": "4"})).obj()
    a = assign(cq, pods(cpu="3"))
    assert flavors(a, "main") == {"main": {"cpu": "two/Fit"}}


def test_multiple_flavors_fits_a_node_selector() -> None:
    cq = CQ("test-clusterqueue").group(("one", {"cpu": "4"}), ("two", {"cpu": "4"})).obj()
    a = assign(
        cq,
        pods(
            selector={"type": "two", "ignored1": "foo"},
            affinity=((("ignored2", "In", ("bar",)),),),
            cpu="1",
        ),
    )
    assert flavors(a, "main") == {"main": {"cpu": "two/Fit"}}


def test_multiple_flavors_fits_with_node_affinity() -> None:
    cq = (
        CQ("test-clusterqueue")
        .group(("one", {"cpu": "4", "memory": "1Gi"}), ("two", {"cpu": "4", "memory": "1Gi"}))
        .obj()
    )
    a = assign(
        cq,
        pods(
            selector={"ignored1": "foo"},
            affinity=((("type", "In", ("two",)),),),
            cpu="1",
            memory="1Mi",
        ),
    )
    assert flavors(a, "main") == {"main": {"cpu": "two/Fit", "memory": "two/Fit"}}


def test_multiple_flavors_node_affinity_fits_any_flavor() -> None:
    cq = CQ("test-clusterqueue").group(("one", {"cpu": "4"}), ("two", {"cpu": "4"})).obj()
    a = assign(
        cq,
        pods(affinity=((("ignored2", "In", ("bar",)),), (("cpuType", "In", ("two",)),)), cpu="1"),
    )
    assert flavors(a, "main") == {"main": {"cpu": "one/Fit"}}


def test_multiple_flavors_with_different_label_keys_selector_only_uses_flavors_own_keys() -> None:
    cq = (
        CQ("test-clusterqueue")
        .group(("label-x-a", {"cpu": "4"}), ("label-xy-b", {"cpu": "4"}))
        .obj()
    )
    a = assign(cq, pods(selector={"x": "a", "y": "g"}, cpu="1"))
    assert flavors(a, "main") == {"main": {"cpu": "label-x-a/Fit"}}


def test_labelless_flavor_in_group_with_labeled_flavor_workload_uses_labeled_selector() -> None:
    cq = CQ("test-clusterqueue").group(("default", {"cpu": "4"}), ("two", {"cpu": "4"})).obj()
    a = assign(cq, pods(selector={"type": "two"}, cpu="1"))
    assert flavors(a, "main") == {"main": {"cpu": "default/Fit"}}


def test_multiple_flavors_doesnt_fit_node_affinity() -> None:
    cq = CQ("test-clusterqueue").group(("one", {"cpu": "4"}), ("two", {"cpu": "4"})).obj()
    a = assign(cq, pods(affinity=((("type", "In", ("three",)),),), cpu="1"))
    assert rep_mode(a) == "NoFit"
    assert a.reason == "NoMatchingFlavor"


def test_multiple_specs_fit_different_flavors() -> None:
    cq = CQ("test-clusterqueue").group(("one", {"cpu": "4"}), ("two", {"cpu": "10"})).obj()
    a = assign(cq, pods("driver", cpu="5"), pods("worker", cpu="3"))
    assert rep_mode(a) == "Fit"
    assert flavors(a, "driver", "worker") == {
        "driver": {"cpu": "two/Fit"},
        "worker": {"cpu": "one/Fit"},
    }


def test_multiple_specs_fits_borrowing() -> None:
    cq = (
        CQ("test-clusterqueue")
        .cohort("test-cohort")
        .group(("default", {"cpu": ("2", "98"), "memory": "2Gi"}))
        .obj()
    )
    secondary = (
        CQ("test-secondary-clusterqueue")
        .cohort("test-cohort")
        .group(("default", {"cpu": "198", "memory": "198Gi"}))
        .obj()
    )
    a = assign(
        cq,
        pods("driver", cpu="4", memory="1Gi"),
        pods("worker", cpu="6", memory="4Gi"),
        secondary=secondary,
    )
    assert rep_mode(a) == "Fit"
    assert flavors(a, "driver", "worker") == {
        "driver": {"cpu": "default/Fit", "memory": "default/Fit"},
        "worker": {"cpu": "default/Fit", "memory": "default/Fit"},
    }
    assert a.borrowing_level == 1


def test_not_enough_space_to_borrow() -> None:
    cq = CQ("test-clusterqueue").cohort("test-cohort").group(("one", {"cpu": "1"})).obj()
    secondary = (
        CQ("test-secondary-clusterqueue")
        .cohort("test-cohort")
        .group(("one", {"cpu": ("10", None, "0")}))
        .obj()
    )
    a = assign(cq, pods(cpu="2"), secondary=secondary, secondary_usage={("one", "cpu"): 9_000})
    assert rep_mode(a) == "NoFit"
    assert a.reason == "ExceedsMaxQuota"


def test_past_max_but_can_preempt_in_cluster_queue() -> None:
    cq = CQ("test-clusterqueue").cohort("test-cohort").group(("one", {"cpu": ("2", "8")})).obj()
    secondary = (
        CQ("test-secondary-clusterqueue").cohort("test-cohort").group(("one", {"cpu": "98"})).obj()
    )
    a = assign(
        cq,
        pods(cpu="2"),
        usage={("one", "cpu"): 9_000},
        secondary=secondary,
        secondary_usage={("one", "cpu"): 9_000},
        oracle={("one", "cpu"): (PREEMPT, 1)},
    )
    assert rep_mode(a) == "Preempt"
    assert flavors(a, "main") == {"main": {"cpu": "one/Preempt"}}
    assert a.borrowing_level == 1


def test_past_min_but_can_preempt_in_cluster_queue() -> None:
    cq = CQ("test-clusterqueue").group(("one", {"cpu": "2"})).obj()
    a = assign(cq, pods(cpu="2"), usage={("one", "cpu"): 1_000})
    assert rep_mode(a) == "Preempt"
    assert flavors(a, "main") == {"main": {"cpu": "one/Preempt"}}


def test_past_min_but_can_preempt_in_cohort_and_cluster_queue() -> None:
    cq = CQ("test-clusterqueue").cohort("test-cohort").group(("one", {"cpu": "3"})).obj()
    secondary = (
        CQ("test-secondary-clusterqueue").cohort("test-cohort").group(("one", {"cpu": "7"})).obj()
    )
    a = assign(
        cq,
        pods(cpu="2"),
        usage={("one", "cpu"): 2_000},
        secondary=secondary,
        secondary_usage={("one", "cpu"): 8_000},
        oracle={("one", "cpu"): (PREEMPT, 1)},
    )
    assert rep_mode(a) == "Preempt"
    assert flavors(a, "main") == {"main": {"cpu": "one/Preempt"}}
    assert a.borrowing_level == 1


def test_can_only_preempt_flavors_that_match_affinity() -> None:
    cq = CQ("test-clusterqueue").group(("one", {"cpu": "4"}), ("two", {"cpu": "4"})).obj()
    a = assign(
        cq,
        pods(selector={"type": "two"}, cpu="2"),
        usage={("one", "cpu"): 3_000, ("two", "cpu"): 3_000},
    )
    assert rep_mode(a) == "Preempt"
    assert flavors(a, "main") == {"main": {"cpu": "two/Preempt"}}


def test_each_podset_requires_preemption_on_a_different_flavor() -> None:
    cq = CQ("test-clusterqueue").group(("one", {"cpu": "4"}), ("tainted", {"cpu": "10"})).obj()
    a = assign(
        cq,
        pods("launcher", cpu="2"),
        pods("workers", 10, tolerations=(TOLERATE_SPOT,), cpu="1"),
        usage={("one", "cpu"): 3_000, ("tainted", "cpu"): 3_000},
    )
    assert rep_mode(a) == "Preempt"
    assert flavors(a, "launcher", "workers") == {
        "launcher": {"cpu": "one/Preempt"},
        "workers": {"cpu": "tainted/Preempt"},
    }


def test_resource_not_listed_in_cluster_queue() -> None:
    cq = CQ("test-clusterqueue").group(("one", {"cpu": "4"})).obj()
    a = assign(cq, pods(gpu="2"))
    assert rep_mode(a) == "NoFit"
    assert a.reason == "NoMatchingFlavor"


def test_zero_resource_request_not_in_cluster_queue_should_succeed() -> None:
    cq = CQ("test-clusterqueue").group(("default", {"cpu": "4"})).obj()
    a = assign(cq, pods(cpu="1", gpu="0"))
    assert rep_mode(a) == "Fit"
    assert flavors(a, "main") == {"main": {"cpu": "default/Fit"}}


@pytest.mark.xfail(
    strict=True,
    reason="a zero request gets no flavor in Tower (it holds no quota, so no flavor is "
    f"needed); Kueue names one; {UNSUPPORTED}",
)
def test_zero_resource_request_defined_in_cluster_queue_should_get_flavor_assigned() -> None:
    cq = CQ("test-clusterqueue").group(("default", {"cpu": "4", "example.com/gpu": "4"})).obj()
    a = assign(cq, pods(cpu="1", gpu="0"))
    assert flavors(a, "main") == {"main": {"cpu": "default/Fit", "example.com/gpu": "default/Fit"}}


def test_num_pods_fit() -> None:
    cq = CQ("test-clusterqueue").group(("default", {"pods": "3", "cpu": "10"})).obj()
    a = assign(cq, pods(count=3, cpu="1"))
    assert rep_mode(a) == "Fit"
    assert flavors(a, "main") == {"main": {"cpu": "default/Fit", "pods": "default/Fit"}}
    assert a.usage == {("default", "pods"): 3, ("default", "cpu"): 3_000}


def test_num_pods_dont_fit() -> None:
    cq = CQ("test-clusterqueue").group(("default", {"pods": "2", "cpu": "10"})).obj()
    a = assign(cq, pods(count=3, cpu="1"))
    assert rep_mode(a) == "NoFit"
    assert a.reason == "ExceedsMaxQuota"


def test_with_reclaimable_pods_reclaimable_pods_on() -> None:
    cq = CQ("test-clusterqueue").group(("default", {"pods": "3", "cpu": "10"})).obj()
    # Two of the five pods are reclaimable: the Workload reconciler gives the core the pod set
    # without them (core/jobframework/reclaimable.py), as Kueue's totalRequestsFromPodSets.
    a = assign(cq, *reclaimable.pod_sets_after((pods(count=5, cpu="1"),), {"main": 2}))
    assert rep_mode(a) == "Fit"
    assert a.usage == {("default", "pods"): 3, ("default", "cpu"): 3_000}


def test_with_reclaimable_pods_reclaimable_pods_off() -> None:
    cq = CQ("test-clusterqueue").group(("default", {"pods": "5", "cpu": "10"})).obj()
    a = assign(cq, pods(count=5, cpu="1"))
    assert rep_mode(a) == "Fit"
    assert a.usage == {("default", "pods"): 5, ("default", "cpu"): 5_000}


def _one_two(
    fungibility: tuple[str, str] | None,
    one_cpu: object = "10",
    two_cpu: object = "10",
    cohort: bool = False,
) -> ClusterQueue:
    builder = CQ("test-clusterqueue")
    if fungibility is not None:
        builder = builder.fungibility(borrow=fungibility[0], preempt=fungibility[1])
    if cohort:
        builder = builder.cohort("test-cohort")
    return builder.group(
        ("one", {"pods": "10", "cpu": one_cpu}), ("two", {"pods": "10", "cpu": two_cpu})
    ).obj()


@pytest.mark.parametrize(
    "row",
    [
        "preempt before try next flavor",
        "preempt before try next flavor; using WhenCanBorrow=MayStopSearch,WhenCanPreempt=MayStopSearch",
    ],
)
def test_preempt_before_try_next_flavor(row: str) -> None:
    cq = _one_two(("MayStopSearch", "MayStopSearch"))
    a = assign(cq, pods(cpu="9"), usage={("one", "cpu"): 2_000})
    assert rep_mode(a) == "Preempt"
    assert flavors(a, "main") == {"main": {"cpu": "one/Preempt", "pods": "one/Fit"}}


def test_preempt_try_next_flavor() -> None:
    cq = _one_two(None)
    a = assign(cq, pods(cpu="9"), usage={("one", "cpu"): 2_000})
    assert rep_mode(a) == "Fit"
    assert flavors(a, "main") == {"main": {"cpu": "two/Fit", "pods": "two/Fit"}}


SECONDARY_ONE_CPU_1 = (
    CQ("test-secondary-clusterqueue").cohort("test-cohort").group(("one", {"cpu": "1"})).obj()
)


def test_borrow_try_next_flavor_found_the_first_flavor() -> None:
    cq = _one_two(("TryNextFlavor", "TryNextFlavor"), one_cpu=("10", "1"), two_cpu="1", cohort=True)
    a = assign(cq, pods(cpu="9"), usage={("one", "cpu"): 2_000}, secondary=SECONDARY_ONE_CPU_1)
    assert rep_mode(a) == "Fit"
    assert flavors(a, "main") == {"main": {"cpu": "one/Fit", "pods": "one/Fit"}}
    assert a.borrowing_level == 1


def test_borrow_try_next_flavor_found_the_second_flavor() -> None:
    cq = _one_two(("TryNextFlavor", "TryNextFlavor"), one_cpu=("10", "1"), cohort=True)
    a = assign(cq, pods(cpu="9"), usage={("one", "cpu"): 2_000}, secondary=SECONDARY_ONE_CPU_1)
    assert rep_mode(a) == "Fit"
    assert flavors(a, "main") == {"main": {"cpu": "two/Fit", "pods": "two/Fit"}}
    assert a.borrowing_level == 0


def test_borrow_before_try_next_flavor() -> None:
    cq = _one_two(None, one_cpu=("10", "1"), cohort=True)
    a = assign(cq, pods(cpu="9"), usage={("one", "cpu"): 2_000}, secondary=SECONDARY_ONE_CPU_1)
    assert rep_mode(a) == "Fit"
    assert flavors(a, "main") == {"main": {"cpu": "one/Fit", "pods": "one/Fit"}}
    assert a.borrowing_level == 1


def _borrowing_preemptor(
    fungibility: tuple[str, str],
    one_cpu: object,
    reclaim: str = "LowerPriority",
    borrow: str = "LowerPriority",
    two: bool = True,
) -> ClusterQueue:
    builder = (
        CQ("test-clusterqueue").cohort("test-cohort").preemption(reclaim=reclaim, borrow=borrow)
    )
    builder = builder.fungibility(borrow=fungibility[0], preempt=fungibility[1])
    groups = [("one", {"cpu": one_cpu})] + ([("two", {"cpu": "12"})] if two else [])
    return builder.group(*groups).obj()


SECONDARY_ONE_CPU_12 = (
    CQ("test-secondary-clusterqueue").cohort("test-cohort").group(("one", {"cpu": "12"})).obj()
)


@pytest.mark.parametrize(
    ("row", "one_cpu"),
    [
        (
            "when borrowing while preemption is needed for flavor one; WhenCanBorrow=MayStopSearch",
            ("0", "12"),
        ),
        (
            "when borrowing while preemption is needed for flavor one; WhenCanBorrow=MayStopSearch,WhenCanPreempt=MayStopSearch",
            ("0", "12"),
        ),
        (
            "when borrowing while preemption is needed for flavor one, no borrowingLimit; WhenCanBorrow=MayStopSearch",
            "0",
        ),
        (
            "when borrowing while preemption is needed for flavor one, no borrowingLimit; WhenCanBorrow=MayStopSearch,WhenCanPreempt=MayStopSearch",
            "0",
        ),
    ],
)
def test_when_borrowing_while_preemption_is_needed_for_flavor_one_when_can_borrow_may_stop_search(
    row: str, one_cpu: object
) -> None:
    cq = _borrowing_preemptor(("MayStopSearch", "MayStopSearch"), one_cpu)
    a = assign(
        cq,
        pods(cpu="12"),
        secondary=SECONDARY_ONE_CPU_12,
        secondary_usage={("one", "cpu"): 10_000},
        oracle={("one", "cpu"): (PREEMPT, 1)},
    )
    assert rep_mode(a) == "Preempt"
    assert flavors(a, "main") == {"main": {"cpu": "one/Preempt"}}
    assert a.borrowing_level == 1


@pytest.mark.parametrize(
    "row",
    [
        "when borrowing while preemption is needed for flavor one; WhenCanBorrow=TryNextFlavor",
        "when borrowing while preemption is needed for flavor one; WhenCanBorrow=TryNextFlavor,WhenCanPreempt=MayStopSearch",
    ],
)
def test_when_borrowing_while_preemption_is_needed_for_flavor_one_when_can_borrow_try_next_flavor(
    row: str,
) -> None:
    cq = _borrowing_preemptor(("TryNextFlavor", "MayStopSearch"), ("0", "12"))
    a = assign(cq, pods(cpu="12"), secondary=SECONDARY_ONE_CPU_12)
    assert rep_mode(a) == "Fit"
    assert flavors(a, "main") == {"main": {"cpu": "two/Fit"}}


def test_when_borrowing_while_preemption_is_needed_but_borrowing_limit_exceeds_the_quota_available_in_the_cohort() -> (
    None
):
    cq = (
        CQ("test-clusterqueue")
        .cohort("test-cohort")
        .preemption(reclaim="LowerPriority", borrow="LowerPriority")
        .group(("one", {"cpu": ("0", "12")}))
        .obj()
    )
    secondary = (
        CQ("test-secondary-clusterqueue").cohort("test-cohort").group(("one", {"cpu": "11"})).obj()
    )
    a = assign(cq, pods(cpu="12"), secondary=secondary, secondary_usage={("one", "cpu"): 10_000})
    assert rep_mode(a) == "NoFit"
    assert a.reason == "ExceedsMaxQuota"


def test_lend_try_next_flavor_found_the_second_flavor() -> None:
    cq = _one_two(
        ("TryNextFlavor", "TryNextFlavor"),
        one_cpu=("10", None, "1"),
        two_cpu=("10", None, "0"),
        cohort=True,
    )
    a = assign(cq, pods(cpu="9"), usage={("one", "cpu"): 2_000}, secondary=SECONDARY_ONE_CPU_1)
    assert rep_mode(a) == "Fit"
    assert flavors(a, "main") == {"main": {"cpu": "two/Fit", "pods": "two/Fit"}}


def test_lend_try_next_flavor_found_the_first_flavor() -> None:
    cq = _one_two(
        ("TryNextFlavor", "TryNextFlavor"),
        one_cpu=("10", None, "1"),
        two_cpu=("1", None, "0"),
        cohort=True,
    )
    a = assign(cq, pods(cpu="9"), usage={("one", "cpu"): 2_000}, secondary=SECONDARY_ONE_CPU_1)
    assert rep_mode(a) == "Fit"
    assert flavors(a, "main") == {"main": {"cpu": "one/Fit", "pods": "one/Fit"}}
    assert a.borrowing_level == 1


@pytest.mark.parametrize(
    "row",
    [
        "cannot preempt in cohort (oracle returns None) for the first flavor, tries the second flavor (which fits)",
        "cannot preempt in cohort (oracle returns None) for the first flavor, tries the second flavor (which fits); using deprecated WhenCanBorrow=MayStopSearch,WhenCanPreempt=MayStopSearch",
    ],
)
def test_cannot_preempt_in_cohort_for_the_first_flavor_tries_the_second_flavor(row: str) -> None:
    cq = (
        CQ("test-clusterqueue")
        .cohort("test-cohort")
        .fungibility(borrow="MayStopSearch", preempt="MayStopSearch")
        .preemption(reclaim="LowerPriority", borrow="LowerPriority")
        .group(("one", {"cpu": ("0", "2")}), ("two", {"cpu": ("0", "2")}))
        .obj()
    )
    secondary = (
        CQ("test-secondary-clusterqueue")
        .cohort("test-cohort")
        .group(("one", {"cpu": "2"}), ("two", {"cpu": "2"}))
        .obj()
    )
    a = assign(
        cq,
        pods(cpu="2"),
        secondary=secondary,
        secondary_usage={("one", "cpu"): 2_000},
        oracle={("one", "cpu"): (NO_CANDIDATES, 0)},
    )
    assert rep_mode(a) == "Fit"
    assert flavors(a, "main") == {"main": {"cpu": "two/Fit"}}
    assert a.borrowing_level == 1


def test_quota_exhausted_but_can_preempt_in_cohort_and_cluster_queue() -> None:
    cq = (
        CQ("test-clusterqueue")
        .cohort("test-cohort")
        .group(("one", {"pods": "10", "cpu": ("10", None, "0")}))
        .obj()
    )
    secondary = (
        CQ("test-secondary-clusterqueue")
        .cohort("test-cohort")
        .group(("one", {"pods": "0", "cpu": "0"}))
        .obj()
    )
    a = assign(
        cq,
        pods(cpu="9"),
        usage={("one", "cpu"): 2_000},
        secondary=secondary,
        oracle={("one", "cpu"): (PREEMPT, 1)},
    )
    assert rep_mode(a) == "Preempt"
    assert flavors(a, "main") == {"main": {"cpu": "one/Preempt", "pods": "one/Fit"}}
    assert a.borrowing_level == 1


@pytest.mark.parametrize(
    ("row", "reclaim", "answer", "want"),
    [
        (
            "when borrowing while preemption is needed for flavor one, fair sharing enabled, reclaimWithinCohort=Any",
            "Any",
            (PREEMPT, 1),
            ("Preempt", "one/Preempt", 1),
        ),
        (
            "when borrowing while preemption is needed for flavor one, fair sharing enabled, reclaimWithinCohort=Any; using deprecated WhenCanBorrow=MayStopSearch,WhenCanPreempt=MayStopSearch",
            "Any",
            (PREEMPT, 1),
            ("Preempt", "one/Preempt", 1),
        ),
        (
            "when borrowing while preemption is needed for flavor one, fair sharing enabled, reclaimWithinCohort=Never",
            "Never",
            (NO_CANDIDATES, 0),
            ("Fit", "two/Fit", 0),
        ),
        (
            "when borrowing while preemption is needed for flavor one, fair sharing enabled, reclaimWithinCohort=Never; using deprecated WhenCanBorrow=MayStopSearch,WhenCanPreempt=MayStopSearch",
            "Never",
            (NO_CANDIDATES, 0),
            ("Fit", "two/Fit", 0),
        ),
    ],
)
def test_when_borrowing_while_preemption_is_needed_for_flavor_one_fair_sharing_enabled(
    row: str, reclaim: str, answer: tuple[Mode | None, int], want: tuple[str, str, int]
) -> None:
    cq = _borrowing_preemptor(
        ("MayStopSearch", "MayStopSearch"), "0", reclaim=reclaim, borrow="Never"
    )
    a = assign(
        cq,
        pods(cpu="12"),
        secondary=SECONDARY_ONE_CPU_12,
        secondary_usage={("one", "cpu"): 10_000},
        oracle={("one", "cpu"): answer},
        fair_sharing=True,
    )
    assert (rep_mode(a), flavors(a, "main")["main"]["cpu"], a.borrowing_level) == want


def test_multi_podset_one_fits_and_another_fails_fitting_podset_attempts_skipped_in_resolve_no_fit_reason() -> (
    None
):
    cq = CQ("test-clusterqueue").group(("one", {"cpu": "2"}), ("two", {"cpu": "2"})).obj()
    a = assign(
        cq,
        pods("fitting-podset", selector={"type": "one"}, cpu="1"),
        pods("blocking-podset", cpu="5"),
    )
    assert rep_mode(a) == "NoFit"
    assert a.reason == "ExceedsMaxQuota"


def _slice_rows(one_cpu: str, old_flavor: str) -> tuple[Scenario, Outcome]:
    """The workload slice rows: a slice of 3 cpu and 10Mi replacing one admitted with 2 cpu and
    10Mi in `old_flavor`. Kueue hands its assigner the old slice (preemptWorkloadSlice); Tower
    finds it admitted in the ClusterQueue, so the row admits it first and runs one cycle."""
    cq = (
        CQ("test-clusterqueue")
        .group(("one", {"cpu": one_cpu, "memory": "1Gi"}), ("two", {"cpu": "4", "memory": "2Gi"}))
        .obj()
    )
    s = Scenario(
        flavors=FLAVORS.values(),
        cluster_queues=[cq],
        local_queues=[lq("default", "main", "test-clusterqueue")],
    )
    old = WL("old").queue("main").pod_set("main", 1, cpu="2", memory="10Mi")
    s.admitted(old, "test-clusterqueue", cpu=old_flavor, memory=old_flavor)
    grown = WL("new").queue("main").pod_set("main", 1, cpu="3", memory="10Mi").created(1.0)
    s.pending(replace(grown.obj(), replacement_for="default/old"))
    return s, s.cycle()


def test_workload_slice_preemption_fits_in_the_original_workload_resource_flavor() -> None:
    s, out = _slice_rows("3", "two")
    # Fit in two, the old slice's flavor (one fits too, but a slice keeps its flavor), for
    # the difference only: 1 cpu and no memory more than the old slice held.
    assert out.assignments == {
        "default/new": ("test-clusterqueue", {"main": {"cpu": "two", "memory": "two"}})
    }
    assert s.state.quota_usage("test-clusterqueue") == {
        ("two", "cpu"): 3000,
        ("two", "memory"): 10 * MI,
    }


def test_workload_slice_preemption_does_not_fit_in_the_original_workload_resource_flavor() -> None:
    _, out = _slice_rows("500m", "one")
    # NoFit: the old slice's flavor one is too small for 3 cpu, and two is not its flavor.
    assert "default/new" not in out.assignments
    assert out.reasons["default/new"] == "ExceedsMaxQuota"
    assert out.messages["default/new"].startswith("needs 3 cpu in flavor one;")


def _in_tree(
    cluster_queues: list[ClusterQueue],
    cohorts: list[Cohort],
    flavor_names: tuple[str, ...],
    pod_set: PodSet,
    usage: Mapping[str, Mapping[FlavorResource, int]],
    oracle: Mapping[FlavorResource, tuple[Mode | None, int]] | None = None,
) -> Assignment:
    """The flavor assigner for the first ClusterQueue, in a tree of several with usage."""
    flavors = {name: ResourceFlavor(name) for name in flavor_names}
    return run_assigner(cluster_queues, cohorts, flavors, (pod_set,), usage, oracle)


# TestReclaimBeforePriorityPreemption ("pkg/scheduler/flavorassigner/flavorassigner_test.go").
UNO_DUE_TRE = ("uno", "due", "tre")


def _reclaim_before(
    preempt_policy: str | None,
    pod_set: PodSet,
    own: dict[FlavorResource, int],
    other: dict[FlavorResource, int],
    oracle: dict[FlavorResource, tuple[Mode | None, int]] | None = None,
) -> Assignment:
    quota = {"compute": "10", "gpu": "10"}
    test_cq = (
        CQ("test-clusterqueue")
        .cohort("cohort")
        .preemption(within="LowerPriority", reclaim="LowerPriority")
        .fungibility(preempt=preempt_policy or "TryNextFlavor")
        .group(*((name, quota) for name in UNO_DUE_TRE))
        .obj()
    )
    empty = {"compute": "0", "gpu": "0"}
    other_cq = (
        CQ("other-clusterqueue")
        .cohort("cohort")
        .group(*((name, empty) for name in UNO_DUE_TRE))
        .obj()
    )
    return _in_tree(
        [test_cq, other_cq],
        [],
        UNO_DUE_TRE,
        pod_set,
        {"test-clusterqueue": own, "other-clusterqueue": other},
        oracle,
    )


def test_reclaim_before_priority_preemption_select_first_flavor_which_fits() -> None:
    a = _reclaim_before(None, pods(exact={"gpu": "10"}), {("uno", "gpu"): 1}, {("due", "gpu"): 1})
    assert (rep_mode(a), a.pod_set_flavors[0]) == ("Fit", {"gpu": "tre"})


def test_reclaim_before_priority_preemption_select_first_flavor_where_gpu_reclamation_is_possible() -> (
    None
):
    a = _reclaim_before(
        None,
        pods(exact={"gpu": "10"}),
        {("uno", "gpu"): 1},
        {("due", "gpu"): 1, ("tre", "gpu"): 1},
        {("uno", "gpu"): (PREEMPT, 0), ("due", "gpu"): (RECLAIM, 0)},
    )
    assert (rep_mode(a), a.pod_set_flavors[0]) == ("Preempt", {"gpu": "due"})


@pytest.mark.parametrize(
    "row",
    [
        "Select first flavor when flavor fungibility is disabled",
        "Select first flavor when flavor fungibility is disabled; using deprecated WhenCanPreempt=MayStopSearch",
    ],
)
def test_reclaim_before_priority_preemption_select_first_flavor_when_flavor_fungibility_is_disabled(
    row: str,
) -> None:
    a = _reclaim_before(
        "MayStopSearch",
        pods(exact={"gpu": "10"}),
        {("uno", "gpu"): 1},
        {("due", "gpu"): 1, ("tre", "gpu"): 1},
    )
    assert (rep_mode(a), a.pod_set_flavors[0]) == ("Preempt", {"gpu": "uno"})


def test_reclaim_before_priority_preemption_select_first_flavor_where_priority_based_preemption_is_possible() -> (
    None
):
    a = _reclaim_before(
        None,
        pods(exact={"gpu": "10"}),
        {("uno", "gpu"): 1, ("due", "gpu"): 1, ("tre", "gpu"): 1},
        {},
    )
    assert (rep_mode(a), a.pod_set_flavors[0]) == ("Preempt", {"gpu": "uno"})


def test_reclaim_before_priority_preemption_select_second_flavor_where_gpu_reclamation_is_possible_as_compute_fits() -> (
    None
):
    a = _reclaim_before(
        None,
        pods(exact={"gpu": "10", "compute": "10"}),
        {("uno", "gpu"): 1, ("uno", "compute"): 1, ("due", "compute"): 1},
        {("due", "gpu"): 1, ("tre", "gpu"): 1},
        {("uno", "gpu"): (PREEMPT, 0), ("due", "gpu"): (RECLAIM, 0), ("tre", "gpu"): (RECLAIM, 0)},
    )
    assert (rep_mode(a), a.pod_set_flavors[0]) == ("Preempt", {"gpu": "tre", "compute": "tre"})


# TestHierarchical ("pkg/scheduler/flavorassigner/flavorassigner_test.go").
ONE_TWO_THREE = ("one", "two", "three")


def _hierarchical(
    test_quota: list[tuple[str, dict[str, object]]],
    own: dict[FlavorResource, int],
    other: dict[FlavorResource, int],
    fungibility: tuple[str, str, str | None] = ("MayStopSearch", "TryNextFlavor", None),
    oracle: dict[FlavorResource, tuple[Mode | None, int]] | None = None,
) -> Assignment:
    cohorts = [
        Cohort("three", None, CQ("_").group(("three", {"cpu": "4"})).obj().resource_groups),
        Cohort("two", "three", CQ("_").group(("two", {"cpu": "4"})).obj().resource_groups),
        Cohort("one", "two", CQ("_").group(("one", {"cpu": "4"})).obj().resource_groups),
    ]
    test_cq = (
        CQ("test-clusterqueue")
        .cohort("one")
        .preemption(within="LowerPriority", reclaim="LowerPriority")
        .group(*test_quota)
        .fungibility(borrow=fungibility[0], preempt=fungibility[1], pref=fungibility[2])
        .obj()
    )
    other_cq = (
        CQ("other-clusterqueue")
        .cohort("two")
        .group(*((n, {"cpu": "0"}) for n in ONE_TWO_THREE))
        .obj()
    )
    return _in_tree(
        [test_cq, other_cq],
        cohorts,
        ONE_TWO_THREE,
        pods(cpu="4"),
        {"test-clusterqueue": own, "other-clusterqueue": other},
        oracle,
    )


ZERO_EACH = [(n, {"cpu": "0"}) for n in ONE_TWO_THREE]


def test_hierarchical_select_the_top_flavor() -> None:
    a = _hierarchical(ZERO_EACH, {("one", "cpu"): 4_000}, {("two", "cpu"): 4_000})
    assert (rep_mode(a), a.pod_set_flavors[0]) == ("Fit", {"cpu": "three"})


def test_hierarchical_select_the_first_flavor_which_fits() -> None:
    a = _hierarchical(ZERO_EACH, {("one", "cpu"): 4_000}, {})
    assert (rep_mode(a), a.pod_set_flavors[0]) == ("Fit", {"cpu": "two"})


def test_hierarchical_select_deeper_borrowing_flavor_that_fits_when_shallower_borrowing_flavor_has_no_preemption_candidates() -> (
    None
):
    a = _hierarchical(
        [("one", {"cpu": ("4", "0")}), ("two", {"cpu": "0"}), ("three", {"cpu": "0"})],
        {("one", "cpu"): 4_000},
        {},
        ("TryNextFlavor", "TryNextFlavor", "PreemptionOverBorrowing"),
        {("one", "cpu"): (NO_CANDIDATES, 1)},
    )
    assert (rep_mode(a), a.pod_set_flavors[0]) == ("Fit", {"cpu": "two"})


# TestIsPreferred ("pkg/scheduler/flavorassigner/flavorassigner_test.go"): (mode, borrowing level).
FIT, PREEMPT_MODE, NO_CANDIDATES_MODE, NO_FIT = (
    Mode.FIT,
    Mode.PREEMPT,
    Mode.NO_CANDIDATES,
    Mode.NO_FIT,
)


@pytest.mark.parametrize(
    ("row", "a", "b", "preference", "want"),
    [
        ("feature gate disabled prioritises preemption", (FIT, 0), (PREEMPT_MODE, 0), None, True),
        (
            "explicit BorrowingOverPreemption prioritises borrowing distance",
            (PREEMPT_MODE, 1),
            (FIT, 2),
            "BorrowingOverPreemption",
            False,
        ),
        (
            "explicit PreemptionOverBorrowing prioritises lower preemption",
            (PREEMPT_MODE, 1),
            (FIT, 2),
            "PreemptionOverBorrowing",
            True,
        ),
        (
            "explicit PreemptionOverBorrowing breaks borrowing ties with preemption",
            (PREEMPT_MODE, 1),
            (FIT, 1),
            "PreemptionOverBorrowing",
            False,
        ),
        (
            "explicit PreemptionOverBorrowing rejects no-candidate flavor before borrowing comparison",
            (NO_CANDIDATES_MODE, 1),
            (FIT, 2),
            "PreemptionOverBorrowing",
            False,
        ),
        (
            "explicit PreemptionOverBorrowing prefers fit over shallower-borrowing no-candidate flavor",
            (FIT, 2),
            (NO_CANDIDATES_MODE, 1),
            "PreemptionOverBorrowing",
            True,
        ),
        (
            "no-candidate flavor remains preferable to no-fit flavor",
            (NO_CANDIDATES_MODE, 1),
            (NO_FIT, 0),
            None,
            True,
        ),
        (
            "no-fit flavor remains worse than no-candidate flavor",
            (NO_FIT, 0),
            (NO_CANDIDATES_MODE, 1),
            None,
            False,
        ),
        (
            "no-candidate flavors retain borrowing preference",
            (NO_CANDIDATES_MODE, 1),
            (NO_CANDIDATES_MODE, 2),
            "PreemptionOverBorrowing",
            True,
        ),
        (
            "no-candidate flavors retain borrowing preference in reverse",
            (NO_CANDIDATES_MODE, 2),
            (NO_CANDIDATES_MODE, 1),
            "PreemptionOverBorrowing",
            False,
        ),
    ],
)
def test_is_preferred(
    row: str, a: tuple[Mode, int], b: tuple[Mode, int], preference: str | None, want: bool
) -> None:
    assert preferred(a, b, preference == "PreemptionOverBorrowing") is want
