"""The SparkApplication adapter, table-driven: Kueue's podSets built from the driver's and the
executors' resource fields, its refusals, where an admission is written and how a stop puts
it back, and the states read as running, ready and finished."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from extender.core.api.parse import ManifestError
from extender.core.jobframework import registry
from extender.core.jobframework.adapter import PodSetInfo
from extender.core.jobframework.spark import SparkApplicationAdapter, java_memory
from extender.core.jobframework.topology import template_topology
from tests import yamlc

EXAMPLES = Path(__file__).resolve().parents[3] / "data" / "kueue-v0.19.2" / "examples"
SPARK = SparkApplicationAdapter()
REQUIRED = "kueue.x-k8s.io/podset-required-topology"


def app(**spec: Any) -> dict[str, Any]:
    """MakeSparkApplication's defaults (Kueue's test wrapper), with `spec` over them."""
    base: dict[str, Any] = {
        "type": "Scala",
        "mode": "cluster",
        "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
        "sparkVersion": "4.0.0",
        "driver": {"memory": "512Mi", "serviceAccount": "spark", "coreRequest": "100m"},
        "executor": {"memory": "512Mi", "coreRequest": "100m", "instances": 1},
    }
    for key, value in spec.items():
        base[key] = {**base[key], **value} if isinstance(value, dict) and key in base else value
    return {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": "spark", "namespace": "default"},
        "spec": base,
    }


def apply(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch applied as the API server applies it."""
    out = copy.deepcopy(obj)

    def walk(target: dict[str, Any], change: dict[str, Any]) -> None:
        for key, value in change.items():
            if value is None:
                target.pop(key, None)
            elif isinstance(value, dict) and isinstance(target.get(key), dict):
                walk(target[key], value)
            else:
                target[key] = copy.deepcopy(value)

    walk(out, patch)
    return out


def test_kueues_sample_has_a_driver_and_two_executors():
    sample = yamlc.safe_load((EXAMPLES / "jobs" / "sample-sparkapplication.yaml").read_text())
    assert isinstance(registry.for_object(sample), SparkApplicationAdapter)
    driver, executor = SPARK.pod_sets(sample)
    assert [(driver.name, driver.count), (executor.name, executor.count)] == [
        ("driver", 1),
        ("executor", 2),
    ]
    # coreRequest "1" and memory "1g" (Java's units) on the operator's container of each role
    assert driver.template["spec"]["containers"] == [
        {
            "name": "spark-kubernetes-driver",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        }
    ]
    assert executor.template["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi"}
    }


@pytest.mark.parametrize(
    ("java", "kubernetes"),
    [("512m", "512Mi"), ("2g", "2Gi"), ("512mb", "512Mi"), ("1t", "1Ti"), ("512Mi", "512Mi"),
     ("1024", "1024"), ("3k", "3Ki")],
)  # fmt: skip
def test_memory_in_javas_units_is_read_as_the_operator_converts_it(java, kubernetes):
    assert java_memory(java) == kubernetes


@pytest.mark.parametrize(
    ("role", "fields", "want_spec"),
    [
        (
            "driver",
            {"coreLimit": "2", "memoryLimit": "1g", "gpu": {"name": "nvidia.com/gpu", "quantity": 1}},
            {"containers": [{"name": "spark-kubernetes-driver", "resources": {
                "requests": {"cpu": "100m", "memory": "512Mi"},
                "limits": {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"}}}]},
        ),
        (
            "executor",
            {"gpu": {"name": "nvidia.com/gpu", "quantity": 0}, "priorityClassName": "high",
             "nodeSelector": {"disk": "ssd"}, "tolerations": [{"key": "k", "operator": "Exists"}]},
            {"containers": [{"name": "spark-kubernetes-executor", "resources": {
                "requests": {"cpu": "100m", "memory": "512Mi"}}}],
             "priorityClassName": "high", "nodeSelector": {"disk": "ssd"},
             "tolerations": [{"key": "k", "operator": "Exists"}]},
        ),
        (
            "driver",
            {"sidecars": [{"name": "log", "image": "busybox",
                           "resources": {"requests": {"cpu": "50m"}}}],
             "initContainers": [{"name": "init", "image": "busybox"}],
             "volumeMounts": [{"name": "data", "mountPath": "/data"},
                              {"name": "spark-local-dir-1", "mountPath": "/tmp"},
                              {"name": "nowhere", "mountPath": "/x"}]},
            {"containers": [
                {"name": "spark-kubernetes-driver",
                 "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                 "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}}},
                {"name": "log", "image": "busybox", "resources": {"requests": {"cpu": "50m"}}}],
             "volumes": [{"name": "data", "emptyDir": {}}],
             "initContainers": [{"name": "init", "image": "busybox"}]},
        ),
    ],
    ids=["limits-and-gpu", "placement-fields", "sidecars-inits-volumes"],
)  # fmt: skip
def test_a_roles_template_is_built_from_its_resource_fields(role, fields, want_spec):
    obj = app(**{role: fields}, volumes=[{"name": "data", "emptyDir": {}}])
    [template] = [p.template for p in SPARK.pod_sets(obj) if p.name == role]
    assert template["spec"] == want_spec


def test_the_roles_pod_template_lends_only_its_metadata_and_the_roles_labels_win():
    obj = app(driver={
        "labels": {"team": "a"},
        "annotations": {REQUIRED: "kubernetes.io/hostname"},
        "template": {"metadata": {"labels": {"team": "b", "app": "pi"}},
                     "spec": {"containers": [{"name": "ignored", "image": "x"}]}},
    })  # fmt: skip
    driver, executor = SPARK.pod_sets(obj)
    assert driver.template["metadata"] == {
        "labels": {"team": "a", "app": "pi"},
        "annotations": {REQUIRED: "kubernetes.io/hostname"},
    }
    assert driver.template["spec"]["containers"][0]["name"] == "spark-kubernetes-driver"
    assert template_topology(driver) is not None  # the podSet asks for a host
    assert "metadata" not in executor.template


def test_executors_without_instances_are_a_podset_of_zero():
    obj = app()
    del obj["spec"]["executor"]["instances"]
    assert [(p.name, p.count) for p in SPARK.pod_sets(obj)] == [("driver", 1), ("executor", 0)]


@pytest.mark.parametrize(
    ("spec", "path", "words"),
    [
        ({"mode": "client"}, "spec.mode", "only Cluster mode is supported"),
        ({"mode": None}, "spec.mode", "only Cluster mode is supported"),
        ({"dynamicAllocation": {"enabled": True}}, "spec.dynamicAllocation.enabled",
         "ElasticJobsViaWorkloadSlices"),
        ({"driver": {"coreRequest": "lots"}}, "spec.driver.coreRequest", "is not a quantity"),
        ({"executor": {"memory": "12q"}}, "spec.executor.memory", "is not a quantity"),
        ({"executor": {"instances": -1}}, "spec.executor.instances", "non-negative"),
    ],
)  # fmt: skip
def test_a_queued_application_kueue_refuses_is_refused_naming_the_field(spec, path, words):
    with pytest.raises(ManifestError) as refused:
        SPARK.pod_sets(app(**spec))
    assert refused.value.path == path
    assert words in refused.value.message


def test_an_update_of_a_queued_application_is_checked_as_a_create():
    old = app()
    new = app(mode="client")
    SPARK.check_update(old, new)  # not queued: Kueue leaves it alone
    new["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "q"}
    with pytest.raises(ManifestError, match="only Cluster mode"):
        SPARK.check_update(old, new)


INFOS = {
    "driver": PodSetInfo(
        1,
        node_selector={"instance-type": "on-demand"},
        tolerations=({"key": "spot", "operator": "Exists"},),
        labels={"kueue.x-k8s.io/podset": "driver"},
        annotations={"kueue.x-k8s.io/workload": "wl"},
        scheduling_gates=({"name": "kueue.x-k8s.io/topology"},),
    ),
    "executor": PodSetInfo(1, node_selector={"instance-type": "on-demand"},
                           labels={"kueue.x-k8s.io/podset": "executor"}),
}  # fmt: skip


def test_a_start_writes_each_roles_placement_where_the_operator_reads_it():
    obj = app(driver={"labels": {"team": "a"}, "tolerations": [{"key": "own"}]})
    started = apply(obj, SPARK.start_patch(obj, INFOS))
    driver, executor = started["spec"]["driver"], started["spec"]["executor"]
    assert started["spec"]["suspend"] is False
    assert driver["nodeSelector"] == {"instance-type": "on-demand"}
    assert driver["labels"] == {"team": "a", "kueue.x-k8s.io/podset": "driver"}
    assert driver["annotations"] == {"kueue.x-k8s.io/workload": "wl"}
    assert driver["tolerations"] == [{"key": "own"}, {"key": "spot", "operator": "Exists"}]
    # No template of its own: one is made with the operator's container, to hold the gate.
    assert driver["template"] == {"spec": {
        "containers": [{"name": "spark-kubernetes-driver"}],
        "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}]}}  # fmt: skip
    assert executor["nodeSelector"] == {"instance-type": "on-demand"}
    assert "template" not in executor
    assert SPARK.start_patch(started, INFOS) == {"spec": {"suspend": False}}  # nothing more


def test_a_global_node_selector_moves_onto_both_roles_at_start():
    obj = app(nodeSelector={"zone": "a"})
    started = apply(obj, SPARK.start_patch(obj, INFOS))
    assert "nodeSelector" not in started["spec"]
    assert started["spec"]["driver"]["nodeSelector"] == {"zone": "a", "instance-type": "on-demand"}
    assert started["spec"]["executor"]["nodeSelector"] == {
        "zone": "a",
        "instance-type": "on-demand",
    }


def test_a_stop_puts_back_what_the_workload_recorded():
    obj = app(driver={"labels": {"team": "a"}, "template": {"metadata": {"labels": {"x": "y"}}}})
    originals = {p.name: p.template for p in SPARK.pod_sets(obj)}
    started = apply(obj, SPARK.start_patch(obj, INFOS))
    stopped = apply(started, SPARK.restore_patch(started, originals, {"driver": 1, "executor": 1}))
    driver = stopped["spec"]["driver"]
    # Kueue restores the role's labels from the podSet (its template's labels merged in).
    assert driver["labels"] == {"team": "a", "x": "y"}
    assert "nodeSelector" not in driver
    assert "annotations" not in driver
    assert "tolerations" not in driver
    assert driver["template"] == {"metadata": {"labels": {"x": "y"}}, "spec": {}}
    assert "nodeSelector" not in stopped["spec"]["executor"]
    assert stopped["spec"]["executor"]["instances"] == 1
    # The cache keeps enough to build the same patches from its trimmed copy.
    view = {"spec": {"suspend": False, **SPARK.kept(started)}}
    assert SPARK.restore_patch(
        view, originals, {"driver": 1, "executor": 1}
    ) == SPARK.restore_patch(started, originals, {"driver": 1, "executor": 1})


@pytest.mark.parametrize(
    ("state", "executors", "active", "ready", "finished"),
    [
        ("", {}, False, False, None),
        ("SUBMITTED", {}, False, False, None),
        ("RUNNING", {}, True, False, None),
        ("RUNNING", {"spark-1": "PENDING"}, True, False, None),
        ("RUNNING", {"spark-1": "RUNNING"}, True, True, None),
        ("COMPLETED", {"spark-1": "COMPLETED"}, False, False,
         ("Succeeded", "SparkApplication finished successfully")),
        ("FAILED", {}, False, False, ("Failed", "driver pod failed")),
        ("SUBMISSION_FAILED", {}, False, False, ("Failed", "driver pod failed")),
    ],
)  # fmt: skip
def test_the_application_state_is_read_as_kueue_reads_it(state, executors, active, ready, finished):
    obj = app()
    error = {"errorMessage": "driver pod failed"} if "FAIL" in state else {}
    obj["status"] = {"applicationState": {"state": state, **error}, "executorState": executors}
    assert SPARK.is_active(obj) is active
    assert SPARK.pods_ready(obj) is ready
    assert SPARK.finished(obj) == finished


def test_the_integration_needs_its_feature_gate():
    frameworks = ("batch/job", "sparkoperator.k8s.io/sparkapplication")
    refusal = registry.gate_refusal(frameworks, {"SparkApplicationIntegration": False})
    assert refusal is not None
    assert "SparkApplicationIntegration" in refusal
    assert registry.gate_refusal(frameworks, {"SparkApplicationIntegration": True}) is None
    assert "sparkoperator.k8s.io/sparkapplication" not in registry.DEFAULT_FRAMEWORKS
