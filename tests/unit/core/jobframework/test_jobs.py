import copy
import hashlib

import jsonpatch
import pytest

from extender.core.api.models import PriorityClass, WorkloadPriorityClass
from extender.core.api.parse import ManifestError
from extender.core.jobframework.jobs import (
    pod_requests,
    queue_mutation,
    resolve_priority,
    workload_for,
    workload_name,
)


def container(requests=None, limits=None, **extra):
    res = {}
    if requests:
        res["requests"] = requests
    if limits:
        res["limits"] = limits
    return {"name": "c", "resources": res, **extra}


REQUEST_CASES = [
    (
        "containers add up",
        {"containers": [container({"cpu": "1"}), container({"cpu": "500m"})]},
        {"cpu": 1500},
    ),
    (
        "a missing request defaults to its limit",
        {"containers": [container(limits={"cpu": "2", "memory": "1Gi"}, requests={"cpu": "1"})]},
        {"cpu": 1000, "memory": 2**30},
    ),
    (
        "an init container larger than the containers sets the pod's need",
        {"containers": [container({"cpu": "1"})], "initContainers": [container({"cpu": "4"})]},
        {"cpu": 4000},
    ),
    (
        "an init container smaller than the containers does not add",
        {"containers": [container({"cpu": "3"})], "initContainers": [container({"cpu": "1"})]},
        {"cpu": 3000},
    ),
    (
        "a sidecar runs beside the containers and the later init containers",
        {
            "containers": [container({"cpu": "1"})],
            "initContainers": [
                container({"cpu": "1"}, restartPolicy="Always"),
                container({"cpu": "3"}),
            ],
        },
        {"cpu": 4000},
    ),
    (
        "pod overhead is added",
        {"containers": [container({"cpu": "1"})], "overhead": {"cpu": "250m"}},
        {"cpu": 1250},
    ),
]


@pytest.mark.parametrize(
    ("spec", "want"), [c[1:] for c in REQUEST_CASES], ids=[c[0] for c in REQUEST_CASES]
)
def test_pod_requests_count_like_kubernetes(spec, want):
    assert pod_requests(spec) == want


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        (
            {"containers": [container({"cpu": "-1"})]},
            "spec.template.spec.containers[0].resources.requests.cpu",
        ),
        (
            {"containers": [container(limits={"memory": "-1Gi"})]},
            "spec.template.spec.containers[0].resources.limits.memory",
        ),
        (
            {"containers": [], "initContainers": [container({"nvidia.com/gpu": "-2"})]},
            "spec.template.spec.initContainers[0].resources.requests.nvidia.com/gpu",
        ),
        ({"containers": [], "overhead": {"cpu": "-250m"}}, "spec.template.spec.overhead.cpu"),
    ],
    ids=["negative request", "negative limit", "negative init request", "negative overhead"],
)
def test_a_negative_request_is_refused_as_the_api_server_would(spec, path):
    # Counted, it would hand out quota to everyone else in the ClusterQueue.
    with pytest.raises(ManifestError) as err:
        pod_requests(spec)
    assert err.value.path == path
    assert err.value.message.startswith("must be greater than or equal to 0, got '-")


def job(name="sample-job-abcde", labels=None, spec=None, annotations=None):
    meta = {
        "name": name,
        "namespace": "default",
        "labels": {"kueue.x-k8s.io/queue-name": "user-queue", **(labels or {})},
    }
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": spec
        or {
            "template": {
                "spec": {"containers": [container({"cpu": "3"})], "restartPolicy": "Never"}
            }
        },
    }


def test_workload_name_is_kueues():
    # Kind, group, name and uid joined by newlines (Kueue jobframework/workload_names.go).
    digest = hashlib.sha1(b"Job\nbatch\nsample-job-abcde\n1234").hexdigest()[:5]
    assert (
        workload_name("Job", "batch", "sample-job-abcde", "1234")
        == f"job-sample-job-abcde-{digest}"
    )
    long = workload_name("JobSet", "jobset.x-k8s.io", "x" * 300, "u")
    assert len(long) == 253
    assert long.startswith("jobset-xxx")


def test_job_workload_has_one_pod_set_counting_parallelism_and_completions():
    wl = workload_for(
        job(
            spec={
                "parallelism": 4,
                "completions": 2,
                "template": {"spec": {"containers": [container({"cpu": "1"})]}},
            }
        ),
        uid="u1",
        creation_time=5.0,
    )
    assert [(p.name, p.count, dict(p.requests)) for p in wl.pod_sets] == [
        ("main", 2, {"cpu": 1000})
    ]
    assert wl.queue_name == "user-queue"
    assert wl.creation_time == 5.0
    assert wl.name.startswith("job-sample-job-abcde-")


def test_jobset_has_a_pod_set_per_replicated_job():
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "train", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "Driver",
                    "replicas": 1,
                    "template": {
                        "spec": {"template": {"spec": {"containers": [container({"cpu": "1"})]}}}
                    },
                },
                {
                    "name": "workers",
                    "replicas": 3,
                    "template": {
                        "spec": {
                            "parallelism": 2,
                            "template": {
                                "spec": {
                                    "containers": [container({"nvidia.com/gpu": "8"})],
                                    "nodeSelector": {"pool": "a100"},
                                }
                            },
                        }
                    },
                },
            ]
        },
    }
    wl = workload_for(jobset, uid="u", creation_time=0)
    assert [(p.name, p.count) for p in wl.pod_sets] == [("driver", 1), ("workers", 6)]
    assert wl.pod_sets[1].total() == {"nvidia.com/gpu": 48}
    assert wl.pod_sets[1].node_selector == {"pool": "a100"}
    assert wl.name.startswith("jobset-train-")


WPC = {"high": WorkloadPriorityClass("high", 1000)}
PC = {
    "batch": PriorityClass("batch", 10),
    "floor": PriorityClass("floor", -5, global_default=True),
    "base": PriorityClass("base", 1, global_default=True),
}


@pytest.mark.parametrize(
    ("labels", "pod_class", "pcs", "want"),
    [
        ({"kueue.x-k8s.io/priority-class": "high"}, "batch", PC, (1000, "high")),
        ({}, "batch", PC, (10, "batch")),
        ({}, None, PC, (-5, "floor")),
        ({}, None, {}, (0, None)),
    ],
    ids=[
        "WorkloadPriorityClass label wins",
        "then the pod's priorityClassName",
        "then the lowest globalDefault",
        "else zero",
    ],
)
def test_priority_precedence(labels, pod_class, pcs, want):
    value, name, _ = resolve_priority(labels, pod_class, WPC, pcs)
    assert (value, name) == want


def test_missing_workload_priority_class_is_a_clear_error():
    with pytest.raises(ManifestError) as err:
        resolve_priority({"kueue.x-k8s.io/priority-class": "nope"}, None, WPC, PC)
    assert "nope" in err.value.message
    assert "priority-class" in err.value.path


def test_mutation_suspends_records_and_is_idempotent():
    original = job(annotations={"team": "a"})
    original["spec"]["suspend"] = False
    patch = queue_mutation(original)
    once = jsonpatch.apply_patch(original, patch)
    twice = jsonpatch.apply_patch(once, patch)
    assert once == twice
    assert once["spec"]["suspend"] is True
    assert once["metadata"]["annotations"] == {"team": "a", "tower.dev/original-suspend": "false"}
    # Everything else is left alone.
    del once["spec"]["suspend"], original["spec"]["suspend"]
    once["metadata"]["annotations"].pop("tower.dev/original-suspend")
    assert once == original


def test_mutation_of_an_object_without_annotations_or_suspend():
    original = job()
    mutated = jsonpatch.apply_patch(original, queue_mutation(original))
    assert mutated["metadata"]["annotations"] == {"tower.dev/original-suspend": "false"}
    assert mutated["spec"]["suspend"] is True
    assert jsonpatch.apply_patch(mutated, queue_mutation(mutated)) == mutated


def test_mutation_leaves_unqueued_jobs_alone_unless_a_default_queue_applies():
    plain = job()
    del plain["metadata"]["labels"]
    assert queue_mutation(plain) == []
    defaulted = jsonpatch.apply_patch(copy.deepcopy(plain), queue_mutation(plain, "default"))
    assert defaulted["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "default"}
    assert defaulted["spec"]["suspend"] is True


def test_already_suspended_job_keeps_true_as_its_original():
    original = job()
    original["spec"]["suspend"] = True
    mutated = jsonpatch.apply_patch(original, queue_mutation(original))
    assert mutated["metadata"]["annotations"]["tower.dev/original-suspend"] == "true"


def test_the_legacy_queue_name_annotation_is_normalised_to_the_label():
    old_style = job()
    del old_style["metadata"]["labels"]
    old_style["metadata"]["annotations"] = {"kueue.x-k8s.io/queue-name": "user-queue"}
    mutated = jsonpatch.apply_patch(old_style, queue_mutation(old_style))
    assert mutated["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "user-queue"}
    assert mutated["spec"]["suspend"] is True
    assert jsonpatch.apply_patch(mutated, queue_mutation(mutated)) == mutated
