"""Kueue's WorkloadPriorityClassDefaulting gate on the API double: a job queued without a
WorkloadPriorityClass label is given `default` when that class exists, and its Workload that
class's priority; a label the user wrote is kept; with the gate off, or no class `default`,
nothing is given."""

from __future__ import annotations

from tests.controller.conftest import eventually
from tests.controller.test_pods import setup

GATE = {"WorkloadPriorityClassDefaulting": True}
CLASS = "kueue.x-k8s.io/priority-class"


def priority_class(name: str, value: int) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def class_of(cluster, job) -> tuple[str | None, int | None]:
    wl = cluster.workload_of(job)
    if wl is None:
        return None, None
    return (wl["spec"].get("priorityClassRef") or {}).get("name"), wl["spec"].get("priority")


def test_a_job_without_a_class_is_given_the_default_and_its_priority(cluster, start_controller):
    setup(cluster)
    cluster.apply(priority_class("default", 100), priority_class("high", 1000))
    start_controller(feature_gates=GATE)
    plain = cluster.job("job-no-wpc", "1")
    eventually(lambda: class_of(cluster, plain) == ("default", 100), what="the default class")
    labels = cluster.get("jobs", "job-no-wpc", "default")["metadata"]["labels"]
    assert labels[CLASS] == "default"
    chosen = cluster.job("job-with-wpc", "1", labels={CLASS: "high"})
    eventually(lambda: class_of(cluster, chosen) == ("high", 1000), what="the job's own class")
    assert cluster.get("jobs", "job-with-wpc", "default")["metadata"]["labels"][CLASS] == "high"


def test_without_the_gate_or_the_class_nothing_is_given(cluster, start_controller):
    setup(cluster)
    start_controller(feature_gates=GATE)
    no_class = cluster.job("no-default-class", "1")
    eventually(lambda: cluster.workload_of(no_class), what="its Workload")
    assert class_of(cluster, no_class) == (None, 0)
    assert CLASS not in cluster.get("jobs", "no-default-class", "default")["metadata"]["labels"]


def test_with_the_gate_off_a_job_keeps_no_class(cluster, start_controller):
    setup(cluster)
    cluster.apply(priority_class("default", 100))
    start_controller()
    plain = cluster.job("gate-off", "1")
    eventually(lambda: cluster.workload_of(plain), what="its Workload")
    assert class_of(cluster, plain) == (None, 0)
    assert CLASS not in cluster.get("jobs", "gate-off", "default")["metadata"]["labels"]
