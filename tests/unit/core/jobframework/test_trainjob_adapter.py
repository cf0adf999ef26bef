"""The TrainJob adapter, table-driven: podSets rendered from Kubeflow Trainer's own example
runtimes (v2.2.1) and Kueue's documentation example, as trainer renders them; runtime patches;
the refusals; and admission written into Kueue's runtime patch and cleared by a stop."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from extender.core.api.parse import ManifestError
from extender.core.jobframework import registry
from extender.core.jobframework.adapter import MissingReferenceError, PodSetInfo
from extender.core.jobframework.topology import request_json, template_topology
from extender.core.jobframework.trainer import MANAGER, TrainJob
from tests import yamlc

DATA = Path(__file__).resolve().parents[3] / "data"
RUNTIMES = DATA / "trainer" / "runtimes"
EXAMPLES = DATA / "kueue-v0.19.2" / "examples" / "trainjob"
TJ = TrainJob()


def runtime(file: str) -> dict[str, Any]:
    return yamlc.safe_load((RUNTIMES / f"{file}.yaml").read_text())


def train_job(
    runtime_name: str, kind: str = "ClusterTrainingRuntime", **trainer: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "default"},
        "spec": {"runtimeRef": {"name": runtime_name, "kind": kind}, "trainer": trainer},
    }


def resolved(job: dict[str, Any], found: dict[str, Any] | None) -> dict[str, Any]:
    return TJ.resolved(job, {ref: found for ref in TJ.references(job)})


def requests(template: Any, container: str = "node") -> Any:
    [c] = [c for c in template["spec"]["containers"] if c["name"] == container]
    return c.get("resources")


@pytest.mark.parametrize(
    ("file", "trainer", "want"),
    [
        ("torch_distributed", {}, [("node", 1)]),
        ("torch_distributed", {"numNodes": 4}, [("node", 4)]),
        ("jax_distributed", {"numNodes": 3}, [("node", 3)]),
        ("xgboost_distributed", {"numNodes": 2}, [("node", 2)]),
        # MPI: the launcher is the trainer's job, one pod; numNodes goes to the job named node,
        # less the launcher when it runs as a node.
        ("deepspeed_distributed", {}, [("launcher", 1), ("node", 1)]),
        ("deepspeed_distributed", {"numNodes": 4}, [("launcher", 1), ("node", 3)]),
        ("deepspeed_distributed", {"numNodes": 1}, [("launcher", 1), ("node", 1)]),
        (
            "torchtune_llama3_2_1B",
            {"numNodes": 2},
            [("dataset-initializer", 1), ("model-initializer", 1), ("node", 2)],
        ),
    ],
)
def test_trainers_runtimes_render_to_kueues_pod_sets(file, trainer, want):
    rt = runtime(file)
    job = resolved(train_job(rt["metadata"]["name"], **trainer), rt)
    assert [(p.name, p.count) for p in TJ.pod_sets(job)] == want


def test_kueues_documentation_example_renders_two_nodes_with_the_jobs_resources():
    [rt] = yamlc.safe_load_all(
        (EXAMPLES / "clustertrainingruntime-torch-distributed.yaml").read_text()
    )
    [job] = yamlc.safe_load_all((EXAMPLES / "trainjob-pytorch-distributed.yaml").read_text())
    assert isinstance(registry.for_object(job), TrainJob)
    [node] = TJ.pod_sets(resolved(job, rt))
    assert (node.name, node.count) == ("node", 2)
    assert requests(node.template) == {
        "requests": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"}
    }
    assert node.path.startswith("ClusterTrainingRuntime torch-distributed: spec.template")


def test_the_trainers_image_command_and_resources_go_to_the_node_container_of_its_job():
    rt = runtime("deepspeed_distributed")
    job = resolved(
        train_job(
            "deepspeed-distributed",
            image="me/train:1",
            command=["deepspeed"],
            resourcesPerNode={"limits": {"nvidia.com/gpu": "8"}},
        ),
        rt,
    )
    launcher, node = TJ.pod_sets(job)
    [launcher_node] = launcher.template["spec"]["containers"]
    assert launcher_node["image"] == "me/train:1"
    assert launcher_node["command"] == ["deepspeed"]
    # runLauncherAsNode: the resources go to both, the image to the launcher only.
    for pod_set in (launcher, node):
        assert requests(pod_set.template) == {"limits": {"nvidia.com/gpu": "8"}}
    assert node.template["spec"]["containers"][0]["image"] != "me/train:1"


def test_a_runtime_without_ml_policy_keeps_the_templates_parallelism_and_replicas():
    rt = runtime("torch_distributed")
    del rt["spec"]["mlPolicy"]
    rjobs = rt["spec"]["template"]["spec"]["replicatedJobs"]
    rjobs[0]["template"]["spec"]["parallelism"] = 3
    extra = copy.deepcopy(rjobs[0])
    extra["name"] = "foo"
    extra["replicas"] = 2
    del extra["template"]["metadata"]
    rjobs.append(extra)
    job = resolved(train_job("torch-distributed"), rt)
    assert [(p.name, p.count) for p in TJ.pod_sets(job)] == [("node", 3), ("foo", 6)]
    job = resolved(train_job("torch-distributed", numNodes=2), rt)
    assert [(p.name, p.count) for p in TJ.pod_sets(job)] == [("node", 2), ("foo", 6)]


def test_its_pods_are_ranked_as_the_jobset_trainer_makes_numbers_them():
    """Kueue reads a TrainJob's podSets from the JobSet the trainer makes: the topology
    ungater ranks each pod by its completion index within its Job's index (the Workload's
    topologyRequest names both labels and the number of Jobs)."""
    rt = runtime("torch_distributed")
    del rt["spec"]["mlPolicy"]
    rjob = rt["spec"]["template"]["spec"]["replicatedJobs"][0]
    del rjob["template"]["metadata"]  # not the trainer's step: its replicas are its own
    rjob["replicas"] = 3
    rjob["template"]["spec"]["parallelism"] = 2
    rjob["template"]["spec"]["template"].setdefault("metadata", {})["annotations"] = {
        "kueue.x-k8s.io/podset-preferred-topology": "cloud.provider.com/topology-block"
    }
    [node] = TJ.pod_sets(resolved(train_job("torch-distributed"), rt))
    assert node.count == 6
    request = template_topology(node)
    assert request is not None
    assert request_json(request) == {
        "preferred": "cloud.provider.com/topology-block",
        "podIndexLabel": "batch.kubernetes.io/job-completion-index",
        "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index",
        "subGroupCount": 3,
    }


def test_a_coscheduled_runtime_labels_the_pods_with_the_pod_group():
    rt = runtime("torch_distributed")
    rt["spec"]["podGroupPolicy"] = {"coscheduling": {"scheduleTimeoutSeconds": 60}}
    [node] = TJ.pod_sets(resolved(train_job("torch-distributed"), rt))
    assert node.template["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "tj"


def test_a_users_runtime_patch_places_the_pods_and_kueues_own_does_not_count():
    rt = runtime("torch_distributed")
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "tolerations"
    ] = [{"key": "old", "operator": "Exists"}]
    job = train_job("torch-distributed")

    def patch(manager: str, selector: dict[str, str]) -> dict[str, Any]:
        pod = {"spec": {"nodeSelector": selector, "tolerations": [{"key": manager}]}}
        entry = {"name": "node", "template": {"spec": {"template": pod}}}
        return {
            "manager": manager,
            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [entry]}}},
        }

    job["spec"]["runtimePatches"] = [
        patch("example.com/me", {"zone": "a"}),
        patch(MANAGER, {"x": "y"}),
    ]
    [node] = TJ.pod_sets(resolved(job, rt))
    assert node.template["spec"]["nodeSelector"] == {"zone": "a"}
    assert node.template["spec"]["tolerations"] == [{"key": "example.com/me"}]  # replaced


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (
            lambda j: j["spec"]["runtimeRef"].update(kind="Runtime"),
            "spec.runtimeRef",
            "unsupported runtime: Runtime.trainer.kubeflow.org",
        ),
        (lambda j: j["spec"]["runtimeRef"].pop("name"), "spec.runtimeRef.name", "is required"),
        (
            lambda j: j["spec"]["trainer"].update(numNodes=-1),
            "spec.trainer.numNodes",
            "must be a non-negative integer",
        ),
    ],
)
def test_what_cannot_be_read_is_refused_naming_the_field(change, field, message):
    rt = runtime("torch_distributed")
    job = train_job("torch-distributed")
    change(job)
    with pytest.raises(ManifestError) as err:
        TJ.pod_sets(TJ.resolved(job, {ref: rt for ref in TJ.references(job)}))
    assert err.value.path == field
    assert message in err.value.message


def test_a_missing_runtime_is_named_and_waits():
    job = train_job("torch-custom", kind="TrainingRuntime")
    [ref] = TJ.references(job)
    assert (ref.kind, ref.plural, ref.namespace, ref.name) == (
        "TrainingRuntime",
        "trainingruntimes",
        "default",
        "torch-custom",
    )
    with pytest.raises(MissingReferenceError) as err:
        TJ.pod_sets(resolved(job, None))
    assert err.value.message == (
        "TrainingRuntime default/torch-custom does not exist: the TrainJob is queued once it is "
        "created"
    )
    with pytest.raises(MissingReferenceError):
        TJ.pod_sets(job)  # never resolved: the webhook's case


def test_kueues_custom_example_is_refused_as_its_settings_reach_no_pod():
    """Its runtime names the trainer's container `trainer`, not `node`: trainer's own webhook
    refuses that runtime, and Kueue would admit the job asking for nothing."""
    [rt] = yamlc.safe_load_all((EXAMPLES / "trainingruntime-torch-custom.yaml").read_text())
    [job] = yamlc.safe_load_all((EXAMPLES / "trainjob-pytorch-custom.yaml").read_text())
    with pytest.raises(ManifestError) as err:
        TJ.pod_sets(resolved(job, rt))
    assert err.value.path == "spec.trainer.image"
    assert "TrainingRuntime team-a/torch-custom has no container named 'node'" in err.value.message


def test_admission_goes_into_kueues_runtime_patch_and_a_stop_empties_it():
    job = train_job("torch-distributed", numNodes=2)
    mine = {"manager": "example.com/me", "trainingRuntimeSpec": {"template": {"spec": {}}}}
    job["spec"]["runtimePatches"] = [mine]
    job["spec"]["suspend"] = True
    infos = {
        "node": PodSetInfo(
            2,
            node_selector={"instance-type": "spot"},
            tolerations=[{"key": "spot", "operator": "Exists"}],
            labels={"kueue.x-k8s.io/podset": "node"},
            annotations={"kueue.x-k8s.io/workload": "w"},
        )
    }
    patch = TJ.start_patch(job, infos)
    assert patch["spec"]["suspend"] is False
    assert patch["spec"]["runtimePatches"] == [
        mine,
        {
            "manager": MANAGER,
            "trainingRuntimeSpec": {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {
                                "name": "node",
                                "template": {
                                    "spec": {
                                        "template": {
                                            "metadata": {
                                                "labels": {"kueue.x-k8s.io/podset": "node"},
                                                "annotations": {"kueue.x-k8s.io/workload": "w"},
                                            },
                                            "spec": {
                                                "nodeSelector": {"instance-type": "spot"},
                                                "tolerations": [
                                                    {"key": "spot", "operator": "Exists"}
                                                ],
                                            },
                                        }
                                    }
                                },
                            }
                        ]
                    }
                }
            },
        },
    ]
    started = copy.deepcopy(job)
    started["spec"].update(patch["spec"])
    assert TJ.restore_patch(started, {}, {}) == {
        "spec": {
            "runtimePatches": [
                mine,
                {"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {}}}},
            ]
        }
    }


@pytest.mark.parametrize(
    ("status", "finished", "active", "ready"),
    [
        ({}, None, False, False),
        (
            {"jobsStatus": [{"name": "node", "active": 2, "ready": 1}]},
            None,
            True,
            False,
        ),
        (
            {"jobsStatus": [{"name": "node", "active": 2, "ready": 2}]},
            None,
            True,
            True,
        ),
        (
            {"conditions": [{"type": "Complete", "status": "True", "message": "jobset done"}]},
            ("Succeeded", "jobset done"),
            False,
            False,
        ),
        (
            {"conditions": [{"type": "Failed", "status": "True", "message": "deadline"}]},
            ("Failed", "deadline"),
            False,
            False,
        ),
    ],
)
def test_its_state_is_read_from_trainers_status(status, finished, active, ready):
    obj = {"status": status}
    assert TJ.finished(obj) == finished
    assert TJ.is_active(obj) is active
    assert TJ.pods_ready(obj) is ready


def test_the_webhook_adds_kueues_empty_runtime_patch_at_create_once():
    """Kueue's TrainJob webhook appends an empty entry of its manager (trainjob_webhook.go
    Default): trainer lets Kueue fill it later only if it is there. Another manager's entry is
    kept; the patch applied to what it made changes nothing more."""
    import jsonpatch

    from extender.core.jobframework.webhooks import queue_patch

    adapter = registry.ADAPTERS["trainer.kubeflow.org/trainjob"]
    job = train_job("torch-distributed")
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "user-queue"}
    theirs = {"manager": "example.com/mine", "trainer": {"numNodes": 2}}
    job["spec"]["runtimePatches"] = [theirs]
    patched = jsonpatch.apply_patch(job, queue_patch(job, adapter))
    assert patched["spec"]["runtimePatches"] == [
        theirs,
        {"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {}}}},
    ]
    assert patched["spec"]["suspend"] is True
    assert queue_patch(patched, adapter) == []
    again = jsonpatch.apply_patch(patched, queue_patch(job, adapter))
    assert again == patched
