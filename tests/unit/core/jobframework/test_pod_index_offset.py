"""Kueue's kueue.x-k8s.io/pod-index-offset: its webhook marks the workers of a LeaderWorkerSet
with a leader, and of an MPIJob whose launcher runs as a worker, whose pods number from 1 in
their podSet; the topology ungater ranks each such pod by its index less the offset. Not
written where the leader (launcher) is grouped with its workers: the group's ranks hold it."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from extender.core.api.topology import DomainAssignment, TopologyAssignment, TopologyRequest
from extender.core.jobframework import registry
from extender.core.jobframework.webhooks import queue_patch
from extender.core.tas.ungate import PodOnDomains, domains_for_gated
from extender.kube.api.placement import pod_view

OFFSET = "kueue.x-k8s.io/pod-index-offset"
GROUP = "kueue.x-k8s.io/podset-group-name"
LWS = registry.PARENTS["leaderworkerset.x-k8s.io/leaderworkerset"]
MPIJOB = registry.ADAPTERS["kubeflow.org/mpijob"]


def template(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta = {"annotations": annotations} if annotations else {}
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "agnhost"}]}}


def lws(leader: bool, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"size": 4, "workerTemplate": template(annotations)}
    if leader:
        spec["leaderTemplate"] = template(annotations)
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "lws", "namespace": "ns"},
        "spec": {"replicas": 1, "leaderWorkerTemplate": spec},
    }


def marked(obj: dict[str, Any]) -> dict[str, Any]:
    once = jsonpatch.apply_patch(copy.deepcopy(obj), LWS.template_ops(obj, "q"))
    assert LWS.template_ops(once, "q") == []  # the API server may call the webhook twice
    return dict(once["spec"]["leaderWorkerTemplate"])


def annotations(tpl: dict[str, Any]) -> dict[str, str]:
    return dict((tpl.get("metadata") or {}).get("annotations") or {})


def test_a_leaderworkersets_workers_beside_a_leader_get_the_offset_and_the_leader_none():
    spec = marked(lws(leader=True))
    assert annotations(spec["workerTemplate"])[OFFSET] == "1"
    assert OFFSET not in annotations(spec["leaderTemplate"])


def test_a_leaderworkerset_grouped_or_without_a_leader_gets_no_offset():
    spec = marked(lws(leader=True, annotations={GROUP: "same-group"}))
    assert OFFSET not in annotations(spec["workerTemplate"])
    assert OFFSET not in annotations(spec["leaderTemplate"])
    assert OFFSET not in annotations(marked(lws(leader=False))["workerTemplate"])


def mpijob(as_worker: bool, launcher: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "runPolicy": {"suspend": True},
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": template(launcher)},
            "Worker": {"replicas": 3, "template": template()},
        },
    }
    if as_worker:
        spec["runLauncherAsWorker"] = True
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {
            "name": "mpi",
            "namespace": "ns",
            "labels": {"kueue.x-k8s.io/queue-name": "q"},
        },
        "spec": spec,
    }


def queued(obj: dict[str, Any]) -> dict[str, Any]:
    once = jsonpatch.apply_patch(copy.deepcopy(obj), queue_patch(obj, MPIJOB))
    assert jsonpatch.apply_patch(copy.deepcopy(once), queue_patch(once, MPIJOB)) == once
    return dict(once["spec"]["mpiReplicaSpecs"])


def test_an_mpijobs_workers_get_the_offset_when_its_launcher_runs_as_a_worker():
    specs = queued(mpijob(as_worker=True))
    assert annotations(specs["Worker"]["template"])[OFFSET] == "1"
    assert OFFSET not in annotations(specs["Launcher"]["template"])
    assert OFFSET not in annotations(queued(mpijob(as_worker=False))["Worker"]["template"])
    grouped = queued(mpijob(as_worker=True, launcher={GROUP: "same-group"}))
    assert OFFSET not in annotations(grouped["Worker"]["template"])


def worker_pod(index: int, offset: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"mpi-worker-{index}",
        "namespace": "ns",
        "labels": {"kueue.x-k8s.io/podset": "worker",
                   "training.kubeflow.org/replica-index": str(index)},
        "annotations": {"kueue.x-k8s.io/workload": "wl",
                        "kueue.x-k8s.io/podset-preferred-topology": "block"},
    }  # fmt: skip
    if offset is not None:
        meta["annotations"][OFFSET] = offset
    gates = [{"name": "kueue.x-k8s.io/topology"}]
    return {"metadata": meta, "spec": {"schedulingGates": gates, "containers": []}}


def test_the_ungater_reads_a_pods_offset_and_ranks_the_workers_from_it():
    """Workers 1..3 on three hosts: worker 1 to the first host (rank 0), worker 3 to the
    last; a pod's offset that is not a number is read as None (its ranks are not used)."""
    views = [pod_view(worker_pod(i, "1")) for i in (3, 1, 2)]
    assert {v.topology.index_offset for v in views if v.topology} == {1}
    assert pod_view(worker_pod(1, "x")).topology.index_offset is None  # type: ignore[union-attr]
    assert pod_view(worker_pod(1, None)).topology.index_offset == 0  # type: ignore[union-attr]
    assignment = TopologyAssignment(
        ("kubernetes.io/hostname",),
        tuple(DomainAssignment((host,), 1) for host in ("h1", "h2", "h3")),
    )
    request = TopologyRequest(pod_index_label="training.kubeflow.org/replica-index")
    pods = [
        PodOnDomains(v.key, t.gated, t.labels, t.node_selector)
        for v in views
        if (t := v.topology) is not None
    ]
    chosen = domains_for_gated(assignment, pods, request, 3, offset=1)
    assert {key: s["kubernetes.io/hostname"] for key, s in chosen.items()} == {
        "ns/mpi-worker-1": "h1",
        "ns/mpi-worker-2": "h2",
        "ns/mpi-worker-3": "h3",
    }
