"""Mutation fuzz through the controller: any field of any watched object replaced by any JSON
value is applied, scheduled and deleted without an exception escaping the loop."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.kube import resources as r
from extender.kube.client import ApiError, RequestBudget
from extender.kube.controller import Controller
from tests.unit.test_shapes import VALID, json_values, paths

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


class FakeClient:
    """Answers every write with the object written (a status patch merged roughly)."""

    def __init__(self) -> None:
        self.budget = RequestBudget(1e9, 10**9)
        self.writes = 0

    def create(self, resource, obj, namespace=None):
        self.writes += 1
        out = copy.deepcopy(obj)
        out.setdefault("metadata", {})["resourceVersion"] = "1"
        return out

    def patch(self, resource, name, patch, namespace=None, **_):
        self.writes += 1
        return {
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "2"},
            **{k: v for k, v in patch.items() if k != "metadata"},
        }

    def get(self, resource, name, namespace=None):
        raise ApiError(404, "NotFound", f"{name} not found")

    def delete(self, resource, name, namespace=None, **_):
        self.writes += 1
        return {}

    def discover(self, group_version):
        return True


def controller() -> Controller:
    ctl = Controller(FakeClient())  # type: ignore[arg-type]
    for kind in ("ResourceFlavor", "ClusterQueue", "LocalQueue"):
        obj, _ = VALID[kind]
        ctl._apply(RESOURCES[kind], "ADDED", copy.deepcopy(obj))
    return ctl


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
    ctl._apply(resource, "ADDED", obj)
    ctl.step(0)
    ctl._apply(resource, "MODIFIED", copy.deepcopy(obj))
    ctl.step(0)
    ctl._apply(resource, "DELETED", copy.deepcopy(obj))
    ctl.step(0)


def test_the_valid_objects_go_through():
    ctl = controller()
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
    run_through(controller(), RESOURCES[kind], obj)


@settings(max_examples=700, deadline=None)
@given(path=st.sampled_from(WORKLOAD_STATUS), value=json_values)
def test_any_field_of_a_workload_status(path, value):
    obj = mutated("Workload", path, value)
    run_through(controller(), r.WORKLOADS, obj)
