"""The Ray adapters, table-driven: Kueue's podSets of its RayJob, RayCluster and RayService
examples, the submitter by submission mode, the refusals, and how each kind is read and
written."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from extender.core.api.parse import ManifestError
from extender.core.jobframework import registry
from extender.core.jobframework.adapter import PodSetInfo
from extender.core.jobframework.ray import RayCluster, RayJob, RayService
from tests import yamlc
from tests.unit.core.jobframework.test_kubeflow_adapters import _apply

EXAMPLES = Path(__file__).resolve().parents[3] / "data" / "kueue-v0.19.2" / "examples" / "ray"
SUBMITTER = {
    "limits": {"cpu": "1", "memory": "1Gi"},
    "requests": {"cpu": "500m", "memory": "200Mi"},
}


def example(name: str) -> dict[str, Any]:
    return yamlc.safe_load((EXAMPLES / f"ray-{name}-sample.yaml").read_text())


def requests(template: Any) -> list[dict[str, str]]:
    return [c.get("resources", {}).get("requests", {}) for c in template["spec"]["containers"]]


@pytest.mark.parametrize(
    ("name", "adapter", "want"),
    [
        ("job", RayJob, [("head", 1), ("small-group", 1), ("submitter", 1)]),
        ("cluster", RayCluster, [("head", 1), ("small-group", 1)]),
        ("service", RayService, [("head", 1), ("small-group", 1)]),
    ],
)
def test_kueues_examples_have_kueues_pod_sets(name, adapter, want):
    obj = example(name)
    found = registry.for_object(obj)
    assert isinstance(found, adapter)
    assert [(p.name, p.count) for p in found.pod_sets(obj)] == want


def test_the_default_submitter_is_kuberays():
    obj = example("job")
    submitter = RayJob().pod_sets(obj)[-1]
    [container] = submitter.template["spec"]["containers"]
    assert container["name"] == "ray-job-submitter"
    assert container["image"] == "rayproject/ray:2.9.0"  # the head's
    assert container["resources"] == SUBMITTER


@pytest.mark.parametrize(
    ("mode", "names", "head_requests"),
    [
        ("K8sJobMode", ["head", "small-group", "submitter"], [{"cpu": "1"}]),
        ("SidecarMode", ["head", "small-group"], [{"cpu": "1"}, SUBMITTER["requests"]]),
        ("HTTPMode", ["head", "small-group"], [{"cpu": "1"}]),
        ("InteractiveMode", ["head", "small-group"], [{"cpu": "1"}]),
    ],
)
def test_the_submitter_by_submission_mode(mode, names, head_requests):
    obj = example("job")
    obj["spec"]["submissionMode"] = mode
    pod_sets = RayJob().pod_sets(obj)
    assert [p.name for p in pod_sets] == names
    assert requests(pod_sets[0].template) == head_requests


def test_worker_count_is_replicas_times_hosts():
    obj = example("cluster")
    group = obj["spec"]["workerGroupSpecs"][0]
    group.update(replicas=3, numOfHosts=4, minReplicas=0, maxReplicas=100)
    assert RayCluster().pod_sets(obj)[1].count == 12
    del group["replicas"]
    group["numOfHosts"] = 1
    assert RayCluster().pod_sets(obj)[1].count == 1  # replicas unset counts 1


def groups(n: int) -> list[dict[str, Any]]:
    return [{"groupName": f"g{i}", "replicas": 1, "template": {"spec": {}}} for i in range(n)]


@pytest.mark.parametrize(
    ("change", "path", "message"),
    [
        (
            lambda s: s.update(shutdownAfterJobFinishes=False),
            "spec.shutdownAfterJobFinishes",
            "must be true",
        ),
        (
            lambda s: s.update(clusterSelector={"ray.io/cluster": "x"}),
            "spec.clusterSelector",
            "must not use an existing cluster",
        ),
        (lambda s: s.pop("rayClusterSpec"), "spec.rayClusterSpec", "is required"),
        (
            lambda s: s["rayClusterSpec"].update(enableInTreeAutoscaling=True),
            "spec.rayClusterSpec.enableInTreeAutoscaling",
            "should only use autoscaling when workload slicing is enabled",
        ),
        (
            lambda s: s["rayClusterSpec"].update(workerGroupSpecs=groups(17)),
            "spec.rayClusterSpec.workerGroupSpecs",
            "at most 16 (Kueue's limit of 18 podSets, one of them its submitter)",
        ),
        (
            lambda s: s["rayClusterSpec"]["workerGroupSpecs"][0].update(groupName="Head"),
            "spec.rayClusterSpec.workerGroupSpecs[0].groupName",
            "reserved",
        ),
    ],
)
def test_what_kueue_refuses_is_refused_naming_the_field(change, path, message):
    obj = example("job")
    change(obj["spec"])
    with pytest.raises(ManifestError) as err:
        RayJob().pod_sets(obj)
    assert (err.value.path, message in err.value.message) == (path, True), err.value.message


def test_seventeen_worker_groups_for_a_cluster_eighteen_refused():
    obj = example("cluster")
    obj["spec"]["workerGroupSpecs"] = groups(17)
    assert len(RayCluster().pod_sets(obj)) == 18
    obj["spec"]["workerGroupSpecs"] = groups(18)
    with pytest.raises(ManifestError, match="at most 17"):
        RayCluster().pod_sets(obj)


def test_a_rayjob_on_an_existing_cluster_is_not_queued_itself():
    obj = example("job")
    del obj["spec"]["rayClusterSpec"]
    obj["spec"]["clusterSelector"] = {"ray.io/cluster": "shared"}
    assert RayJob().is_child(obj)  # the webhook leaves it alone; its cluster is queued


def test_a_cluster_made_by_a_rayjob_or_rayservice_is_its_child():
    owned = example("cluster")
    for kind in ("RayJob", "RayService"):
        owned["metadata"]["ownerReferences"] = [
            {"apiVersion": "ray.io/v1", "kind": kind, "name": "x", "uid": "u", "controller": True}
        ]
        assert RayCluster().is_child(owned)


@pytest.mark.parametrize(
    ("status", "finished", "active", "ready"),
    [
        ({}, None, False, False),
        ({"jobDeploymentStatus": "Suspended"}, None, False, False),
        (
            {"jobDeploymentStatus": "Running", "rayClusterStatus": {"state": "ready"}},
            None,
            True,
            True,
        ),
        (
            {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "message": "done"},
            ("Succeeded", "done"),
            True,
            False,
        ),
        (
            {"jobDeploymentStatus": "Failed", "jobStatus": "FAILED"},
            ("Failed", "RayJob failed"),
            True,
            False,
        ),
        (
            {"jobDeploymentStatus": "Complete", "jobStatus": "STOPPED", "message": "stopped"},
            ("Failed", "stopped"),
            True,
            False,
        ),
    ],
)
def test_a_rayjobs_status_as_kueue_reads_it(status, finished, active, ready):
    obj = {**example("job"), "status": status}
    adapter = RayJob()
    assert (adapter.finished(obj), adapter.is_active(obj), adapter.pods_ready(obj)) == (
        finished,
        active,
        ready,
    )


def test_clusters_and_services_never_finish_and_are_ready_as_kuberay_says():
    cluster = {**example("cluster"), "status": {"state": "ready"}}
    assert RayCluster().finished(cluster) is None
    assert RayCluster().pods_ready(cluster)
    assert RayCluster().is_active(cluster)
    service = {
        **example("service"),
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    assert RayService().finished(service) is None
    assert RayService().pods_ready(service)
    assert RayService().suspend_path == ("spec", "rayClusterConfig", "suspend")


@pytest.mark.parametrize("name", ["job", "cluster", "service"])
def test_start_then_stop_restores_each_template(name):
    obj = example(name)
    adapter = registry.for_object(obj)
    assert adapter is not None
    obj = _apply(obj, adapter.suspend_patch(True))
    pod_sets = adapter.pod_sets(obj)
    infos = {p.name: PodSetInfo(p.count, node_selector={"pool": p.name}) for p in pod_sets}
    started = _apply(obj, adapter.start_patch(obj, infos))
    assert adapter.is_suspended(started) is False
    for p in adapter.pod_sets(started):
        assert p.template["spec"]["nodeSelector"] == {"pool": p.name}, p.name
    if name == "job":
        # Without a template of its own, the submitter's is written, as Kueue writes it.
        assert started["spec"]["submitterPodTemplate"]["spec"]["nodeSelector"] == {
            "pool": "submitter"
        }
    originals = {p.name: copy.deepcopy(p.template) for p in pod_sets}
    stopped = _apply(
        _apply(started, adapter.suspend_patch(True)),
        adapter.restore_patch(started, originals, {p.name: p.count for p in pod_sets}),
    )
    for p in adapter.pod_sets(stopped):
        assert "nodeSelector" not in p.template["spec"], p.name
    assert [(p.name, p.count) for p in adapter.pod_sets(stopped)] == [
        (p.name, p.count) for p in pod_sets
    ]
    # The kept view (the cache's) patches the same way as the object.
    kept = {"spec": {**adapter.suspend_patch(True)["spec"], **adapter.kept(obj)}}
    assert adapter.start_patch(kept, infos) == adapter.start_patch(obj, infos)


AUTOSCALER = {
    "requests": {"cpu": "500m", "memory": "512Mi"},
    "limits": {"cpu": "500m", "memory": "512Mi"},
}


def elastic(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"].setdefault("annotations", {})["kueue.x-k8s.io/elastic-job"] = "true"
    return obj


def cluster_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj["spec"]
    return spec.get("rayClusterSpec") or spec.get("rayClusterConfig") or spec


@pytest.mark.parametrize("name", ["job", "cluster", "service"])
def test_the_autoscaler_sidecar_counts_in_the_head_and_is_never_written_into_the_job(name):
    obj = elastic(example(name))
    cluster_spec(obj)["enableInTreeAutoscaling"] = True
    adapter = registry.for_object(obj)
    assert adapter is not None
    head = adapter.pod_sets(obj)[0]
    assert [c["name"] for c in head.template["spec"]["containers"]][-1] == "autoscaler"
    assert head.template["spec"]["containers"][-1]["resources"] == AUTOSCALER
    assert adapter.templates(obj)["head"]["spec"]["containers"][-1]["name"] == "autoscaler"
    own = [c["name"] for c in cluster_spec(obj)["headGroupSpec"]["template"]["spec"]["containers"]]
    infos = {p.name: PodSetInfo(p.count, node_selector={"pool": p.name}) for p in
             adapter.pod_sets(obj)}  # fmt: skip
    started = _apply(obj, adapter.start_patch(obj, infos))
    head_template = cluster_spec(started)["headGroupSpec"]["template"]
    assert [c["name"] for c in head_template["spec"]["containers"]] == own
    assert head_template["spec"]["nodeSelector"] == {"pool": "head"}


def test_the_autoscaler_sidecar_takes_its_own_resources_when_given():
    obj = elastic(example("cluster"))
    mine = {"requests": {"cpu": "250m", "memory": "128Mi"}}
    obj["spec"].update(enableInTreeAutoscaling=True, autoscalerOptions={"resources": mine})
    head = RayCluster().pod_sets(obj)[0]
    assert head.template["spec"]["containers"][-1] == {"name": "autoscaler", "resources": mine}


def test_a_sidecar_submitter_is_kuberays_default_container_without_an_image():
    obj = example("job")
    obj["spec"]["submissionMode"] = "SidecarMode"
    head = RayJob().templates(obj)["head"]
    assert head["spec"]["containers"][-1] == {"name": "ray-job-submitter", "resources": SUBMITTER}


@pytest.mark.parametrize(
    ("own", "want"),
    [
        ({"cpu": "1"}, {"cpu": "1", "memory": "256Mi"}),
        ({"cpu": "100m", "memory": "1Gi"}, {"cpu": "200m", "memory": "1Gi"}),
    ],
)
def test_a_gcs_fault_tolerant_head_asks_at_least_the_redis_cleanup_jobs_requests(own, want):
    obj = example("service")
    spec = obj["spec"]["rayClusterConfig"]
    spec["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": own}
    assert requests(RayService().pod_sets(obj)[0].template)[0] == own  # not fault tolerant
    spec["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}
    assert requests(RayService().pod_sets(obj)[0].template)[0] == want


def test_an_autoscaling_rayservice_is_elastic_or_refused_in_kueues_words():
    obj = example("service")
    obj["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] = True
    with pytest.raises(ManifestError) as err:
        RayService().pod_sets(obj)
    assert err.value.path == "spec.rayClusterConfig.enableInTreeAutoscaling"
    assert "should only use autoscaling when workload slicing is enabled" in err.value.message
    assert [p.name for p in RayService().pod_sets(elastic(obj))] == ["head", "small-group"]


def test_an_elastic_ray_job_follows_its_clusters_worker_counts():
    from extender.core.jobframework import ray

    obj = elastic(example("job"))
    assert not ray.follows_its_cluster("ray.io/rayjob", obj)
    obj["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    assert ray.follows_its_cluster("ray.io/rayjob", obj)
    assert ray.its_cluster("ray.io/rayjob", {"status": {"rayClusterName": "c1"}}) == "c1"
    service = {"status": {"activeServiceStatus": {"rayClusterName": "c2"}}}
    assert ray.its_cluster("ray.io/rayservice", service) == "c2"
    own = [("head", 1), ("small-group", 1), ("submitter", 1)]
    cluster = {"metadata": {"name": "c1"}, "spec": {"workerGroupSpecs": [
        {"groupName": "small-group", "replicas": 3, "numOfHosts": 2}]}}  # fmt: skip
    counts = ray.cluster_counts(own, cluster, "RayJob ns/j")
    assert counts == [("head", 1), ("small-group", 6), ("submitter", 1)]
    assert ray.replica_sizes(counts) == (
        '[{"name":"head","count":1},{"name":"small-group","count":6},'
        '{"name":"submitter","count":1}]'
    )
    del cluster["spec"]["workerGroupSpecs"][0]["replicas"]  # unset: the job's count stays
    assert ray.cluster_counts(own, cluster, "RayJob ns/j") == own
    cluster["spec"]["workerGroupSpecs"][0]["groupName"] = "other"
    with pytest.raises(ManifestError, match="RayCluster c1 has worker group 'other'"):
        ray.cluster_counts(own, cluster, "RayJob ns/j")
    obj["metadata"]["generation"] = 2
    assert ray.name_extra(obj) == "2"
    obj["metadata"]["annotations"][ray.CLUSTER_GENERATION] = "5"
    assert ray.name_extra(obj) == "2_5"
