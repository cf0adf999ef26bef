"""Mutation fuzz through the controller: any field of any watched object replaced by any JSON
value is applied, reconciled, scheduled and deleted without a reconcile failing on an
unexpected exception (a bug): bad input is a one-line warning."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.kube.api import resources as r
from tests.fakes import FakeKube, controller_over, unexpected
from tests.unit.core.jobframework.test_shapes import VALID, json_values, paths

RESOURCES = {
    "ClusterQueue": r.CLUSTER_QUEUES,
    "ResourceFlavor": r.RESOURCE_FLAVORS,
    "LocalQueue": r.LOCAL_QUEUES,
    "Cohort": r.COHORTS,
    "WorkloadPriorityClass": r.WORKLOAD_PRIORITY_CLASSES,
    "Workload": r.WORKLOADS,
    "Job": r.JOBS,
    "JobSet": r.JOBSETS,
}
ADMITTED = {
    "admission": {
        "clusterQueue": "cq",
        "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "f"}, "resourceUsage": {"cpu": "1"}, "count": 1}
        ],
    },
    "conditions": [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": ""},
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": ""},
    ],
}


def controller():
    fake = FakeKube()
    for kind in ("ResourceFlavor", "ClusterQueue", "LocalQueue"):
        obj, _ = VALID[kind]
        fake.add(copy.deepcopy(obj))
    ctl, _ = controller_over(fake)
    return ctl, fake


TARGETS = [(kind, p) for kind in RESOURCES for p in paths(VALID[kind][0]) if p]
WORKLOAD_STATUS = [("status", *p) for p in paths(ADMITTED) if p]


def mutated(kind, path, value):
    obj = copy.deepcopy(VALID[kind][0])
    if kind == "Workload":
        obj["status"] = copy.deepcopy(ADMITTED)
        obj["metadata"]["resourceVersion"] = "1"
    node = obj
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return obj


def run_through(ctl, resource, obj):
    """Added, changed, deleted: each applied and reconciled without a reconcile failing on
    an unexpected exception (a bad field is a one-line warning, never a traceback)."""
    store = ctl.ctx.store
    store.apply(resource, "ADDED", copy.deepcopy(obj))
    ctl.turn()
    changed = copy.deepcopy(obj)
    if isinstance(changed.get("metadata"), dict):
        changed["metadata"]["resourceVersion"] = "2"
    store.apply(resource, "MODIFIED", changed)
    ctl.turn()
    store.apply(resource, "DELETED", copy.deepcopy(changed))
    ctl.turn()
    assert unexpected(ctl) == 0


def test_the_valid_objects_go_through():
    ctl, _ = controller()
    for kind, resource in RESOURCES.items():
        run_through(ctl, resource, mutated(kind, ("metadata", "name"), "x"))


@settings(max_examples=1500, deadline=None)
@given(target=st.sampled_from(TARGETS), value=json_values)
def test_any_field_of_any_watched_object(target, value):
    kind, path = target
    obj = mutated(kind, path, value)
    if not isinstance(obj.get("metadata"), dict) or not isinstance(
        obj["metadata"].get("name"), str
    ):
        return  # the API server never sends an object without a string name
    run_through(controller()[0], RESOURCES[kind], obj)


@settings(max_examples=700, deadline=None)
@given(path=st.sampled_from(WORKLOAD_STATUS), value=json_values)
def test_any_field_of_a_workload_status(path, value):
    obj = mutated("Workload", path, value)
    run_through(controller()[0], r.WORKLOADS, obj)
