"""The scheduler extender and the placement planner at 5,000 nodes and 50,000 bound pods.

Nodes and pods are shaped like those a real kube-apiserver v1.32 listed
(shared/fixtures/real-apiserver: nodes/node-gpu-node-1, lifecycle/06-pod...: managedFields,
status, the Job controller's labels), go through the cache's own transforms in pages of 500
as an informer's list does, and feed the inventory through the store's handlers. Then:
- the cache's memory (RSS growth, and the process's peak);
- filter + prioritize latency over loopback with keep-alive, from a client in another
  process, for 500 candidate node names (nodeCacheCapable: true) and for 500 full Nodes;
- planning time for a workload of 64 pods of 8 GPUs.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import random
import resource
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from extender.core.api.models import (  # noqa: E402
    Admission,
    PodSet,
    PodSetAssignment,
    Workload,
)
from extender.core.placement.fit import Plan, PlannedPodSet  # noqa: E402
from extender.gc_tuning import tune_for_scheduling  # noqa: E402
from extender.kube.api.placement import Placement, node_view, pod_transform  # noqa: E402
from extender.kube.api.resources import NODES, PODS, RESOURCE_FLAVORS, WORKLOADS  # noqa: E402
from extender.kube.api.store import Store  # noqa: E402
from extender.kube.servers.scheduler_extender import SchedulerExtender, serve  # noqa: E402
from tests.fixtures import load  # noqa: E402

GPU = "nvidia.com/gpu"
NODE = load("nodes/node-gpu-node-1.after-taint-removed.json")
POD = load("lifecycle/06-pod.created-by-job-controller-and-scheduled.json")


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def make_node(i: int) -> dict[str, Any]:
    node = copy.deepcopy(NODE)
    meta = node["metadata"]
    name = f"gpu-node-{i:05d}"
    meta["name"] = name
    meta["uid"] = f"{i:08d}-aaaa-4000-8000-000000000000"
    meta["resourceVersion"] = str(1000 + i)
    meta["labels"] = {
        **meta.get("labels", {}),
        "kubernetes.io/hostname": name,
        "gpu.example.com/model": "a100",
        "topology.kubernetes.io/zone": f"zone-{i % 4}",
        "node.kubernetes.io/instance-type": "a2-highgpu-8g",
    }
    node["status"]["allocatable"] = {
        "cpu": "96",
        "memory": "680Gi",
        "pods": "110",
        GPU: "8",
    }
    node["status"]["capacity"] = dict(node["status"]["allocatable"])
    return node


def make_pod(i: int, node: str, gpus: int, workload: str | None) -> dict[str, Any]:
    pod = copy.deepcopy(POD)
    meta = pod["metadata"]
    meta["name"] = f"pod-{i:06d}"
    meta["uid"] = f"{i:08d}-bbbb-4000-8000-000000000000"
    meta["resourceVersion"] = str(100_000 + i)
    if workload:
        meta.setdefault("annotations", {})["kueue.x-k8s.io/workload"] = workload
        meta.setdefault("labels", {})["kueue.x-k8s.io/podset"] = "main"
    pod["spec"]["nodeName"] = node
    resources = pod["spec"]["containers"][0].setdefault("resources", {})
    resources["requests"] = {"cpu": "4", "memory": "16Gi", **({GPU: str(gpus)} if gpus else {})}
    resources["limits"] = {GPU: str(gpus)} if gpus else {}
    pod["status"]["phase"] = "Running"
    return pod


def fill(nodes: int, pods: int, plans: int, rng: random.Random) -> tuple[Placement, Store]:
    placement = Placement()
    store = Store()
    store.register(NODES, node_view)
    store.register(PODS, pod_transform(placement.inventory.is_checked))
    store.register(RESOURCE_FLAVORS)
    store.register(WORKLOADS)
    placement.attach(store)
    store.replace(
        RESOURCE_FLAVORS,
        [
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": "a100", "resourceVersion": "1"},
                "spec": {"nodeLabels": {"gpu.example.com/model": "a100"}},
            }
        ],
    )
    page: list[Any] = []
    for i in range(nodes):
        page.append(node_view(make_node(i)))
    store.replace(NODES, page)
    # Pods: ten per node; on nine nodes in ten about half use GPUs (1, 2 or 4), leaving those
    # nodes partly used; the pods of the tenth node use none (whole nodes for big jobs).
    free = {f"gpu-node-{i:05d}": 8 for i in range(nodes)}
    names = list(free)
    transform = pod_transform(placement.inventory.is_checked)
    views: list[Any] = []
    for i in range(pods):
        index = rng.randrange(nodes)
        node = names[index]
        gpus = rng.choice((0, 0, 1, 2, 4))
        if gpus > free[node] or index % 10 == 0:
            gpus = 0
        free[node] -= gpus
        views.append(transform(make_pod(i, node, gpus, None)))
    store.replace(PODS, views)
    del views
    # Admitted workloads holding plans: one node's worth of room each, not bound yet.
    roomy = [n for i, (n, f) in enumerate(free.items()) if f >= 2 and i % 10]
    with placement.lock:
        for j in range(plans):
            node = roomy[j % len(roomy)]
            if free[node] < 2:
                continue
            free[node] -= 2
            key = f"team-{j % 50}/job-{j}"
            plan = Plan(key, {"main": PlannedPodSet({GPU: 2}, {node: 1}, ("a100",))})
            placement.inventory.record(key, plan)
    return placement, store


def planning(placement: Placement, pods: int, gpus: int, repeat: int) -> dict[str, Any]:
    workload = Workload(
        "default",
        "big",
        "uid-big",
        "gpus",
        (PodSet("main", pods, {"cpu": 8000, GPU: gpus}),),
    )
    admission = Admission(
        "gpu-queue",
        (PodSetAssignment("main", {"cpu": "a100", GPU: "a100"}, {}, pods),),
    )
    times = []
    outcome: Any = None
    for _ in range(repeat):
        start = time.perf_counter()
        with placement.lock:
            outcome = placement.inventory.plan(workload, admission)
        times.append((time.perf_counter() - start) * 1000)
    placed = sum(outcome.pod_sets["main"].nodes.values()) if isinstance(outcome, Plan) else 0
    return {
        "pods": pods,
        "gpus_per_pod": gpus,
        "placed_pods": placed,
        "refusal": outcome if isinstance(outcome, str) else None,
        "p50_ms": round(statistics.median(times), 3),
        "p99_ms": round(percentile(times, 99), 3),
    }


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


CLIENT = textwrap.dedent(
    """
    import json, sys, time
    from http.client import HTTPConnection
    port, rounds, warmup = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    bodies = json.load(sys.stdin)
    conn = HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json"}
    out = []
    for i in range(warmup + rounds):
        f, p = bodies[i % len(bodies)]
        start = time.perf_counter()
        for path, body in (("/scheduler/filter", f), ("/scheduler/prioritize", p)):
            conn.request("POST", path, body.encode(), headers)
            r = conn.getresponse()
            r.read()
            assert r.status == 200, r.status
        if i >= warmup:
            out.append((time.perf_counter() - start) * 1000)
    print(json.dumps(out))
    """
)


def latency(port: int, bodies: list[tuple[str, str]], rounds: int) -> dict[str, Any]:
    """filter then prioritize for one pod, as kube-scheduler does, from another process."""
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, str(port), str(rounds), str(min(200, rounds))],
        input=json.dumps(bodies),
        capture_output=True,
        text=True,
        check=True,
    )
    times = json.loads(done.stdout)
    return {
        "requests": 2 * len(times),
        "p50_ms": round(statistics.median(times), 3),
        "p99_ms": round(percentile(times, 99), 3),
        "max_ms": round(max(times), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--plans", type=int, default=1000)
    parser.add_argument("--candidates", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument(
        "--default-gc", action="store_true", help="keep Python's automatic collection on"
    )
    args = parser.parse_args()
    rng = random.Random(7)
    gc.collect()
    before = rss_mib()
    placement, _store = fill(args.nodes, args.pods, args.plans, rng)
    gc.collect()
    cache_mib = rss_mib() - before
    if not args.default_gc:
        tune_for_scheduling()  # as the controller runs (extender/gc_tuning.py)

    server = serve(SchedulerExtender(placement, lambda: True), "127.0.0.1:0")
    port = server.server_address[1]
    pod_spec = POD["spec"]
    names = [f"gpu-node-{i:05d}" for i in range(args.nodes)]

    def pod_body(planned: bool, gpus: int) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": "p", "namespace": "team-1", "labels": {}}
        if planned:
            meta["annotations"] = {"kueue.x-k8s.io/workload": "job-1"}
            meta["labels"]["kueue.x-k8s.io/podset"] = "main"
        spec = copy.deepcopy(pod_spec)
        spec.pop("nodeName", None)
        spec["containers"][0]["resources"] = {"requests": {"cpu": "4", GPU: str(gpus)}}
        return {"metadata": meta, "spec": spec}

    full_nodes = {n["metadata"]["name"]: n for n in (make_node(i) for i in range(args.nodes))}
    by_names: list[tuple[str, str]] = []
    by_nodes: list[tuple[str, str]] = []
    for k in range(50):
        candidates = rng.sample(names, args.candidates)
        pod = pod_body(planned=k % 2 == 0, gpus=2 if k % 2 == 0 else 1)
        args_names = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": candidates})
        by_names.append((args_names, args_names))
        if k < 10:
            items = [full_nodes[n] for n in candidates]
            args_nodes = json.dumps(
                {"Pod": pod, "Nodes": {"metadata": {}, "items": items}, "NodeNames": None}
            )
            by_nodes.append((args_nodes, args_nodes))
    del full_nodes
    result = {
        "nodes": args.nodes,
        "bound_pods": args.pods,
        "plans": args.plans,
        "inventory": dict(zip(("nodes", "pods", "plans"), placement.counts(), strict=True)),
        "cache_rss_mib": round(cache_mib, 1),
        "node_names_500": latency(port, by_names, args.rounds),
        "full_nodes_500": latency(port, by_nodes, max(200, args.rounds // 10)),
        "planning_64x8": planning(placement, 64, 8, 200),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "body_kib": {
            "node_names": round(len(by_names[0][0]) / 1024, 1),
            "full_nodes": round(len(by_nodes[0][0]) / 1024, 1),
        },
    }
    server.shutdown()
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
