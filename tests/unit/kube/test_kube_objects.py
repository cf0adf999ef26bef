"""What the controller writes: Workloads from Jobs, admission, start and restore patches."""

from __future__ import annotations

import copy

import pytest

from extender.core.api.labels import Toleration
from extender.core.api.models import Admission, PodSetAssignment, ResourceFlavor
from extender.core.jobframework.jobs import workload_for
from extender.kube.api import objects as o
from tests.controller.test_api_double import load


def seed_job():
    job = copy.deepcopy(load("lifecycle/01-job.create-response.json"))
    return job


def test_workload_is_owned_by_its_job_and_keeps_the_template():
    job = seed_job()
    model = workload_for(job, uid=job["metadata"]["uid"], creation_time=0)
    wl = o.workload_manifest(job, model)
    owner = wl["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "Job",
        job["metadata"]["name"],
        job["metadata"]["uid"],
    )
    assert owner["controller"] is True
    assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == job["metadata"]["uid"]
    assert wl["metadata"]["name"] == model.name
    assert wl["spec"]["queueName"] == "user-queue"
    template = wl["spec"]["podSets"][0]["template"]
    assert template["spec"] == job["spec"]["template"]["spec"]
    assert set(template.get("metadata", {})) <= {"labels", "annotations"}


def test_a_workloads_template_has_one_env_entry_per_name_the_last_given():
    """Kueue's e2e job_test.go "Should deduplicate env variables": the Workload keeps the
    value the kubelet would set; the Job keeps what its user wrote."""
    job = seed_job()
    env = [
        {"name": "TEST_ENV", "value": "test1"},
        {"name": "OTHER", "value": "x"},
        {"name": "TEST_ENV", "value": "test2"},
    ]
    job["spec"]["template"]["spec"]["containers"][0]["env"] = env
    job["spec"]["template"]["spec"]["initContainers"] = [{"name": "init", "env": env * 2}]
    model = workload_for(job, uid=job["metadata"]["uid"], creation_time=0)
    spec = o.workload_manifest(job, model)["spec"]["podSets"][0]["template"]["spec"]
    want = [{"name": "TEST_ENV", "value": "test2"}, {"name": "OTHER", "value": "x"}]
    assert spec["containers"][0]["env"] == want
    assert spec["initContainers"][0]["env"] == want
    assert len(job["spec"]["template"]["spec"]["containers"][0]["env"]) == 3


ADMISSION = Admission(
    "cluster-queue",
    (
        PodSetAssignment(
            "main", {"cpu": "a100", "memory": "a100"}, {"cpu": 3000, "memory": 4 << 30}, 1
        ),
    ),
)
A100 = ResourceFlavor(
    "a100",
    node_labels={"gpu": "a100"},
    tolerations=(Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),),
)


def test_start_patch_unsuspends_and_places_the_pods():
    job = seed_job()
    job["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "z1"}
    patch = o.start_patch(job, ADMISSION, {"a100": A100}, "user-queue")
    started = merge(job, patch)
    assert started["spec"]["suspend"] is False
    pod = started["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"zone": "z1", "gpu": "a100"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert pod["containers"] == job["spec"]["template"]["spec"]["containers"]
    assert "containers" not in patch["spec"]["template"].get("spec", {})  # only what changes
    labels = started["spec"]["template"]["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/podset"] == "main"
    assert labels["kueue.x-k8s.io/cluster-queue-name"] == "cluster-queue"
    assert started["metadata"]["annotations"]["tower.dev/cluster-queue"] == "cluster-queue"


def test_a_placed_workloads_pods_name_it_and_may_go_to_the_extenders_scheduler():
    job = seed_job()
    patch = o.start_patch(
        job,
        ADMISSION,
        {"a100": A100},
        "user-queue",
        workload="job-sample-abc12",
        scheduler_name="tower-scheduler",
    )
    template = merge(job, patch)["spec"]["template"]
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == "job-sample-abc12"
    assert template["spec"]["schedulerName"] == "tower-scheduler"
    plain = merge(job, o.start_patch(job, ADMISSION, {"a100": A100}, "user-queue"))
    assert plain["spec"]["template"]["spec"]["schedulerName"] == "default-scheduler"  # its own
    assert "annotations" not in plain["spec"]["template"].get("metadata", {})
    # An eviction gives the Job its own template back (schedulerName included).
    model = workload_for(job, uid=job["metadata"]["uid"], creation_time=0)
    started = merge(job, patch)
    restored = merge(started, o.restore_patch(started, o.workload_manifest(job, model)))
    assert restored["spec"]["template"] == job["spec"]["template"]


def merge(target, patch):
    from tests.apidouble.server import merge_patch

    return merge_patch(target, patch)


def test_restore_patch_undoes_the_start_patch():
    job = seed_job()
    model = workload_for(job, uid=job["metadata"]["uid"], creation_time=0)
    wl = o.workload_manifest(job, model)
    started = merge(job, o.start_patch(job, ADMISSION, {"a100": A100}, "user-queue"))
    restored = merge(started, o.restore_patch(started, wl))
    assert restored["spec"]["template"] == job["spec"]["template"]
    assert "tower.dev/cluster-queue" not in (restored["metadata"].get("annotations") or {})


def test_admission_round_trips_through_the_status():
    status = {"status": {"admission": o.admission_dict(ADMISSION)}}
    assert status["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] == {
        "cpu": "3",
        "memory": "4Gi",
    }
    assert o.admission_of(status) == ADMISSION


@pytest.mark.parametrize(
    "broken",
    [
        {"clusterQueue": "cq", "podSetAssignments": [{"resourceUsage": {"cpu": "lots"}}]},
        {"clusterQueue": "cq", "podSetAssignments": "x"},
        {"podSetAssignments": []},
        "cq",
    ],
)
def test_a_broken_admission_is_none_not_a_crash(broken):
    assert o.admission_of({"status": {"admission": broken}}) is None


def test_transition_time_moves_only_when_the_status_changes():
    obj = {
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "reason": "Pending",
                    "message": "old",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        }
    }
    same = o.with_conditions(obj, 1e9, ("QuotaReserved", "False", "WaitingForQuota", "new"))
    assert same[0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert same[0]["message"] == "new"
    flipped = o.with_conditions(obj, 1e9, ("QuotaReserved", "True", "QuotaReserved", "ok"))
    assert flipped[0]["lastTransitionTime"] == "2001-09-09T01:46:40Z"


@pytest.mark.parametrize(
    ("conditions", "want"),
    [
        ([{"type": "Complete", "status": "True"}], (True, "Succeeded")),
        ([{"type": "Failed", "status": "True", "message": "backoff"}], (True, "Failed")),
        ([{"type": "Complete", "status": "False"}], (False, "")),
        ([{"type": "Suspended", "status": "True"}], (False, "")),
        ([], (False, "")),
    ],
)
def test_finished_from_job_conditions(conditions, want):
    finished, reason, _ = o.is_finished({"status": {"conditions": conditions}})
    assert (finished, reason) == want


def _admitted_at(stamp: str, past: int | None = None) -> dict:
    status: dict = {
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "lastTransitionTime": stamp},
            {"type": "Admitted", "status": "True", "lastTransitionTime": stamp},
        ]
    }
    if past is not None:
        status["accumulatedPastExecutionTimeSeconds"] = past
    return {"status": status}


@pytest.mark.parametrize(
    ("workload", "want"),
    [
        (_admitted_at("2026-01-01T00:00:00Z"), 90),  # the first admission's seconds
        (_admitted_at("2026-01-01T00:00:00Z", past=10), 100),  # added to the earlier ones
    ],
)
def test_an_admission_that_ends_adds_its_seconds(workload, want):
    now = o.seconds_at("2026-01-01T00:01:30.700Z")
    status = o.requeue_patch(workload, "Preempted", "Preempted", now)["status"]
    assert status["accumulatedPastExecutionTimeSeconds"] == want


def test_a_requeue_with_no_admission_adds_nothing():
    workload = _admitted_at("2026-01-01T00:00:00Z", past=10)
    workload["status"]["conditions"][1]["status"] = "False"
    status = o.requeue_patch(workload, "Preempted", "Preempted", 1e9)["status"]
    assert "accumulatedPastExecutionTimeSeconds" not in status  # the patch keeps it as it is


def test_a_jobs_max_exec_time_label_becomes_the_workloads_field():
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "limited",
            "namespace": "default",
            "labels": {
                "kueue.x-k8s.io/queue-name": "user-queue",
                "kueue.x-k8s.io/max-exec-time-seconds": "45",
            },
        },
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
            }
        },
    }
    workload = workload_for(job, uid="u-1", creation_time=0.0)
    assert o.workload_manifest(job, workload)["spec"]["maximumExecutionTimeSeconds"] == 45
    del job["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"]
    unlimited = workload_for(job, uid="u-1", creation_time=0.0)
    assert "maximumExecutionTimeSeconds" not in o.workload_manifest(job, unlimited)["spec"]
