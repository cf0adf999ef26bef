"""Kueue v0.19.2 test/e2e/sequential/baseline/custom_metrics_test.go, ported: with the
CustomMetricLabels gate and metrics.customLabels of kind Workload, a pod's (or a pod group's)
labels and annotations those name are copied to its Workload, with labelKeysToCopy's; a group
whose members disagree on such an annotation gets no Workload (extender/core/config/
custom_labels.py; the copy in extender/kube/api/objects.py and pod_groups/workloads.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.restarts import restart_with
from tests.e2e.kueue.util import (
    CONFIGURATION,
    TIMEOUT,
    Cluster,
    Tower,
    consistently,
    eventually,
    make_cluster_queue,
    make_flavor_quotas,
    make_group,
    make_local_queue,
    make_pod,
    make_resource_flavor,
    pod_workload_name,
)

pytestmark = pytest.mark.e2e
GO = "sequential/baseline/custom_metrics_test.go"
WHEN = "Pod groups Custom metric labels enabled "


def custom_labels_configuration() -> str:
    document = yaml.safe_load(CONFIGURATION)
    document["featureGates"] = {"CustomMetricLabels": True}
    document["integrations"]["labelKeysToCopy"] = ["toCopyKeyIntegration"]
    document["metrics"]["customLabels"] = [
        {"name": "custom_label_key", "sourceLabelKey": "toCopyKeyCustom",
         "sourceKind": "Workload", "trackedValues": ["custom_value"]},
        {"name": "custom_annotation_key", "sourceAnnotationKey": "toCopyAnnotation",
         "sourceKind": "Workload", "trackedValues": ["annotation_value"]},
    ]  # fmt: skip
    return yaml.safe_dump(document)


@pytest.fixture(scope="module")
def custom_labels(tower: Tower) -> Iterator[None]:
    try:
        restart_with(tower, custom_labels_configuration())
        yield
    finally:
        tower.restart_controller()


@pytest.fixture
def queue(custom_labels: None, cluster: Cluster, kubelet_namespaces: set[str]) -> Iterator[str]:
    ns = cluster.create_namespace_from_prefix("pod-e2e-")
    kubelet_namespaces.add(ns)
    flavor, cq = f"on-demand-{ns}", f"cq-{ns}"
    cluster.create("resourceflavors", make_resource_flavor(flavor, {"instance-type": "on-demand"}))
    cluster.create_active(
        "clusterqueues", make_cluster_queue(cq, make_flavor_quotas(flavor, cpu="5"))
    )
    cluster.create_active("localqueues", make_local_queue("queue", ns, cq), ns)
    yield ns
    cluster.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    cluster.delete_namespace(ns)
    cluster.expect_deleted("clusterqueues", cq)
    cluster.expect_deleted("resourceflavors", flavor)


def labelled(pod: dict, labels: dict[str, str], annotations: dict[str, str]) -> dict:
    pod["metadata"]["labels"].update(labels)
    pod["metadata"]["annotations"].update(annotations)
    return pod


def expect_copied(wl: dict) -> None:
    labels, annotations = (
        wl["metadata"].get("labels") or {},
        wl["metadata"].get("annotations") or {},
    )
    assert labels.get("toCopyKeyIntegration") == "integration_value", labels
    assert labels.get("toCopyKeyCustom") == "custom_value", labels
    assert "dontCopyKey" not in labels, labels
    assert annotations.get("toCopyAnnotation") == "annotation_value", annotations
    assert "dontCopyAnnotation" not in annotations, annotations


@kueue_case(GO, WHEN + "should successfully copy labels and annotations for a single pod")
def test_a_pods_labels_and_annotations_reach_its_workload(cluster: Cluster, queue: str) -> None:
    ns = queue
    pod = labelled(
        make_pod("test-pod", ns, queue="queue"),
        {"toCopyKeyIntegration": "integration_value", "toCopyKeyCustom": "custom_value",
         "dontCopyKey": "ignored"},
        {"toCopyAnnotation": "annotation_value", "dontCopyAnnotation": "ignored"},
    )  # fmt: skip
    created = cluster.core.create_namespaced_pod(ns, pod)
    name = pod_workload_name(created)
    expect_copied(eventually(lambda: cluster.workload(name, ns), TIMEOUT, f"Workload {name}"))


def group_of_two(ns: str, first: dict[str, str], second: dict[str, str]) -> list[dict]:
    one, two = make_group(make_pod("test-group", ns, queue="queue"), 2)
    one["metadata"]["name"], two["metadata"]["name"] = "test-pod1", "test-pod2"
    one["metadata"]["annotations"].update(first)
    two["metadata"]["annotations"].update(second)
    return [one, two]


@kueue_case(GO, WHEN + "should successfully copy labels and annotations for a pod group")
def test_a_groups_labels_and_annotations_reach_its_workload(cluster: Cluster, queue: str) -> None:
    ns = queue
    one, two = group_of_two(
        ns,
        {"toCopyAnnotation": "annotation_value", "dontCopyAnnotation": "ignored1"},
        {"toCopyAnnotation": "annotation_value", "dontCopyAnnotation": "ignored2"},
    )
    one["metadata"]["labels"]["dontCopyKey"] = "dontCopyValue"
    two["metadata"]["labels"].update(toCopyKeyIntegration="integration_value",
                                     toCopyKeyCustom="custom_value",
                                     dontCopyKey="dontCopyAnotherValue")  # fmt: skip
    for pod in (one, two):
        cluster.core.create_namespaced_pod(ns, pod)
    expect_copied(eventually(lambda: cluster.workload("test-group", ns), TIMEOUT, "test-group"))


@kueue_case(
    GO, WHEN + "should not create workload for a pod group if there is a custom annotation mismatch"
)
def test_a_group_that_disagrees_on_an_annotation_gets_no_workload(
    cluster: Cluster, queue: str
) -> None:
    ns = queue
    for pod in group_of_two(
        ns, {"toCopyAnnotation": "annotation_value"}, {"toCopyAnnotation": "mismatch_value"}
    ):
        cluster.core.create_namespaced_pod(ns, pod)

    def none() -> bool:
        assert cluster.workload("test-group", ns) is None, "a Workload test-group"
        return True

    consistently(none, 1.0, "no Workload for the group")
