"""Kueue's annotation keys Tower does not read are warned at apply time, each in one line."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender.core.jobframework import registry
from tests.fixtures import admission_review
from webhook.mutate import JOB, mutate
from webhook.settings import Settings
from webhook.validate import validate_kueue

SETTINGS = Settings(controller_usernames=frozenset({"system:serviceaccount:tower-system:tower"}))
CREATE = "01-mutate.job-CREATE-generateName.seed-job"
POD = registry.ADAPTERS["pod"]

WORKLOAD: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Workload",
    "metadata": {"name": "job", "namespace": "default", "uid": "u1"},
    "spec": {
        "queueName": "lq",
        "podSets": [
            {
                "name": "main",
                "count": 1,
                "template": {
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                },
            }
        ],
    },
}


def job_warnings(annotations: dict[str, str], template: dict[str, str] | None = None) -> list[str]:
    """The warnings a user sees on creating the seed Job with these annotations."""
    request = admission_review(CREATE)["request"]
    obj = request["object"]
    obj["metadata"]["annotations"] = annotations
    if template is not None:
        obj["spec"]["template"].setdefault("metadata", {})["annotations"] = template
    response = mutate(request, SETTINGS, JOB)
    assert response["allowed"] is True
    return list(response.get("warnings") or [])


def workload_warnings(annotations: dict[str, str]) -> list[str]:
    obj = copy.deepcopy(WORKLOAD)
    obj["metadata"]["annotations"] = annotations
    request = {
        "uid": "u",
        "kind": {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": "Workload"},
        "operation": "CREATE",
        "object": obj,
    }
    response = validate_kueue(request, "Workload")
    assert response["allowed"] is True
    return list(response.get("warnings") or [])


def test_kueues_own_marks_on_a_job_are_warned():
    said = job_warnings({"kueue.x-k8s.io/stopping": "true"})
    assert [line.split(": ", 1)[1] for line in said] == [
        "metadata.annotations[kueue.x-k8s.io/stopping] (Kueue's own mark while it stops a Job) "
        "is not acted on by Tower; Tower stops and resumes a Job by its spec.suspend alone",
    ]


def test_a_pod_opting_in_to_forced_deletion_is_accepted_without_a_warning():
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "q"},
            "annotations": {"kueue.x-k8s.io/safe-to-forcefully-delete": "true"},
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    request = {
        "uid": "u",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "namespace": "default",
        "object": pod,
    }
    response = mutate(request, SETTINGS, POD)
    # Tower's FailureRecoveryPolicy reads it (tests/controller/test_failure_recovery.py).
    assert not response.get("warnings")


@pytest.mark.parametrize(
    ("key", "consequence"),
    [
        ("kueue.x-k8s.io/priority-boost", "the workload's priority is its priority class's"),
    ],
)
def test_a_workloads_unread_key_is_warned(key, consequence):
    [line] = workload_warnings({key: "5"})
    assert line.startswith(f"Workload default/job: metadata.annotations[{key}] (")
    assert line.endswith(f"is not acted on by Tower; {consequence}")


def test_a_workload_without_them_hears_nothing():
    assert workload_warnings({"kueue.x-k8s.io/job-uid": "x"}) == []
    # A job's key on a Workload is not a Workload's: it is not warned there.
    assert workload_warnings({"kueue.x-k8s.io/elastic-job": "true"}) == []
