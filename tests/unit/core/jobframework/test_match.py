"""Whether a job still matches its Workload (core/jobframework/match.py), table-driven."""

from __future__ import annotations

import pytest

from extender.core.jobframework import match, registry

CPU1 = {"requests": {"cpu": "1"}}
CPU2 = {"requests": {"cpu": "2"}}


def template(resources=CPU1, init=None):
    spec = {"containers": [{"name": "c", "image": "x", "resources": resources}]}
    if init is not None:
        spec["initContainers"] = [init]
    return {"spec": spec}


def shape(name="main", count=2, resources=CPU1, path="spec.template"):
    return match.Shape(name, count, match.resources_of(template(resources)), path)


@pytest.mark.parametrize(
    ("job", "declared", "admitted", "want"),
    [
        ([shape()], [shape()], {"main": 2}, None),
        # partially admitted: the job runs with the count its admission holds
        ([shape(count=3)], [shape(count=5)], {"main": 3}, None),
        # stopped and put back: the declared count
        ([shape(count=5)], [shape(count=5)], {"main": 3}, None),
        (
            [shape(count=6)],
            [shape()],
            {"main": 2},
            "podSet main (spec.template) now has 6 pods, its admission 2",
        ),
        (
            [shape(resources=CPU2)],
            [shape()],
            {"main": 2},
            "podSet main (spec.template): its containers' resources changed since admission",
        ),
        (
            [shape("a"), shape("b")],
            [shape("a")],
            {"a": 2},
            "its podSets are now [a, b], its Workload's [a]",
        ),
    ],
)
def test_difference(job, declared, admitted, want):
    assert match.difference(job, declared, admitted) == want


def test_resources_include_init_containers_and_their_restart_policy():
    sidecar = {"name": "s", "resources": CPU1, "restartPolicy": "Always"}
    plain = {"name": "s", "resources": CPU1}
    assert match.resources_of(template(init=sidecar)) != match.resources_of(template(init=plain))
    assert match.resources_of(template()) != match.resources_of(template(init=plain))


def workload(count, admitted=None, resources=CPU1):
    wl = {"spec": {"podSets": [{"name": "main", "count": count, "template": template(resources)}]}}
    if admitted is not None:
        wl["status"] = {"admission": {"clusterQueue": "cq", "podSetAssignments": [
            {"name": "main", "count": admitted}]}}  # fmt: skip
    return wl


def job(parallelism, resources=CPU1):
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "default"},
        "spec": {"parallelism": parallelism, "completions": 10, "template": template(resources)},
    }


@pytest.mark.parametrize(
    ("parallelism", "resources", "wl", "matches"),
    [
        (2, CPU1, workload(2, 2), True),
        (2, CPU1, workload(2), True),  # waiting: as declared
        (3, CPU1, workload(5, 3), True),  # partially admitted at 3
        (5, CPU1, workload(5, 3), True),  # put back to its declared count
        (6, CPU1, workload(2, 2), False),
        (2, CPU2, workload(2, 2), False),
    ],
)
def test_a_jobs_key_is_one_of_its_workloads_keys(parallelism, resources, wl, matches):
    adapter = registry.ADAPTERS["batch/job"]
    key = match.key(match.job_shapes(adapter.pod_sets(job(parallelism, resources))))
    assert (key in match.workload_keys(wl)) is matches


def test_malformed_values_are_compared_not_refused():
    odd = {"spec": {"containers": [{"resources": [1, {"a": [2]}]}], "initContainers": [
        {"restartPolicy": ["Always"]}], "overhead": {"cpu": ["1"]}}}  # fmt: skip
    assert hash(match.resources_of(odd)) == hash(match.resources_of(odd))
