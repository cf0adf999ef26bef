"""Kueue's WorkloadIdentifierAnnotations gate (on by default): a StatefulSet's or a
LeaderWorkerSet's pod is told its group's name in an annotation with it, in a label without
it; a pod already told is read where the gate reads it (utilpod.GetPodGroupName)."""

from __future__ import annotations

from typing import Any

import pytest

from extender.core.jobframework.adapter import workload_name
from extender.core.jobframework.registry import PARENTS
from extender.core.jobframework.serving import pod_group_name
from tests.unit.core.jobframework.test_pod_groups import lws, lws_pod

GROUP = "kueue.x-k8s.io/pod-group-name"
STS = PARENTS["statefulset"]
LWS = PARENTS["leaderworkerset.x-k8s.io/leaderworkerset"]
STS_UID = "5b3c2f0e-sts"


def statefulset() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "ns", "uid": STS_UID},
            "spec": {"replicas": 3}}  # fmt: skip


def sts_pod(labels: dict | None = None, annotations: dict | None = None) -> dict[str, Any]:
    owner = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": STS_UID,
             "controller": True}  # fmt: skip
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-0", "namespace": "ns", "ownerReferences": [owner],
                         "labels": labels or {}, "annotations": annotations or {}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}  # fmt: skip


WEB = workload_name("StatefulSet", "apps", "web", STS_UID)


@pytest.mark.parametrize(
    ("gate", "where", "not_in"),
    [(True, "annotations", "labels"), (False, "labels", "annotations")],
    ids=["gate on: an annotation", "gate off: a label"],
)
def test_a_statefulsets_pod_is_told_its_group_where_the_gate_says(gate, where, not_in):
    patch = STS.stamp(statefulset(), sts_pod(), identifier_annotations=gate)
    assert patch is not None
    assert patch["metadata"][where][GROUP] == WEB
    assert GROUP not in patch["metadata"].get(not_in, {})
    # The rest of Kueue's stamp is annotations either way.
    assert patch["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "3"


@pytest.mark.parametrize(
    ("gate", "where", "not_in"),
    [(True, "annotations", "labels"), (False, "labels", "annotations")],
    ids=["gate on: an annotation", "gate off: a label"],
)
def test_a_leaderworkersets_pod_is_told_its_group_where_the_gate_says(gate, where, not_in):
    patch = LWS.stamp(lws(), lws_pod("1", worker=True), identifier_annotations=gate)
    assert patch is not None
    assert patch["metadata"][where][GROUP] == LWS.workload_names(lws())[1]
    assert GROUP not in patch["metadata"].get(not_in, {})
    assert patch["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] == "worker"


@pytest.mark.parametrize(
    ("labels", "annotations", "gate", "told"),
    [
        ({GROUP: WEB}, {}, True, True),  # told as a label before: the gate falls back to it
        ({}, {GROUP: WEB}, True, True),
        ({GROUP: WEB}, {}, False, True),
        ({}, {GROUP: WEB}, False, False),  # without the gate the annotation is not read
        ({GROUP: "another"}, {}, True, False),
    ],
)
def test_a_statefulsets_pod_is_told_once_as_the_gate_reads_its_group(
    labels, annotations, gate, told
):
    patch = STS.stamp(statefulset(), sts_pod(labels, annotations), identifier_annotations=gate)
    assert (patch is None) is told


@pytest.mark.parametrize(
    ("labels", "annotations", "gate", "name"),
    [
        ({GROUP: "l"}, {GROUP: "a"}, True, "a"),
        ({GROUP: "l"}, {GROUP: "a"}, False, "l"),
        ({}, {GROUP: "a"}, False, None),
        ({GROUP: "l"}, {GROUP: ""}, True, "l"),
    ],
)
def test_a_pods_group_is_read_as_kueue_reads_it(labels, annotations, gate, name):
    assert pod_group_name(sts_pod(labels, annotations), gate) == name
