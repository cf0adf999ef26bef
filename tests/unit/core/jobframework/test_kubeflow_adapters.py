"""The Kubeflow adapters, table-driven: Kueue's podSets of each documentation example, and how
each kind is read (active, finished, ready, priority) and written (start, stop)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from extender.core.api.parse import ManifestError
from extender.core.jobframework import registry
from extender.core.jobframework.adapter import PodSetInfo
from extender.core.jobframework.kubeflow import (
    JAXJob,
    MPIJob,
    PaddleJob,
    PyTorchJob,
    ReplicaSpecsJob,
    TFJob,
    XGBoostJob,
)
from tests import yamlc

EXAMPLES = Path(__file__).resolve().parents[3] / "data" / "kueue-v0.19.2" / "examples" / "jobs"


def example(name: str) -> dict[str, Any]:
    return yamlc.safe_load((EXAMPLES / f"sample-{name}.yaml").read_text())


@pytest.mark.parametrize(
    ("name", "adapter", "want"),
    [
        ("pytorchjob", PyTorchJob, [("master", 1), ("worker", 1)]),
        ("tfjob", TFJob, [("ps", 1), ("worker", 2)]),
        ("xgboostjob", XGBoostJob, [("master", 1), ("worker", 2)]),
        ("paddlejob", PaddleJob, [("worker", 2)]),
        ("jaxjob", JAXJob, [("worker", 2)]),
        ("mpijob", MPIJob, [("launcher", 1), ("worker", 2)]),
    ],
)
def test_kueues_examples_have_kueues_pod_sets(name, adapter, want):
    obj = example(name)
    found = registry.for_object(obj)
    assert isinstance(found, adapter)
    assert [(p.name, p.count) for p in found.pod_sets(obj)] == want
    assert found.suspend_path == ("spec", "runPolicy", "suspend")


def tfjob(*types: str, **replicas: Any) -> dict[str, Any]:
    specs = {t: {"replicas": replicas.get(t.lower(), 1), "template": {"spec": {}}} for t in types}
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "spec": {"tfReplicaSpecs": specs}}


@pytest.mark.parametrize(
    ("obj", "want"),
    [
        pytest.param(
            tfjob("Worker", "Evaluator", "PS", "Chief", "Master"),
            ["chief", "master", "ps", "worker", "evaluator"],
            id="Kueue's order, not the manifest's",
        ),
        pytest.param(tfjob("worker", "ps"), ["ps", "worker"], id="keys in any case"),
        pytest.param(
            {"kind": "TFJob", "spec": {"tfReplicaSpecs": {"Worker": {"template": {}}}}},
            [("worker", 1)],
            id="replicas unset counts 1, as Kueue counts it",
        ),
    ],
)
def test_replica_types_in_kueues_order(obj, want):
    pod_sets = TFJob().pod_sets(obj)
    if want and isinstance(want[0], tuple):
        assert [(p.name, p.count) for p in pod_sets] == want
    else:
        assert [p.name for p in pod_sets] == want


@pytest.mark.parametrize(
    ("obj", "path", "message"),
    [
        (tfjob("Launcher"), "spec.tfReplicaSpecs.Launcher", "is not a replica type of TFJob"),
        ({"kind": "TFJob", "spec": {"tfReplicaSpecs": {}}}, "spec.tfReplicaSpecs", "must have"),
        ({"kind": "TFJob", "spec": {}}, "spec.tfReplicaSpecs", ""),
        (tfjob("Worker", worker=-1), "spec.tfReplicaSpecs.Worker.replicas", "non-negative"),
    ],
)
def test_a_wrong_job_names_the_field(obj, path, message):
    with pytest.raises(ManifestError) as err:
        TFJob().pod_sets(obj)
    assert err.value.path == path
    assert message in err.value.message


@pytest.mark.parametrize(
    ("status", "finished", "ready", "active"),
    [
        ({}, None, False, False),
        (
            {
                "conditions": [
                    {"type": "Created", "status": "True"},
                    {"type": "Running", "status": "True"},
                ],
                "replicaStatuses": {"Worker": {"active": 2}},
            },
            None,
            True,
            True,
        ),
        (
            {
                "conditions": [
                    {"type": "Running", "status": "False"},
                    {"type": "Succeeded", "status": "True", "message": "PyTorchJob done"},
                ],
                "replicaStatuses": {"Master": {"succeeded": 1}, "Worker": {"active": 0}},
            },
            ("Succeeded", "PyTorchJob done"),
            False,
            False,
        ),
        (
            {"conditions": [{"type": "Failed", "status": "True", "reason": "x"}]},
            ("Failed", "PyTorchJob failed"),
            False,
            False,
        ),
        ({"conditions": [{"type": "Succeeded", "status": "False"}]}, None, False, False),
    ],
)
def test_status_as_kueue_reads_it(status, finished, ready, active):
    obj = {**example("pytorchjob"), "status": status}
    adapter = PyTorchJob()
    assert adapter.finished(obj) == finished
    assert adapter.pods_ready(obj) is ready
    assert adapter.is_active(obj) is active


def test_priority_is_the_run_policys_then_the_first_replicas_in_kueues_order():
    obj = example("mpijob")
    adapter = MPIJob()
    assert adapter.pod_priority_class(obj) is None
    obj["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["priorityClassName"] = "w"
    assert adapter.pod_priority_class(obj) == "w"
    obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["priorityClassName"] = "l"
    assert adapter.pod_priority_class(obj) == "l"
    obj["spec"]["runPolicy"]["schedulingPolicy"] = {"priorityClass": "run"}
    assert adapter.pod_priority_class(obj) == "run"


@pytest.mark.parametrize(
    "adapter", [a for a in registry.ADAPTERS.values() if isinstance(a, ReplicaSpecsJob)]
)
def test_start_then_stop_restores_each_template(adapter):
    name = {"MPIJob": "mpijob", "PyTorchJob": "pytorchjob", "TFJob": "tfjob"}.get(adapter.kind)
    obj = example(name or adapter.kind.lower())
    obj["spec"].setdefault("runPolicy", {})["suspend"] = True
    pod_sets = adapter.pod_sets(obj)
    infos = {
        p.name: PodSetInfo(
            p.count,
            node_selector={"pool": p.name},
            tolerations=[{"key": "gpu", "operator": "Exists"}],
            labels={"kueue.x-k8s.io/podset": p.name},
        )
        for p in pod_sets
    }
    patch = adapter.start_patch(obj, infos)
    assert patch["spec"]["runPolicy"] == {"suspend": False}
    started = _apply(obj, patch)
    assert adapter.is_suspended(started) is False
    for p in adapter.pod_sets(started):
        assert p.template["spec"]["nodeSelector"] == {"pool": p.name}
        assert p.template["metadata"]["labels"]["kueue.x-k8s.io/podset"] == p.name
    # The stop puts back what the Workload recorded of each template (here: the example's).
    originals = {p.name: copy.deepcopy(p.template) for p in pod_sets}
    stopped = _apply(
        _apply(started, adapter.suspend_patch(True)),
        adapter.restore_patch(started, originals, {p.name: p.count for p in pod_sets}),
    )
    for template in adapter.templates(stopped).values():
        if template.get("metadata") == {}:  # an empty metadata is no metadata
            del template["metadata"]  # type: ignore[attr-defined]
    assert stopped == obj
    # The cache keeps only the placement, and the kept view patches the same way.
    kept = {"spec": {**adapter.suspend_patch(True)["spec"], **adapter.kept(obj)}}
    assert adapter.templates_patch(kept, {}) == {}
    assert set(adapter.templates(kept)) == {p.name for p in pod_sets}


def _apply(obj: Any, patch: Any) -> Any:
    """A JSON merge patch (RFC 7386), as kube-apiserver applies one."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(obj) if isinstance(obj, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _apply(out.get(key), value)
    return out


def test_v1_kinds_are_off_by_default_and_mpijob_on_as_in_kueues_file():
    on = {a.framework for a in registry.enabled()}
    assert "kubeflow.org/mpijob" in on
    assert not on & {
        "kubeflow.org/pytorchjob",
        "kubeflow.org/tfjob",
        "kubeflow.org/xgboostjob",
        "kubeflow.org/paddlejob",
        "kubeflow.org/jaxjob",
    }
    named = registry.enabled(["batch/job", "kubeflow.org/pytorchjob"])
    assert [a.kind for a in named] == ["Job", "PyTorchJob"]
