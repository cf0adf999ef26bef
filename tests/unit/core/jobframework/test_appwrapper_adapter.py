"""The AppWrapper adapter, table-driven: Kueue's podSets of its AppWrapper samples, podSets
inferred per wrapped kind as the appwrapper library infers them, the path syntax, the
refusals, and where admission is written and cleared."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from extender.core.api.parse import ManifestError
from extender.core.jobframework import registry
from extender.core.jobframework.adapter import PodSetInfo
from extender.core.jobframework.appwrapper import AppWrapper, inferred, value_at
from extender.core.jobframework.topology import template_topology
from tests import yamlc

EXAMPLES = Path(__file__).resolve().parents[3] / "data" / "kueue-v0.19.2" / "examples"
AW = AppWrapper()


def sample(name: str) -> dict[str, Any]:
    return yamlc.safe_load((EXAMPLES / "appwrapper" / f"{name}-sample.yaml").read_text())


def wrapper(*templates: dict[str, Any], name: str = "aw", **component: Any) -> dict[str, Any]:
    return {
        "apiVersion": "workload.codeflare.dev/v1beta2",
        "kind": "AppWrapper",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"components": [{"template": t, **component} for t in templates]},
    }


POD_SPEC = {
    "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]
}


@pytest.mark.parametrize(
    ("name", "want"),
    [
        (
            "pytorch",
            [("sample-appwrapper-pytorch-job-0", 1), ("sample-appwrapper-pytorch-job-1", 1)],
        ),
        ("deployment", [("sample-appwrapper-deployment-0", 3)]),
        ("leaderworkerset", [("sample-appwrapper-lws-0", 2), ("sample-appwrapper-lws-1", 3)]),
    ],
)
def test_kueues_samples_have_kueues_pod_sets(name, want):
    obj = sample(name)
    assert isinstance(registry.for_object(obj), AppWrapper)
    assert [(p.name, p.count) for p in AW.pod_sets(obj)] == want


def test_the_pytorch_samples_pod_sets_are_master_then_worker():
    master, worker = AW.pod_sets(sample("pytorch"))
    assert master.path == "spec.components[0].template.spec.pytorchReplicaSpecs.Master.template"
    assert worker.path == "spec.components[0].template.spec.pytorchReplicaSpecs.Worker.template"
    assert master.template["spec"]["containers"][0]["resources"]["requests"] == {"cpu": 1}


@pytest.mark.parametrize(
    ("wrapped", "want"),
    [
        ({"apiVersion": "v1", "kind": "Pod", "spec": POD_SPEC}, [("template", 1)]),
        (
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {"replicas": 4}},
            [("template.spec.template", 4)],
        ),
        (
            {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {}},
            [("template.spec.template", 1)],
        ),
        (
            {"apiVersion": "batch/v1", "kind": "Job", "spec": {"parallelism": 5, "completions": 3}},
            [("template.spec.template", 3)],
        ),
        (
            {"apiVersion": "batch/v1", "kind": "Job", "spec": {"completions": 3}},
            [("template.spec.template", 1)],
        ),
        (
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "spec": {
                    "replicatedJobs": [
                        {"name": "a", "replicas": 2, "template": {"spec": {"parallelism": 3}}},
                        {"name": "b"},
                        {"name": "c", "template": {"spec": {}}},
                    ]
                },
            },
            [
                ("template.spec.replicatedJobs[0].template.spec.template", 6),
                ("template.spec.replicatedJobs[2].template.spec.template", 1),
            ],
        ),
        (
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 3, "template": {}}}},
            },
            [("template.spec.pytorchReplicaSpecs.Worker.template", 3)],
        ),
        (
            {
                "apiVersion": "ray.io/v1",
                "kind": "RayJob",
                "spec": {
                    "rayClusterSpec": {
                        "headGroupSpec": {"template": {}},
                        "workerGroupSpecs": [{"replicas": 2, "minReplicas": 5, "template": {}}],
                    }
                },
            },
            [
                ("template.spec.rayClusterSpec.headGroupSpec.template", 1),
                ("template.spec.rayClusterSpec.workerGroupSpecs[0].template", 2),
            ],
        ),
        ({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "spec": {}}, []),
        ({"apiVersion": "v1", "kind": "Service", "spec": {}}, []),
    ],
)
def test_pod_sets_are_inferred_for_the_kinds_the_appwrapper_library_knows(wrapped, want):
    assert [(p.path, p.replicas) for p in inferred(wrapped)] == want


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("spec.template", "must start with 'template'"),
        ("template.spec.nope", "'template.spec' has no field 'nope'"),
        ("template.spec.items[3]", "'template.spec.items' has no item [3]"),
        ("template.spec[0]", "'template.spec' is not a list"),
        ("template.spec.items[x]", "cannot read '[x]' after 'template.spec.items'"),
    ],
)
def test_a_path_that_leads_nowhere_says_where_it_stops(path, error):
    wrapped = {"spec": {"items": [1, 2]}}
    with pytest.raises(ValueError, match=error.replace("[", r"\[").replace("]", r"\]")):
        value_at(wrapped, path)


def test_the_path_walks_keys_and_indexes():
    wrapped = {"spec": {"groups": [{"t": 1}, {"t": {"spec": {}}}]}}
    assert value_at(wrapped, "template.spec.groups[1].t") == {"spec": {}}
    assert value_at(wrapped, "template") == wrapped


def test_pod_set_names_count_across_components():
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": POD_SPEC}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "spec": {"parallelism": 2, "template": {"spec": POD_SPEC}},
    }
    obj = wrapper(pod, job, name="Mixed")
    assert [(p.name, p.count) for p in AW.pod_sets(obj)] == [("mixed-0", 1), ("mixed-1", 2)]


def test_the_controllers_cached_pod_sets_win_when_they_cover_every_component():
    obj = sample("deployment")
    obj["status"] = {
        "componentStatus": [{"podSets": [{"path": "template.spec.template", "replicas": 5}]}]
    }
    assert [p.count for p in AW.pod_sets(obj)] == [5]


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (
            lambda o: o["spec"]["components"][0].update(podSets=[{"path": "template.spec.nope"}]),
            "spec.components[0].podSets[0].path",
            "'template.spec.nope' 'template.spec' has no field 'nope'",
        ),
        (
            lambda o: o["spec"]["components"][0].update(podSets=[{"path": "template.spec"}]),
            "spec.components[0].podSets[0].path",
            "is not a pod template",
        ),
        (
            lambda o: o["spec"]["components"][0].update(
                template={"apiVersion": "v1", "kind": "Service", "spec": {}}, podSets=[]
            ),
            "spec.components",
            "has no pod templates",
        ),
        (lambda o: o["metadata"].update(name="a.b"), "metadata.name", "must be DNS labels"),
        (lambda o: o["spec"]["components"][0].pop("template"), "spec.components[0].template", ""),
    ],
)
def test_what_cannot_be_read_is_refused_naming_the_field(change, field, message):
    obj = sample("deployment")
    change(obj)
    with pytest.raises(ManifestError) as err:
        AW.pod_sets(obj)
    assert err.value.path == field
    assert message in err.value.message


def test_admission_is_written_into_each_components_pod_set_infos_and_cleared_by_a_stop():
    obj = sample("pytorch")
    obj["spec"]["suspend"] = True
    infos = {
        "sample-appwrapper-pytorch-job-0": PodSetInfo(
            1, node_selector={"instance-type": "spot"}, labels={"kueue.x-k8s.io/podset": "x-0"}
        ),
        "sample-appwrapper-pytorch-job-1": PodSetInfo(
            1,
            tolerations=[{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
            scheduler_name="tower",  # an AppWrapperPodSetInfo has no schedulerName
        ),
    }
    patch = AW.start_patch(obj, infos)
    assert patch["spec"]["suspend"] is False
    [component] = patch["spec"]["components"]
    assert component["template"] == obj["spec"]["components"][0]["template"]
    assert component["podSetInfos"] == [
        {"labels": {"kueue.x-k8s.io/podset": "x-0"}, "nodeSelector": {"instance-type": "spot"}},
        {"tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]},
    ]
    started = copy.deepcopy(obj)
    started["spec"].update(patch["spec"])
    restore = AW.restore_patch(started, {}, {})
    assert restore == {"spec": {"components": obj["spec"]["components"]}}


@pytest.mark.parametrize(
    ("status", "want"),
    [
        ({}, None),
        ({"phase": "Running"}, None),
        ({"phase": "Succeeded"}, ("Succeeded", "AppWrapper finished successfully")),
        (
            {"phase": "Failed", "conditions": [{"type": "ResourcesDeployed", "status": "True"}]},
            None,
        ),
        (
            {"phase": "Failed", "conditions": [{"type": "ResourcesDeployed", "status": "False"}]},
            ("Failed", "AppWrapper failed"),
        ),
    ],
)
def test_finished_is_read_from_the_phase_once_resources_are_deleted(status, want):
    assert AW.finished({"status": status}) == want


@pytest.mark.parametrize(
    ("conditions", "active", "ready"),
    [
        ([], False, False),
        ([{"type": "QuotaReserved", "status": "True"}], True, False),
        (
            [{"type": "QuotaReserved", "status": "True"}, {"type": "PodsReady", "status": "True"}],
            True,
            True,
        ),
        ([{"type": "QuotaReserved", "status": "False"}], False, False),
    ],
)
def test_active_and_ready_are_its_controllers_conditions(conditions, active, ready):
    obj = {"status": {"conditions": conditions}}
    assert AW.is_active(obj) is active
    assert AW.pods_ready(obj) is ready


RACK_REQUIRED = {"kueue.x-k8s.io/podset-required-topology": "cloud.provider.com/topology-rack"}


def _templated(kind: str, api: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind, "spec": spec}


@pytest.mark.parametrize(
    ("wrapped", "want"),
    [
        (  # the library's annotations for an inferred Job: the completion index
            _templated("Job", "batch/v1", {"parallelism": 4, "template": {
                "metadata": {"annotations": RACK_REQUIRED}, "spec": POD_SPEC}}),
            [("batch.kubernetes.io/job-completion-index", None, None)],
        ),
        (  # a JobSet: the completion index within each Job, the Job index, the Job count
            _templated("JobSet", "jobset.x-k8s.io/v1alpha2", {"replicatedJobs": [{
                "name": "w", "replicas": 2, "template": {"spec": {"parallelism": 2, "template": {
                    "metadata": {"annotations": RACK_REQUIRED}, "spec": POD_SPEC}}}}]}),
            [("batch.kubernetes.io/job-completion-index", "jobset.sigs.k8s.io/job-index", 2)],
        ),
        (  # a PyTorchJob: the training operator's replica index
            _templated("PyTorchJob", "kubeflow.org/v1", {"pytorchReplicaSpecs": {"Worker": {
                "replicas": 3, "template": {
                    "metadata": {"annotations": RACK_REQUIRED}, "spec": POD_SPEC}}}}),
            [("training.kubeflow.org/replica-index", None, None)],
        ),
        (  # a Deployment's pods have no index: greedy, as in Kueue
            _templated("Deployment", "apps/v1", {"replicas": 2, "template": {
                "metadata": {"annotations": RACK_REQUIRED}, "spec": POD_SPEC}}),
            [(None, None, None)],
        ),
    ],
)  # fmt: skip
def test_inferred_pod_sets_are_ranked_by_the_labels_the_appwrapper_library_names(wrapped, want):
    obj = wrapper(wrapped)
    pod_sets = AW.pod_sets(obj)
    assert [
        (p.pod_index_label, p.sub_group_index_label, p.sub_group_count) for p in pod_sets
    ] == want
    # ... and the Workload's topology request carries them (Kueue's podIndexLabel & co.).
    (pod_set,) = pod_sets
    request = template_topology(pod_set)
    assert request is not None
    assert request.pod_index_label == want[0][0]
    assert request.sub_group_index_label == want[0][1]
    assert request.sub_group_count == want[0][2]


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        ({"workload.codeflare.dev.appwrapper/tas-pod-index-label": "my-rank"}, ("my-rank", None, None)),
        (
            {
                "workload.codeflare.dev.appwrapper/tas-pod-index-label": "idx",
                "workload.codeflare.dev.appwrapper/tas-sub-group-index-label": "grp",
                "workload.codeflare.dev.appwrapper/tas-sub-group-count": "4",
            },
            ("idx", "grp", 4),
        ),
        (  # a count that is not a number is ignored, as Kueue's adapter logs and ignores it
            {"workload.codeflare.dev.appwrapper/tas-sub-group-count": "four"},
            (None, None, None),
        ),
        ({}, (None, None, None)),
    ],
)  # fmt: skip
def test_declared_pod_sets_take_their_ranks_from_their_annotations(annotations, want):
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": POD_SPEC}
    obj = wrapper(pod, podSets=[{"path": "template", "replicas": 1, "annotations": annotations}])
    (pod_set,) = AW.pod_sets(obj)
    assert (pod_set.pod_index_label, pod_set.sub_group_index_label, pod_set.sub_group_count) == want
