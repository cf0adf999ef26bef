"""What the caches keep of an object, from the Jobs a real kube-apiserver v1.32 sent."""

from __future__ import annotations

import copy

import pytest

from extender.core.api.labels import Toleration
from extender.core.api.models import Admission, PodSetAssignment, ResourceFlavor
from extender.core.jobframework.workloads import workload as parse_workload
from extender.kube.api import objects as o
from extender.kube.api.trim import LAST_APPLIED, job_view, trim
from extender.kube.api.trim import workload as trim_workload
from tests.fakes import merge
from tests.fixtures import load

RUNNING = load("lifecycle/04-job.get-after-unsuspend.json")
COMPLETE = load("lifecycle/08-job.get-after-pod-succeeded.json")
LISTED = load("api/list-jobs-default.json")["response"]["body"]["items"][0]


def test_managed_fields_and_the_last_applied_copy_are_dropped_and_nothing_else():
    obj = copy.deepcopy(LISTED)
    obj["metadata"]["annotations"] = {LAST_APPLIED: "{...}", "keep": "me"}
    kept = trim(obj)
    assert "managedFields" not in kept["metadata"]
    assert kept["metadata"]["annotations"] == {"keep": "me"}
    assert kept["spec"] == LISTED["spec"]
    assert "managedFields" in obj["metadata"]  # the input is not changed


def test_a_running_job_as_the_cache_keeps_it():
    view = job_view(RUNNING, keep_source=False)
    assert view.labels == {"kueue.x-k8s.io/queue-name": "user-queue"}  # only what is read
    assert (view.namespace, view.name, view.uid) == (
        "default",
        "sample-job-bsg9x",
        RUNNING["metadata"]["uid"],
    )
    assert view.queue_name == "user-queue"
    assert (view.suspended, view.active, view.started, view.finished) == (
        False,
        True,
        True,
        None,
    )
    assert view.source is None
    # Only what admission sets and eviction restores is kept of the pod template.
    assert view.templates == {
        "template": {"metadata": {"labels": RUNNING["spec"]["template"]["metadata"]["labels"]}}
    }


def test_a_completed_job_says_so_with_its_message():
    view = job_view(COMPLETE, keep_source=True)
    assert view.finished == ("Succeeded", "Reached expected number of succeeded pods")
    assert view.source is None  # a finished Job needs no Workload


def test_the_whole_job_is_kept_while_its_workload_must_be_created():
    view = job_view(LISTED, keep_source=True)
    assert view.source is not None
    assert view.source["spec"] == LISTED["spec"]
    assert "managedFields" not in view.source["metadata"]
    assert "status" not in view.source
    assert view.without_source().source is None


def test_a_finished_workload_keeps_only_its_identity_its_owner_and_that_it_finished():
    finished = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "w",
            "namespace": "default",
            "uid": "u-1",
            "resourceVersion": "7",
            "managedFields": [{"a": 1}],
            "ownerReferences": [{"kind": "Job", "name": "j", "uid": "u-0", "controller": True}],
        },
        "spec": {"queueName": "q", "podSets": [{"name": "main", "template": {"spec": {}}}]},
        "status": {
            "admission": {"clusterQueue": "cq"},
            "conditions": [{"type": "Finished", "status": "True", "reason": "Succeeded"}],
        },
    }
    kept = trim_workload(finished)
    assert dict(kept) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "w",
            "namespace": "default",
            "uid": "u-1",
            "resourceVersion": "7",
            "ownerReferences": [{"kind": "Job", "name": "j", "controller": True}],
        },
        "status": {"conditions": [{"type": "Finished", "status": "True"}]},
    }
    assert o.is_true(kept, o.FINISHED)
    running = {**finished, "status": {"conditions": []}}
    assert trim_workload(running)["spec"] == finished["spec"]


def test_a_workload_keeps_of_its_pod_templates_what_the_core_parses_and_eviction_restores():
    template = {
        "metadata": {"labels": {"a": "b"}, "annotations": {"c": "d"}, "name": "x"},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "trainer:1",
                    "command": ["python", "train.py"],
                    "env": [{"name": "E", "value": "x" * 1000}],
                    "resources": {"requests": {"cpu": "2"}, "limits": {"nvidia.com/gpu": "1"}},
                }
            ],
            "initContainers": [
                {"name": "side", "image": "s", "restartPolicy": "Always", "resources": {}}
            ],
            "overhead": {"cpu": "100m"},
            "nodeSelector": {"pool": "a"},
            "tolerations": [{"key": "t", "operator": "Exists"}],
            "affinity": {"nodeAffinity": {}},
            "volumes": [{"name": "data", "emptyDir": {}}],
            "restartPolicy": "Never",
        },
    }
    pending = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 2, "template": template}]},
    }
    kept = trim_workload(pending)["spec"]["podSets"][0]
    assert kept["count"] == 2
    assert kept["template"] == {
        "metadata": {"labels": {"a": "b"}, "annotations": {"c": "d"}},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "resources": {"requests": {"cpu": "2"}, "limits": {"nvidia.com/gpu": "1"}},
                }
            ],
            "initContainers": [{"name": "side", "restartPolicy": "Always", "resources": {}}],
            "overhead": {"cpu": "100m"},
            "nodeSelector": {"pool": "a"},
            "tolerations": [{"key": "t", "operator": "Exists"}],
            "affinity": {"nodeAffinity": {}},
        },
    }
    # The core reads the trimmed Workload exactly as the whole one.
    assert parse_workload(trim_workload(pending)) == parse_workload(pending)


def test_a_failed_job():
    obj = copy.deepcopy(RUNNING)
    obj["status"]["conditions"].append(
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "m"}
    )
    assert job_view(obj, keep_source=False).finished == ("Failed", "m")


@pytest.mark.parametrize(
    "broken",
    [{"metadata": "x"}, {"metadata": {"name": 3, "namespace": "d"}}, {"metadata": {"name": "a"}}],
)
def test_an_object_without_a_name_and_namespace_is_not_kept(broken):
    assert job_view(broken, keep_source=True) is None


def test_a_partial_admission_patches_the_same_parallelism_from_the_kept_fields():
    """The view keeps job-min-parallelism, so its start sets the admitted parallelism as the
    whole Job's does, and its stop puts the Workload's count back."""
    suspended = copy.deepcopy(RUNNING)
    suspended["spec"]["suspend"] = True
    suspended["spec"]["parallelism"] = 20
    suspended["spec"]["completions"] = 20
    suspended["metadata"].setdefault("annotations", {})["kueue.x-k8s.io/job-min-parallelism"] = "5"
    admission = Admission("cq", (PodSetAssignment("main", {"cpu": "default"}, {"cpu": 9000}, 9),))
    flavors = {"default": ResourceFlavor("default")}
    view = job_view(suspended, keep_source=False)
    from_view = o.start_patch(view.as_object(), admission, flavors, "user-queue")
    started = merge(suspended, o.start_patch(suspended, admission, flavors, "user-queue"))
    assert merge(suspended, from_view) == started
    assert (started["spec"]["parallelism"], started["spec"]["completions"]) == (9, 20)
    workload = {"spec": {"podSets": [{"name": "main", "count": 20, "template": {}}]}}
    started_view = job_view(started, keep_source=False)
    stopped = merge(started, o.restore_patch(started_view.as_object(), workload))
    assert stopped["spec"]["parallelism"] == 20


def test_the_start_patch_from_the_kept_fields_is_the_one_from_the_whole_job():
    """The admission's patch, built from the trimmed view, does to the real Job exactly what
    the patch built from the whole Job does (jsonpatch computes both effects)."""
    suspended = copy.deepcopy(RUNNING)
    suspended["spec"]["suspend"] = True
    suspended["spec"]["template"]["spec"]["tolerations"] = [{"key": "a", "operator": "Exists"}]
    admission = Admission("cq", (PodSetAssignment("main", {"cpu": "spot"}, {"cpu": 3000}, 1),))
    flavors = {
        "spot": ResourceFlavor(
            "spot",
            node_labels={"pool": "spot"},
            tolerations=(Toleration("spot", "Exists", "", "NoSchedule"),),
        )
    }
    view = job_view(suspended, keep_source=False)
    from_view = o.start_patch(view.as_object(), admission, flavors, "user-queue")
    from_whole = o.start_patch(suspended, admission, flavors, "user-queue")
    started = merge(suspended, from_whole)
    assert merge(suspended, from_view) == started
    pod = started["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "spot"}
    assert pod["tolerations"] == [
        {"key": "a", "operator": "Exists"},
        {"key": "spot", "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert pod["containers"] == RUNNING["spec"]["template"]["spec"]["containers"]
