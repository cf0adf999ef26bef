"""The elastic-job policy (Kueue's pkg/workloadslicing and its webhooks' rules), as tables."""

from __future__ import annotations

import jsonpatch
import pytest

from extender.core.jobframework import registry
from extender.core.jobframework import slices as s

JOB = registry.ADAPTERS["batch/job"]
RAYCLUSTER = registry.ADAPTERS["ray.io/raycluster"]
RAYJOB = registry.ADAPTERS["ray.io/rayjob"]
JOBSET = registry.ADAPTERS["jobset.x-k8s.io/jobset"]
ON: dict[str, bool] = {}
OFF = {"ElasticJobsViaWorkloadSlices": False}


def one(
    name: str,
    count: int,
    *,
    created: str = "2026-01-01T00:00:00Z",
    quota: bool = False,
    evicted: bool = False,
    replaces: str | None = None,
) -> s.Slice:
    return s.Slice(f"ns/{name}", f"uid-{name}", created, (("main", count),), quota, evicted,
                   replaces, name)  # fmt: skip


T1, T2, T3 = "2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z", "2026-01-01T00:00:03Z"


@pytest.mark.parametrize(
    ("slices", "want_selected", "want_active", "want_finished"),
    [
        pytest.param([], None, None, [], id="none"),
        pytest.param([one("a", 3, quota=True)], "a", "a", [], id="one-admitted"),
        pytest.param([one("a", 3, evicted=True, quota=True)], "a", None, [], id="one-evicted"),
        pytest.param(
            [one("a", 3, created=T1, quota=True), one("b", 5, created=T2, replaces="ns/a")],
            "b", "a", [], id="a-pending-replacement",
        ),
        pytest.param(
            [one("a", 3, created=T1, quota=True),
             one("b", 5, created=T2, quota=True, replaces="ns/a")],
            "b", "b", [("a", s.REPLACED)], id="replaced-by-an-admitted-slice",
        ),
        pytest.param(
            [one("a", 3, created=T1), one("b", 5, created=T2)],
            "b", None, [("a", s.OUT_OF_SYNC)], id="two-pending-the-newest-kept",
        ),
        pytest.param(
            [one("a", 3, created=T1, quota=True, evicted=True),
             one("b", 5, created=T2, replaces="ns/a")],
            "b", None, [("a", s.REPLACED)], id="an-evicted-old-slice-is-finished",
        ),
        pytest.param(
            [one("a", 3, created=T1, quota=True), one("b", 5, created=T2, replaces="ns/a"),
             one("c", 6, created=T3, replaces="ns/a")],
            "b", "a", [("c", s.OUT_OF_SYNC)], id="a-forked-replacement-the-first-kept",
        ),
    ],
)  # fmt: skip
def test_a_jobs_slices_sorted_out_as_kueue_normalizes_them(
    slices, want_selected, want_active, want_finished
):
    chain = s.chain(slices, "job-uid")
    assert (chain.selected.name if chain.selected else None) == want_selected
    assert (chain.active.name if chain.active else None) == want_active
    assert [(x.name, reason) for x, reason, _ in chain.finish] == want_finished


def test_a_replaced_slice_is_finished_with_kueues_message():
    chain = s.chain(
        [one("a", 3, created=T1, quota=True), one("b", 5, created=T2, quota=True, replaces="ns/a")],
        "job-uid",
    )
    [(_, _, message)] = chain.finish
    assert message == (
        "Replaced to accommodate a workload (UID: uid-b, JobUID: job-uid) due to workload "
        "slice aggregation"
    )


@pytest.mark.parametrize(
    ("job", "selected", "want"),
    [
        pytest.param((("main", 3),), None, s.CREATE, id="first"),
        pytest.param((("main", 3),), one("a", 3, quota=True), s.FOLLOW, id="same"),
        pytest.param((("main", 2),), one("a", 3, quota=True), s.UPDATE, id="scale-down"),
        pytest.param((("main", 5),), one("a", 3, quota=True), s.SCALE_UP, id="scale-up"),
        pytest.param((("main", 5),), one("a", 3), s.UPDATE, id="waiting-follows-in-place"),
        pytest.param((("other", 3),), one("a", 3, quota=True), s.INCOMPATIBLE, id="renamed"),
    ],
)
def test_what_a_change_of_counts_calls_for(job, selected, want):
    assert s.decide(job, selected) == want


def test_scaled_down_means_fewer_somewhere_and_more_nowhere():
    assert s.scaled_down({"a": 3, "b": 2}, {"a": 2, "b": 2})
    assert not s.scaled_down({"a": 3, "b": 2}, {"a": 2, "b": 3})
    assert not s.scaled_down({"a": 3}, {"a": 3})


def test_a_slices_name_takes_the_jobs_generation():
    first = s.slice_name("Job", "batch", "sample-elastic-job", "u1", 1)
    assert first.startswith("job-sample-elastic-job-")
    assert len(first) == len("job-sample-elastic-job-") + 5
    assert first != s.slice_name("Job", "batch", "sample-elastic-job", "u1", 2)


def elastic_job(**annotations: str) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "annotations": {s.ELASTIC_JOB: "true", **annotations}},
        "spec": {"parallelism": 3, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }


def test_kueues_refusals_at_create():
    assert s.create_problems(JOB, elastic_job(), ON) == []
    [partial] = s.create_problems(JOB, elastic_job(**{s.MIN_PARALLELISM: "2"}), ON)
    assert partial == (
        'metadata.annotations[kueue.x-k8s.io/job-min-parallelism]: Invalid value: "2": '
        "partial admission and elastic job cannot be used together"
    )
    assert s.create_problems(JOB, elastic_job(**{s.MIN_PARALLELISM: "2"}), OFF) == []
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"annotations": {s.ELASTIC_JOB: "true"}}, "spec": {}}  # fmt: skip
    assert s.create_problems(JOBSET, jobset, ON) == [
        "metadata.annotations[kueue.x-k8s.io/elastic-job]: Forbidden: elastic job is not "
        'supported for "jobset.x-k8s.io/v1alpha2, Kind=JobSet"'
    ]


def ray_cluster(elastic: bool) -> dict:
    meta = {"annotations": {s.ELASTIC_JOB: "true"}} if elastic else {}
    template = {"spec": {"containers": [{"name": "c"}]}}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc", **meta},
        "spec": {
            "enableInTreeAutoscaling": True,
            "headGroupSpec": {"template": template},
            "workerGroupSpecs": [{"groupName": "w", "template": template}],
        },
    }


def test_an_autoscaling_raycluster_is_refused_unless_elastic_with_the_gate_on():
    assert s.create_problems(RAYCLUSTER, ray_cluster(True), ON) == []
    refusal = (
        "spec.enableInTreeAutoscaling: Invalid value: true: a kueue-managed RayCluster can use "
        "autoscaling only as an elastic job: enable the ElasticJobsViaWorkloadSlices feature "
        'gate and set the "kueue.x-k8s.io/elastic-job": "true" annotation'
    )
    assert s.create_problems(RAYCLUSTER, ray_cluster(True), OFF) == [refusal]
    assert s.create_problems(RAYCLUSTER, ray_cluster(False), ON) == [refusal]


def test_the_elastic_gate_is_put_on_every_pod_template_once():
    obj = ray_cluster(True)
    ops = s.gate_ops(RAYCLUSTER, obj)
    gated = jsonpatch.apply_patch(obj, ops)
    head = gated["spec"]["headGroupSpec"]["template"]["spec"]["schedulingGates"]
    worker = gated["spec"]["workerGroupSpecs"][0]["template"]["spec"]["schedulingGates"]
    assert head == worker == [{"name": s.SCHEDULING_GATE}]
    assert s.gate_ops(RAYCLUSTER, gated) == []  # applied twice, the same object
    job = jsonpatch.apply_patch(elastic_job(), s.gate_ops(JOB, elastic_job()))
    assert job["spec"]["template"]["spec"]["schedulingGates"] == [{"name": s.SCHEDULING_GATE}]


def test_kueues_refusals_of_an_update():
    old, new = elastic_job(), elastic_job()
    del new["metadata"]["annotations"][s.ELASTIC_JOB]
    assert s.update_problems(JOB, old, new, ON) == [
        "metadata.annotations[kueue.x-k8s.io/elastic-job]: Invalid value: false: field is immutable"
    ]
    assert s.update_problems(JOB, old, new, OFF) == []  # ignored as Kueue ignores it
    partial = elastic_job(**{s.MIN_PARALLELISM: "1"})
    del partial["metadata"]["annotations"][s.ELASTIC_JOB]
    grown = {**partial, "spec": {**partial["spec"], "parallelism": 4}}
    assert s.update_problems(JOB, partial, grown, ON) == [
        "spec.parallelism: Forbidden: cannot change when partial admission is enabled and the "
        "job is not suspended"
    ]
    suspended = {**partial, "spec": {**partial["spec"], "suspend": True}}
    assert s.update_problems(JOB, suspended, grown, ON) == []


@pytest.mark.parametrize(
    ("pods", "granted", "want"),
    [
        pytest.param([("p0", "main", True), ("p1", "main", True)], {"main": 1}, ["p0"], id="one"),
        pytest.param([("p0", "main", False), ("p1", "main", True)], {"main": 1}, [], id="full"),
        pytest.param(
            [("p2", "main", True), ("p1", "main", True), ("p0", "main", False)],
            {"main": 3}, ["p1", "p2"], id="lowest-names-first",
        ),
        pytest.param([("h", "head", True), ("w", "w", True)], {"head": 1}, ["h"], id="per-podset"),
    ],
)  # fmt: skip
def test_gated_pods_let_through_as_far_as_the_slice_grants(pods, granted, want):
    assert s.to_let_through(pods, granted) == want


def test_an_elastic_rayservice_is_gated_and_its_autoscaling_accepted_as_kueue_does():
    service = registry.ADAPTERS["ray.io/rayservice"]
    cluster = ray_cluster(True)
    obj = {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": cluster["metadata"],
           "spec": {"rayClusterConfig": cluster["spec"]}}  # fmt: skip
    assert s.create_problems(service, obj, ON) == []
    gated = jsonpatch.apply_patch(obj, s.gate_ops(service, obj))
    config = gated["spec"]["rayClusterConfig"]
    assert config["headGroupSpec"]["template"]["spec"]["schedulingGates"] == [
        {"name": s.SCHEDULING_GATE}
    ]
    assert s.create_problems(service, obj, OFF) == [
        "spec.rayClusterConfig.enableInTreeAutoscaling: Invalid value: true: a kueue managed "
        "job should only use autoscaling when workload slicing is enabled"
    ]
