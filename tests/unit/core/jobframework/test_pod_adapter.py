"""The Pod adapter and the Deployment's template marking, table-driven: what the webhook adds
(applied twice, the same pod), what admission changes in one patch, how a pod's end is read,
whose pods are left to their owner."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from extender.core.api.parse import ManifestError
from extender.core.jobframework import registry
from extender.core.jobframework.adapter import PodSetInfo
from extender.core.jobframework.parent import Deployment
from extender.core.jobframework.pod import ADMISSION_GATE, FINALIZER, Pod
from extender.core.jobframework.topology import TOPOLOGY_GATE
from extender.core.jobframework.webhooks import queue_patch

POD = Pod()


def pod(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"kueue.x-k8s.io/queue-name": "q"}, **meta},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    }


@pytest.mark.parametrize(
    ("meta", "finalizers"),
    [
        ({}, [FINALIZER]),
        ({"finalizers": ["example.com/keep"]}, ["example.com/keep", FINALIZER]),
        # A Deployment's pod: its parent queues it, so no finalizer.
        ({"annotations": {"kueue.x-k8s.io/pod-suspending-parent": "deployment"}}, None),
    ],
)
def test_the_webhook_gates_labels_and_holds_a_pod_and_applies_twice_the_same(meta, finalizers):
    obj = pod(**meta)
    once = jsonpatch.apply_patch(obj, queue_patch(obj, POD))
    twice = jsonpatch.apply_patch(once, queue_patch(once, POD))
    assert once == twice
    assert once["spec"]["schedulingGates"] == [{"name": ADMISSION_GATE}, {"name": TOPOLOGY_GATE}]
    assert once["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    assert once["metadata"].get("finalizers") == finalizers
    assert POD.is_suspended(once)
    assert not POD.is_suspended(obj)


def test_an_unlabelled_pod_is_not_queued():
    obj = pod()
    del obj["metadata"]["labels"]
    assert queue_patch(obj, POD) == []


def test_admission_ungates_and_places_in_one_patch():
    obj = pod()
    obj["spec"]["schedulingGates"] = [{"name": "example.com/other"}, {"name": ADMISSION_GATE}]
    obj["spec"]["nodeSelector"] = {"zone": "a"}
    obj["spec"]["tolerations"] = [{"key": "mine", "operator": "Exists"}]
    info = PodSetInfo(
        1,
        node_selector={"instance-type": "spot"},
        tolerations=[{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
        labels={"kueue.x-k8s.io/podset": "main"},
        scheduler_name="tower",
    )
    patch = POD.start_patch(obj, {"main": info})
    assert patch == {
        "spec": {
            "schedulingGates": [{"name": "example.com/other"}],
            "nodeSelector": {"zone": "a", "instance-type": "spot"},
            "tolerations": [
                {"key": "mine", "operator": "Exists"},
                {"key": "spot", "operator": "Exists", "effect": "NoSchedule"},
            ],
        },
        "metadata": {"labels": {"kueue.x-k8s.io/podset": "main"}},
    }  # no schedulerName: a pod's cannot change
    lone = pod()
    lone["spec"]["schedulingGates"] = [{"name": ADMISSION_GATE}]
    assert POD.start_patch(lone, {"main": PodSetInfo(1)}) == {"spec": {"schedulingGates": None}}


def test_a_start_without_a_topology_takes_the_topology_gate_off_and_one_with_keeps_it():
    """Kueue's pod controller `prepare`: every queued pod is created behind the topology gate
    too; admitted without a topology assignment, both gates go at once; with one, the
    topology gate stays for the ungater."""
    obj = pod()
    obj["spec"]["schedulingGates"] = [{"name": ADMISSION_GATE}, {"name": TOPOLOGY_GATE}]
    assert POD.start_patch(obj, {"main": PodSetInfo(1)}) == {"spec": {"schedulingGates": None}}
    placed = PodSetInfo(1, scheduling_gates=[{"name": TOPOLOGY_GATE}])
    assert POD.start_patch(obj, {"main": placed}) == {
        "spec": {"schedulingGates": [{"name": TOPOLOGY_GATE}]}
    }


@pytest.mark.parametrize(
    ("status", "meta", "spec", "finished", "active"),
    [
        ({}, {}, {}, None, False),
        ({"phase": "Running"}, {}, {"nodeName": "n"}, None, True),
        ({"phase": "Succeeded"}, {}, {"nodeName": "n"}, ("Succeeded", "Pod succeeded"), False),
        ({"phase": "Failed", "message": "OOM"}, {}, {"nodeName": "n"}, ("Failed", "OOM"), False),
        # Deleted before it ran: nothing of it runs, its Workload ends now.
        (
            {"phase": "Pending"},
            {"deletionTimestamp": "2026-12-01T00:00:00Z"},
            {},
            ("OwnerNotFound", "The workload's owner no longer exists"),
            False,
        ),
        # Deleted while it runs: it holds its quota until its containers stop.
        (
            {"phase": "Running"},
            {"deletionTimestamp": "2026-12-01T00:00:00Z"},
            {"nodeName": "n"},
            None,
            True,
        ),
    ],
)
def test_a_pods_end_and_activity(status, meta, spec, finished, active):
    obj = pod(**meta)
    obj["spec"].update(spec)
    obj["status"] = status
    assert POD.finished(obj) == finished
    assert POD.is_active(obj) is active


@pytest.mark.parametrize(
    ("owner", "child"),
    [
        ({"apiVersion": "batch/v1", "kind": "Job"}, True),
        ({"apiVersion": "ray.io/v1", "kind": "RayCluster"}, True),
        ({"apiVersion": "apps/v1", "kind": "ReplicaSet"}, False),  # a Deployment's: queued
        ({"apiVersion": "batch/v1", "kind": "Job", "controller": False}, False),
    ],
)
def test_a_pod_of_a_managed_kind_is_left_to_its_owner(owner, child):
    ref = {"name": "o", "uid": "u", "controller": True, **owner}
    assert POD.is_child(pod(ownerReferences=[ref])) is child


def test_the_pod_is_one_pod_set_and_a_group_without_its_count_is_refused():
    [main] = POD.pod_sets(pod())
    assert (main.name, main.count) == ("main", 1)
    assert POD.group_of(pod()) is None
    grouped = pod(annotations={"kueue.x-k8s.io/pod-group-name": "g"})
    with pytest.raises(ManifestError) as err:
        POD.pod_sets(grouped)
    assert err.value.path == "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]"


def test_the_finalizer_comes_off_alone():
    obj = pod(finalizers=["example.com/keep", FINALIZER])
    assert POD.holds_finalizer(obj)
    assert POD.release_patch(obj) == {"metadata": {"finalizers": ["example.com/keep"]}}
    assert POD.release_patch(pod(finalizers=[FINALIZER])) == {"metadata": {"finalizers": None}}


def test_a_deployments_template_is_marked_for_its_queue_once():
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "labels": {"kueue.x-k8s.io/priority-class": "high"}},
        "spec": {"template": {"metadata": {"labels": {"app": "x"}}, "spec": {}}},
    }
    parent = registry.PARENTS["deployment"]
    assert isinstance(parent, Deployment)
    marked = jsonpatch.apply_patch(copy.deepcopy(deployment), parent.template_ops(deployment, "q"))
    meta = marked["spec"]["template"]["metadata"]
    assert meta["labels"] == {
        "app": "x",
        "kueue.x-k8s.io/managed": "true",
        "kueue.x-k8s.io/queue-name": "q",
        "kueue.x-k8s.io/priority-class": "high",
    }
    assert meta["annotations"] == {"kueue.x-k8s.io/pod-suspending-parent": "deployment"}
    assert parent.template_ops(marked, "q") == []


def test_a_pod_another_controller_suspends_is_its_groups_member():
    """Kueue's pod_test.go "Pod should be admitted after the group labels are added": a pod
    suspended by a controller Kueue does not know is grouped by its group labels."""
    grouped = pod(
        labels={"kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/pod-group-name": "test-group"},
        annotations={
            "kueue.x-k8s.io/pod-suspending-parent": "OtherController",
            "kueue.x-k8s.io/pod-group-total-count": "1",
        },
    )
    named = POD.group_of(grouped)
    assert named is not None
    assert named[0] == "test-group"


def test_a_pod_asking_for_a_topology_is_gated_for_it_at_create_and_applies_twice_the_same():
    """Kueue's tas_test.go: such a pod is created behind both gates (a gate can only be taken
    off later)."""
    obj = pod(annotations={"kueue.x-k8s.io/podset-required-topology": "kubernetes.io/hostname"})
    once = jsonpatch.apply_patch(obj, queue_patch(obj, POD))
    twice = jsonpatch.apply_patch(once, queue_patch(once, POD))
    assert once == twice
    assert once["spec"]["schedulingGates"] == [
        {"name": ADMISSION_GATE},
        {"name": "kueue.x-k8s.io/topology"},
    ]
