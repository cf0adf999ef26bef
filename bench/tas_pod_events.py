"""The cost of a topology-placed pod's watch events in the placement cache, where a failed TAS node
is noticed (a pod that stops running on a failed host, a pod let through to a host that is not its
workload's).

    python bench/tas_pod_events.py [--hosts 1024] [--pods 4096] [--workloads 8]

One flavor over `hosts` hosts (16 per rack, 16 racks a block); `workloads` admitted Workloads
share the hosts, each with `pods` pods spread over its own hosts. Every pod then goes through what
the watch brings: created behind the topology gate, let through with its host's nodeSelector,
bound and Running, Succeeded, deleted; every event runs the store's transform and the placement's
handler under its lock, as the informer thread does. Prints one JSON object: events, µs per event
(median of 5 runs), and how many workloads the events had looked at again (none: every host is
healthy).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from extender.kube.api.placement import Placement, node_view, pod_transform
from extender.kube.api.resources import (
    NODES,
    PODS,
    RESOURCE_FLAVORS,
    TOPOLOGIES,
    WORKLOADS,
)
from extender.kube.api.store import Store

BLOCK, RACK, HOST = "example.com/block", "example.com/rack", "kubernetes.io/hostname"


def node(i: int) -> dict[str, Any]:
    labels = {"pool": "tas", BLOCK: f"b{i // 256}", RACK: f"r{i // 16}", HOST: f"h{i:05d}"}
    allocatable = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    return {
        "metadata": {"name": f"h{i:05d}", "labels": labels, "resourceVersion": str(i + 1)},
        "status": {
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def workload(w: int, hosts: list[str], pods: int) -> dict[str, Any]:
    per_host = pods // len(hosts)
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": f"wl{w}", "namespace": "default", "resourceVersion": "1"},
        "spec": {
            "queueName": "q",
            "podSets": [
                {
                    "name": "main",
                    "count": pods,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
                        }
                    },
                }
            ],
        },
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True"},
                {"type": "Admitted", "status": "True"},
            ],
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {
                        "name": "main",
                        "flavors": {"cpu": "tas"},
                        "count": pods,
                        "topologyAssignment": {
                            "levels": [HOST],
                            "domains": [{"values": [h], "count": per_host} for h in hosts],
                        },
                    }
                ],
            },
        },
    }


def pod_versions(w: int, i: int, host: str) -> list[tuple[str, dict[str, Any]]]:
    """The watch events of one pod's life, each a new resourceVersion."""
    meta = {
        "name": f"wl{w}-{i}",
        "namespace": "default",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": {"kueue.x-k8s.io/podset": "main"},
        "annotations": {
            "kueue.x-k8s.io/workload": f"wl{w}",
            "kueue.x-k8s.io/podset-unconstrained-topology": "true",
        },
    }
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}],
    }
    steps = []
    for n, (phase, change) in enumerate(
        (
            ("Pending", {}),
            ("Pending", {"schedulingGates": None, "nodeSelector": {HOST: host}}),
            ("Running", {"nodeName": host}),
            ("Succeeded", {}),
        )
    ):
        spec = {**spec, **change}
        version = {**meta, "resourceVersion": str(1_000_000 + 10 * i + n)}
        steps.append(("MODIFIED", {"metadata": version, "spec": spec, "status": {"phase": phase}}))
    steps.append(("DELETED", steps[-1][1]))
    return steps


def run(args: argparse.Namespace) -> tuple[float, int, int]:
    placement = Placement()
    store = Store()
    store.register(NODES, node_view)
    store.register(PODS, pod_transform(placement.inventory.is_checked))
    for resource in (RESOURCE_FLAVORS, WORKLOADS, TOPOLOGIES):
        store.register(resource)
    placement.attach(store)
    store.replace(
        TOPOLOGIES,
        [
            {
                "metadata": {"name": "t", "resourceVersion": "1"},
                "spec": {
                    "levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]
                },
            }
        ],
    )
    store.replace(
        RESOURCE_FLAVORS,
        [
            {
                "metadata": {"name": "tas", "resourceVersion": "1"},
                "spec": {"nodeLabels": {"pool": "tas"}, "topologyName": "t"},
            }
        ],
    )
    store.replace(NODES, [node_view(node(i)) for i in range(args.hosts)])
    names = [f"h{i:05d}" for i in range(args.hosts)]
    share = args.hosts // args.workloads
    events: list[tuple[str, dict[str, Any]]] = []
    for w in range(args.workloads):
        hosts = names[w * share : (w + 1) * share]
        store.record(WORKLOADS, workload(w, hosts, args.pods))
        for i in range(args.pods):
            events += pod_versions(w, i, hosts[i % len(hosts)])
    with placement.lock:
        placement.topology.take_disturbed()
    start = time.perf_counter()
    for kind, obj in events:
        store.apply(PODS, kind, obj)
    elapsed = time.perf_counter() - start
    with placement.lock:
        looked = len(placement.topology.take_disturbed())
    return elapsed * 1e6 / len(events), len(events), looked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, default=1024)
    parser.add_argument("--pods", type=int, default=4096)
    parser.add_argument("--workloads", type=int, default=8)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    results = [run(args) for _ in range(args.runs)]
    print(
        json.dumps(
            {
                "hosts": args.hosts,
                "workloads": args.workloads,
                "pods_per_workload": args.pods,
                "events": results[0][1],
                "us_per_event_p50": round(statistics.median(r[0] for r in results), 2),
                "workloads_looked_at_again": results[0][2],
            }
        )
    )


if __name__ == "__main__":
    main()
