"""The job framework's adapters and registry, table-driven: what each kind reads and writes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender.core.api.parse import ManifestError
from extender.core.jobframework import registry
from extender.core.jobframework.adapter import PodSetInfo, merge, placed, restored
from extender.core.jobframework.batch_job import BatchJob
from extender.core.jobframework.jobset import JobSetAdapter

JOB = BatchJob()
JOBSET = JobSetAdapter()


def pod(cpu: str = "1", **spec: Any) -> dict[str, Any]:
    return {
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], **spec}
    }


def job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"template": pod(), **spec},
    }


def jobset(*replicated: tuple[str, int, int]) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "ns"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": name,
                    "replicas": replicas,
                    "template": {"spec": {"parallelism": parallelism, "template": pod()}},
                }
                for name, replicas, parallelism in replicated
            ]
        },
    }


@pytest.mark.parametrize(
    ("adapter", "obj", "want"),
    [
        (JOB, job(), [("main", 1, None)]),
        (JOB, job(parallelism=4), [("main", 4, None)]),
        (JOB, job(parallelism=4, completions=2), [("main", 2, None)]),
        (
            JOB,
            {
                **job(parallelism=4),
                "metadata": {"annotations": {"kueue.x-k8s.io/job-min-parallelism": "2"}},
            },
            [("main", 4, 2)],
        ),
        (
            JOBSET,
            jobset(("Leader", 1, 1), ("workers", 2, 3)),
            [("leader", 1, None), ("workers", 6, None)],
        ),
    ],
    ids=["job", "job-parallelism", "job-completions-cap", "job-min-parallelism", "jobset"],
)
def test_pod_sets_in_kueues_order(adapter, obj, want):
    assert [(p.name, p.count, p.min_count) for p in adapter.pod_sets(obj)] == want


@pytest.mark.parametrize(
    ("adapter", "obj", "path"),
    [
        (JOB, job(parallelism=-1), "spec.parallelism"),
        (JOB, job(completions="2"), "spec.completions"),
        (
            JOB,
            {**job(), "metadata": {"annotations": {"kueue.x-k8s.io/job-min-parallelism": "x"}}},
            'metadata.annotations["kueue.x-k8s.io/job-min-parallelism"]',
        ),
        *(
            (
                JOB,
                {
                    **job(parallelism=4),
                    "metadata": {"annotations": {"kueue.x-k8s.io/job-min-parallelism": value}},
                },
                'metadata.annotations["kueue.x-k8s.io/job-min-parallelism"]',
            )
            for value in ("0", "4", "5", "-1")  # Kueue: between 0 and the pod count, exclusive
        ),
        (JOBSET, {**jobset(), "spec": {"replicatedJobs": []}}, "spec.replicatedJobs"),
        (
            JOBSET,
            {**jobset(), "spec": {"replicatedJobs": [{"replicas": 1}]}},
            "spec.replicatedJobs[0].name",
        ),
    ],
)
def test_a_wrong_field_is_named(adapter, obj, path):
    with pytest.raises(ManifestError) as err:
        adapter.pod_sets(obj)
    assert err.value.path == path


@pytest.mark.parametrize(
    ("adapter", "status", "active", "finished"),
    [
        (JOB, {}, False, None),
        (JOB, {"active": 2}, True, None),
        (
            JOB,
            {"conditions": [{"type": "Complete", "status": "True"}]},
            False,
            ("Succeeded", "Job finished successfully"),
        ),
        (
            JOB,
            {"conditions": [{"type": "Failed", "status": "True", "message": "boom"}]},
            False,
            ("Failed", "boom"),
        ),
        (JOB, {"conditions": [{"type": "Complete", "status": "False"}]}, False, None),
        (
            JOBSET,
            {"replicatedJobsStatus": [{"name": "w", "active": 0}, {"name": "x", "active": 1}]},
            True,
            None,
        ),
        (
            JOBSET,
            {"conditions": [{"type": "Completed", "status": "True"}]},
            False,
            ("Succeeded", "Job finished successfully"),
        ),
    ],
)
def test_running_and_finished_as_each_kind_says(adapter, status, active, finished):
    obj = {**(job() if adapter is JOB else jobset(("w", 1, 1))), "status": status}
    assert adapter.is_active(obj) is active
    assert adapter.finished(obj) == finished


@pytest.mark.parametrize(
    ("adapter", "owners", "child"),
    [
        (JOB, [], False),
        (
            JOB,
            [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "controller": True}],
            True,
        ),
        (JOB, [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet"}], False),
        (JOB, [{"apiVersion": "example.com/v1", "kind": "JobSet", "controller": True}], False),
        (JOBSET, [{"apiVersion": "batch/v1", "kind": "Job", "controller": True}], False),
    ],
    ids=["no-owner", "jobset-child", "not-controller", "other-group", "jobset-owned-by-job"],
)
def test_a_child_of_a_managed_parent_is_its_parents(adapter, owners, child):
    obj = job() if adapter is JOB else jobset(("w", 1, 1))
    obj["metadata"]["ownerReferences"] = owners
    assert adapter.is_child(obj) is child


INFO = PodSetInfo(
    count=1,
    node_selector={"pool": "a"},
    tolerations=[{"key": "gpu", "operator": "Exists"}],
    labels={"kueue.x-k8s.io/podset": "main"},
    annotations={"kueue.x-k8s.io/workload": "wl"},
    scheduling_gates=[{"name": "g"}],
    scheduler_name="tower",
)


def test_a_start_places_each_pod_set_and_a_restore_puts_back_the_original():
    obj = job()
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"own": "x"}
    original = copy.deepcopy(obj["spec"]["template"])
    patch = JOB.start_patch(obj, {"main": INFO})
    assert patch["spec"]["suspend"] is False
    template = patch["spec"]["template"]
    assert template["spec"]["nodeSelector"] == {"pool": "a"}  # merged: own stays, unchanged
    assert template["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert template["spec"]["schedulingGates"] == [{"name": "g"}]
    assert template["spec"]["schedulerName"] == "tower"
    assert template["metadata"]["labels"] == {"kueue.x-k8s.io/podset": "main"}
    started = merge(obj, patch)
    assert started["spec"]["template"]["spec"]["nodeSelector"] == {"own": "x", "pool": "a"}
    back = JOB.restore_patch(started, {"main": original}, {"main": 1})
    restored_obj = merge(started, back)
    restored_obj = _drop_nulls(restored_obj)
    assert restored_obj["spec"]["template"]["spec"]["nodeSelector"] == {"own": "x"}
    for gone in ("tolerations", "schedulingGates", "schedulerName"):
        assert gone not in restored_obj["spec"]["template"]["spec"]
    assert "labels" not in restored_obj["spec"]["template"].get("metadata", {})


MIN = "kueue.x-k8s.io/job-min-parallelism"
FOLLOW = "kueue.x-k8s.io/job-completions-equal-parallelism"


@pytest.mark.parametrize(
    ("annotations", "admitted", "started", "stopped"),
    [
        # Kueue's documentation example: 20 asked, at least 5, 9 admitted.
        pytest.param({MIN: "5"}, 9, (9, 20), (20, 20), id="partially-admitted"),
        pytest.param({MIN: "5"}, 20, (20, 20), (20, 20), id="admitted-whole"),
        pytest.param({}, 20, (20, 20), (20, 20), id="no-min-parallelism"),
        pytest.param({MIN: "five"}, 20, (20, 20), (20, 20), id="min-parallelism-not-a-number"),
        pytest.param({MIN: "5", FOLLOW: "true"}, 9, (9, 9), (20, 20), id="completions-follow"),
        pytest.param({MIN: "5", FOLLOW: "false"}, 9, (9, 20), (20, 20), id="completions-stay"),
    ],
)
def test_a_job_runs_with_the_admitted_parallelism_and_a_stop_puts_back_its_own(
    annotations, admitted, started, stopped
):
    obj = job(parallelism=20, completions=20)
    obj["metadata"]["annotations"] = dict(annotations)
    running = merge(obj, JOB.start_patch(obj, {"main": PodSetInfo(count=admitted)}))
    assert running["spec"]["suspend"] is False
    assert (running["spec"]["parallelism"], running["spec"]["completions"]) == started
    # The stop restores the count the Workload recorded: the Job's own min(parallelism,
    # completions), 20.
    back = merge(
        running, JOB.restore_patch(running, {"main": obj["spec"]["template"]}, {"main": 20})
    )
    assert (back["spec"]["parallelism"], back["spec"]["completions"]) == stopped


def test_a_jobset_start_writes_every_replicated_job_and_keeps_their_other_fields():
    obj = jobset(("leader", 1, 1), ("workers", 2, 2))
    patch = JOBSET.start_patch(obj, {"workers": INFO})
    replicated = patch["spec"]["replicatedJobs"]
    assert [r["name"] for r in replicated] == ["leader", "workers"]
    assert replicated[1]["replicas"] == 2
    assert replicated[1]["template"]["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "a"}
    assert "nodeSelector" not in replicated[0]["template"]["spec"]["template"]["spec"]
    assert (
        obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"].get("nodeSelector")
        is None
    )  # the object itself is not changed


@pytest.mark.parametrize(
    ("path", "suspended_obj", "patch"),
    [
        (("spec", "suspend"), {"spec": {"suspend": True}}, {"spec": {"suspend": True}}),
        (
            ("spec", "runPolicy", "suspend"),
            {"spec": {"runPolicy": {"suspend": True}}},
            {"spec": {"runPolicy": {"suspend": True}}},
        ),
    ],
)
def test_the_suspend_field_is_where_the_kind_keeps_it(path, suspended_obj, patch):
    class Kind(BatchJob):
        suspend_path = path

    assert Kind().is_suspended(suspended_obj) is True
    assert Kind().is_suspended({"spec": {}}) is False
    assert Kind().suspend_patch(True) == patch


def test_placed_and_restored_are_inverse_on_the_placement_fields():
    template = pod(nodeSelector={"a": "1"}, tolerations=[{"key": "t", "operator": "Exists"}])
    template["metadata"] = {"labels": {"app": "x"}}
    assert _drop_nulls(restored(placed(template, INFO), template)) == template


def _drop_nulls(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _drop_nulls(v) for k, v in obj.items() if v is not None}
    return obj


# ----- the registry ------------------------------------------------------------------------


def test_kueues_default_integrations_and_those_tower_manages():
    assert len(registry.DEFAULT_FRAMEWORKS) == 12
    assert "kubeflow.org/pytorchjob" not in registry.DEFAULT_FRAMEWORKS  # off, as in Kueue
    assert [a.framework for a in registry.enabled()] == [
        "batch/job",
        "kubeflow.org/mpijob",
        "ray.io/rayjob",
        "ray.io/raycluster",
        "ray.io/rayservice",
        "jobset.x-k8s.io/jobset",
        "workload.codeflare.dev/appwrapper",
        "trainer.kubeflow.org/trainjob",
        "pod",
    ]
    assert [p.framework for p in registry.enabled_parents()] == [
        "deployment",
        "statefulset",
        "leaderworkerset.x-k8s.io/leaderworkerset",
    ]
    assert [p.kind for p in registry.group_parents()] == ["StatefulSet", "LeaderWorkerSet"]
    assert registry.unmanaged() == ()
    assert registry.enabled(["jobset.x-k8s.io/jobset"]) == (JOBSET_ADAPTER,)
    assert registry.unknown(["batch/job", "ray.io/rayjob", "example.com/nope"]) == (
        "example.com/nope",
    )


JOBSET_ADAPTER = registry.ADAPTERS["jobset.x-k8s.io/jobset"]


@pytest.mark.parametrize(
    ("framework", "verb", "path"),
    [
        ("batch/job", "mutate", "/mutate-batch-v1-job"),
        ("batch/job", "validate", "/validate-batch-v1-job"),
        ("jobset.x-k8s.io/jobset", "mutate", "/mutate-jobset-x-k8s-io-v1alpha2-jobset"),
    ],
)
def test_kueues_webhook_paths(framework, verb, path):
    assert registry.webhook_path(registry.ADAPTERS[framework], verb) == path


def test_the_core_group_has_kueues_double_dash():
    class Pod(BatchJob):
        framework, group, version, kind, plural = "pod", "", "v1", "Pod", "pods"

    assert registry.webhook_path(Pod(), "mutate") == "/mutate--v1-pod"


def test_an_object_finds_its_adapter_by_api_version_and_kind():
    assert registry.for_object(job()) is registry.ADAPTERS["batch/job"]
    assert registry.for_object(jobset()) is JOBSET_ADAPTER
    assert registry.for_object({"apiVersion": "example.com/v1", "kind": "Job"}) is None


@pytest.mark.parametrize(
    ("kind", "obj", "ready"),
    [
        ("Job", {"spec": {"parallelism": 2}, "status": {"ready": "2"}}, False),
        ("Job", {"spec": {"parallelism": "x"}, "status": {"ready": 2}}, False),
        ("Job", {"spec": [], "status": {"ready": True}}, False),
        ("Job", {"spec": {"parallelism": 2}, "status": {"ready": 1, "succeeded": 1}}, True),
        ("JobSet", {"spec": {"replicatedJobs": [{"name": ["a"], "replicas": 1}]}}, False),
        (
            "JobSet",
            {
                "spec": {"replicatedJobs": [{"name": "a", "replicas": "1"}]},
                "status": {"replicatedJobsStatus": [{"name": "a", "ready": "1"}]},
            },
            False,
        ),
        (
            "JobSet",
            {
                "spec": {"replicatedJobs": [{"name": "a", "replicas": 2}]},
                "status": {"replicatedJobsStatus": [[1], {"name": "a", "ready": 2}]},
            },
            True,
        ),
    ],
)
def test_pods_ready_reads_malformed_objects_without_an_error(kind, obj, ready):
    """Watched objects are not trusted: readiness is read from every job, whatever it holds
    (a field of the wrong type counts as nothing)."""
    adapter = next(a for a in registry.ADAPTERS.values() if a.kind == kind)
    assert adapter.pods_ready(obj) is ready
