"""metrics.customLabels of kind Workload on the API double (Kueue's CustomMetricLabels gate): a
job's and a pod group's Workload is made with the labels and annotations those entries read,
besides labelKeysToCopy's; a group whose members disagree on such an annotation gets none and
says why; and the Configuration file reaches the controller's settings, only with the gate."""

from __future__ import annotations

import argparse

from extender.kube import config_file
from extender.kube.api import resources as r
from tests.controller.conftest import eventually
from tests.controller.test_pod_groups import events, group_pods, workload
from tests.controller.test_pods import example_pod, setup

LABELS = ("toCopyKeyIntegration", "toCopyKeyCustom")
ANNOTATIONS = ("toCopyAnnotation",)
CONFIGURATION = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
featureGates: {CustomMetricLabels: %s}
integrations:
  frameworks: [batch/job, pod]
  labelKeysToCopy: [toCopyKeyIntegration]
metrics:
  customLabels:
  - {name: custom_label_key, sourceLabelKey: toCopyKeyCustom, sourceKind: Workload,
     trackedValues: [custom_value]}
  - {name: custom_annotation_key, sourceAnnotationKey: toCopyAnnotation, sourceKind: Workload,
     trackedValues: [annotation_value]}
"""


def test_a_jobs_workload_is_made_with_the_annotations_and_labels_the_entries_read(
    cluster, start_controller
):
    setup(cluster)
    start_controller(label_keys_to_copy=LABELS, annotations_to_copy=ANNOTATIONS)
    job = cluster.job(
        "labelled",
        "1",
        labels={"toCopyKeyIntegration": "integration_value", "toCopyKeyCustom": "custom_value",
                "dontCopyKey": "ignored"},
    )  # fmt: skip
    made = eventually(lambda: cluster.workload_of(job), what="the Job's Workload")
    labels = made["metadata"]["labels"]
    assert labels["toCopyKeyIntegration"] == "integration_value"
    assert labels["toCopyKeyCustom"] == "custom_value"
    assert "dontCopyKey" not in labels


def test_a_pods_workload_is_made_with_its_annotation_of_the_keys(cluster, start_controller):
    setup(cluster)
    start_controller(label_keys_to_copy=LABELS, annotations_to_copy=ANNOTATIONS)
    pod = example_pod()
    pod["metadata"].setdefault("annotations", {}).update(
        toCopyAnnotation="annotation_value", dontCopyAnnotation="ignored"
    )
    created = cluster.admin.create(r.PODS, pod, "default")
    uid = created["metadata"]["uid"]

    def made():
        return next(
            (w for w in cluster.api.list("workloads", "default")
             if (w["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") == uid),
            None,
        )  # fmt: skip

    annotations = eventually(made, what="the Pod's Workload")["metadata"]["annotations"]
    assert annotations["toCopyAnnotation"] == "annotation_value"
    assert "dontCopyAnnotation" not in annotations


def test_a_groups_members_give_an_annotation_and_members_that_disagree_get_no_workload(
    cluster, start_controller
):
    setup(cluster)
    start_controller(label_keys_to_copy=LABELS, annotations_to_copy=ANNOTATIONS)
    leader, worker = group_pods()
    leader["metadata"]["annotations"].update(toCopyAnnotation="annotation_value",
                                             dontCopyAnnotation="ignored1")  # fmt: skip
    worker["metadata"]["annotations"].update(toCopyAnnotation="mismatch_value",
                                             dontCopyAnnotation="ignored2")  # fmt: skip
    first = cluster.admin.create(r.PODS, leader, "default")
    second = cluster.admin.create(r.PODS, worker, "default")
    said = eventually(
        lambda: [m for m in events(cluster, "ErrWorkloadCompose") if "annotation" in m],
        what="why the group has no Workload",
    )
    assert said[0] == (
        f"pods {first['metadata']['name']} and {second['metadata']['name']} have different "
        "values of annotation toCopyAnnotation: annotation_value!=mismatch_value "
        "(metrics.customLabels)"
    ), said
    assert workload(cluster, "sample-group") is None
    # The worker made again agreeing: the group's Workload carries the one value, not the rest.
    gone = second["metadata"]["name"]
    cluster.admin.delete(r.PODS, gone, "default")
    eventually(lambda: cluster.get("pods", gone, "default") is None, what="the worker gone")
    worker["metadata"]["annotations"]["toCopyAnnotation"] = "annotation_value"
    worker["metadata"]["labels"]["toCopyKeyCustom"] = "custom_value"
    cluster.admin.create(r.PODS, worker, "default")
    made = eventually(lambda: workload(cluster, "sample-group"), what="the group's Workload")
    assert made["metadata"]["annotations"]["toCopyAnnotation"] == "annotation_value"
    assert "dontCopyAnnotation" not in made["metadata"]["annotations"]
    assert made["metadata"]["labels"]["toCopyKeyCustom"] == "custom_value"


def settled(tmp_path, gate: str) -> argparse.Namespace:
    path = tmp_path / "kueue.yaml"
    path.write_text(CONFIGURATION % gate)
    args = argparse.Namespace(config=str(path))
    config_file.settle(args)
    return args


def test_the_configuration_file_adds_the_entries_keys_only_with_the_gate(tmp_path):
    on = settled(tmp_path, "true")
    assert on.label_keys_to_copy == LABELS
    assert on.annotations_to_copy == ANNOTATIONS
    off = settled(tmp_path, "false")  # Kueue copies labelKeysToCopy alone
    assert off.label_keys_to_copy == ("toCopyKeyIntegration",)
    assert off.annotations_to_copy == ()
