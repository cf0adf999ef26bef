"""The visibility API's answer time at 50,000 pending Workloads, and what keeping it costs.

One ClusterQueue holds 50,000 pending Workloads (three priorities, creation times spread
over a day): 45,000 in LocalQueue default/big and 5,000 over 49 others. The state is built
as the controller builds it (ClusterState.add_workload, with the positions kept under a lock
as the leader keeps them). Each answer goes through VisibilityApi.handle, JSON encoding
included, for the first 100 and for 100 at offset 40,000, of the ClusterQueue and of
default/big; then the same with admission fair sharing's usage (every LocalQueue apart) and
at a tenth of the size and with other limits, to show the cost follows the limit, not the
queue. Also: each arrival's and departure's cost with and without the positions, a standby's
read of its caches (CachedPositions: the builder over every Workload), each
answer's own CPU time beside its wall time (the machine may be shared), and Kueue's way (sort
every pending Workload per request) for comparison. Costs per arrival and departure are CPU
time of this thread. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from extender.core.api.labels import LabelSelector
from extender.core.api.models import (
    ClusterQueue,
    FlavorQuotas,
    LocalQueue,
    PodSet,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from extender.core.scheduling.cycle import ClusterState
from extender.core.scheduling.visibility import ordered
from extender.gc_tuning import tune_for_scheduling
from extender.kube.api.resources import CLUSTER_QUEUES, LOCAL_QUEUES, RESOURCE_FLAVORS, WORKLOADS
from extender.kube.api.store import Store
from extender.kube.servers.visibility import CachedPositions, VisibilityApi, VisibilityRequest

CQ = "cluster-queue"
BIG = "big"
PATH = "/apis/visibility.kueue.x-k8s.io/v1beta2"


def workloads(total: int, seed: int = 1) -> list[Workload]:
    rng = random.Random(seed)
    others = max(total // 10, 1)
    out = []
    for i in range(total):
        queue, namespace = (BIG, "default") if i >= others else (f"lq-{i % 49}", f"ns-{i % 49}")
        out.append(
            Workload(
                namespace,
                f"job-sample-{i:06d}",
                f"uid-{i:06d}",
                queue,
                (PodSet("main", 1, {"cpu": 1000}),),
                priority=rng.choice((0, 0, 0, 100, 1000)),
                creation_time=1.7e9 + rng.random() * 86400,
                owner_kind="Job",
                owner_name=f"sample-{i:06d}",
            )
        )
    return out


def metadata(workload: Workload) -> dict[str, Any]:
    """The Workload object's metadata, as the watch cache keeps it."""
    return {
        "metadata": {
            "name": workload.name,
            "namespace": workload.namespace,
            "uid": workload.uid,
            "creationTimestamp": "2026-12-01T10:00:00Z",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                 "name": workload.owner_name, "uid": f"job-{workload.uid}",
                                 "controller": True, "blockOwnerDeletion": True}],
        }
    }  # fmt: skip


def as_object(workload: Workload) -> dict[str, Any]:
    """The Workload as the watch cache keeps it (a standby reads these)."""
    obj = metadata(workload)
    obj.update(
        apiVersion="kueue.x-k8s.io/v1beta2",
        kind="Workload",
        spec={"queueName": workload.queue_name, "priority": workload.priority,
              "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                  {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
              ]}}}]},
    )  # fmt: skip
    obj["metadata"]["creationTimestamp"] = datetime.fromtimestamp(
        workload.creation_time, UTC
    ).strftime("%Y-%m-%dT%H:%M:%SZ")
    return obj


def standby_read(pending: list[Workload]) -> dict[str, Any]:
    """A standby's answer source: its caches read through the core's builder (one read)."""
    store = Store()
    quota = {"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [
        {"name": "cpu", "nominalQuota": 0}]}]}  # fmt: skip
    config = {
        RESOURCE_FLAVORS: [{"metadata": {"name": "default"}, "spec": {}}],
        CLUSTER_QUEUES: [{"metadata": {"name": CQ},
                          "spec": {"namespaceSelector": {}, "resourceGroups": [quota]}}],
        LOCAL_QUEUES: [{"metadata": {"namespace": ns, "name": name},
                        "spec": {"clusterQueue": CQ}}
                       for ns, name in [("default", BIG)]
                       + [(f"ns-{i}", f"lq-{i}") for i in range(49)]],
    }  # fmt: skip
    for resource, items in config.items():
        store.register(resource)
        store.replace(resource, items)
    store.register(WORKLOADS)
    store.replace(WORKLOADS, [as_object(w) for w in pending])
    source = CachedPositions(store)
    start = time.thread_time()
    positions = source()
    took = time.thread_time() - start
    assert positions is not None
    page = positions.cluster_queue(CQ, 0, 10**9) or []
    return {"read_s": round(took, 2), "pending_seen": len(page)}


def configured(fair: bool = False) -> ClusterState:
    state = ClusterState()
    quota = ResourceGroup(("cpu",), (FlavorQuotas("default", (ResourceQuota("cpu", 0),)),))
    cq = ClusterQueue(CQ, (quota,), namespace_selector=LabelSelector(), admission_fair_sharing=fair)
    lqs = [LocalQueue("default", BIG, CQ)] + [
        LocalQueue(f"ns-{i}", f"lq-{i}", CQ) for i in range(49)
    ]
    state.configure(flavors=[ResourceFlavor("default")], cluster_queues=[cq], local_queues=lqs)
    return state


def timed(call: Callable[[], object], repeat: int) -> tuple[list[float], list[float]]:
    """Wall and CPU (this thread's) milliseconds of each call, after a few to warm up: the
    machine may be shared, and CPU time says what the answer itself costs."""
    for _ in range(5):
        call()
    walls, cpus = [], []
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.thread_time()
        call()
        cpus.append((time.thread_time() - cpu) * 1000)
        walls.append((time.perf_counter() - start) * 1000)
    return walls, cpus


def percentile(values: list[float], q: float) -> float:
    ordered_values = sorted(values)
    return round(ordered_values[int(q * (len(ordered_values) - 1))], 3)


def summary(times: tuple[list[float], list[float]]) -> dict[str, float]:
    walls, cpus = times
    return {
        "p50_ms": round(statistics.median(walls), 3),
        "p99_ms": percentile(walls, 0.99),
        "max_ms": round(max(walls), 3),
        "cpu_p50_ms": round(statistics.median(cpus), 3),
        "cpu_p99_ms": percentile(cpus, 0.99),
    }


def answers(api: VisibilityApi, repeat: int, cases: dict[str, str]) -> dict[str, Any]:
    out = {}
    for name, target in cases.items():
        request = VisibilityRequest.of("GET", PATH + target, user="bench")
        response = api.handle(request)
        assert response.status == 200, response.body[:200]
        items = len(json.loads(response.body)["items"])
        out[name] = {"items": items, "bytes": len(response.body),
                     **summary(timed(lambda r=request: api.handle(r), repeat))}  # fmt: skip
    return out


CQ_PAGES = f"/clusterqueues/{CQ}/pendingworkloads"
LQ_PAGES = f"/namespaces/default/localqueues/{BIG}/pendingworkloads"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--deep", type=int, default=40_000, help="the deep offset")
    parser.add_argument(
        "--no-standby", dest="standby", action="store_false", help="skip the standby's read"
    )
    args = parser.parse_args()
    tune_for_scheduling()
    result: dict[str, Any] = {"pending": args.pending, "in_big_local_queue": 0}
    pending = workloads(args.pending)
    objects = {w.key: metadata(w) for w in pending}

    # Arrivals as the controller sees them: without the positions, then with them.
    costs = {}
    for kept in (False, True):
        state = configured()
        if kept:
            state.queues.keep_positions(threading.Lock())
        start = time.thread_time()
        for w in pending:
            state.add_workload(w)
        costs[kept] = (time.thread_time() - start) / len(pending) * 1e6
    result["arrival_us"] = {"without_positions": round(costs[False], 2),
                            "with_positions": round(costs[True], 2),
                            "positions_share": round(costs[True] - costs[False], 2)}  # fmt: skip
    positions = state.queues.positions
    assert positions is not None
    result["in_big_local_queue"] = len(positions.local_queue("default", BIG, 0, 10**9) or [])

    api = VisibilityApi(lambda: positions, objects.get)
    deep = args.deep
    result["answers"] = answers(
        api,
        args.repeat,
        {
            "cluster_queue_first_100": f"{CQ_PAGES}?limit=100",
            f"cluster_queue_100_at_{deep}": f"{CQ_PAGES}?limit=100&offset={deep}",
            "local_queue_first_100": f"{LQ_PAGES}?limit=100",
            f"local_queue_100_at_{deep}": f"{LQ_PAGES}?limit=100&offset={deep}",
            "cluster_queue_default_1000": CQ_PAGES,
            "cluster_queue_first_10": f"{CQ_PAGES}?limit=10",
            f"cluster_queue_10_at_{deep}": f"{CQ_PAGES}?limit=10&offset={deep}",
        },
    )

    # Departures: each workload taken out (admitted or deleted) and put back.
    sample = random.Random(2).sample(pending, 2000)
    for kept, label in ((True, "with_positions"), (False, "without_positions")):
        queues = state.queues
        saved, queues.positions = queues.positions, (queues.positions if kept else None)
        start = time.thread_time()
        for w in sample:
            queues.unqueue(w.key)
        took = (time.thread_time() - start) / len(sample) * 1e6
        for w in sample:
            state.add_workload(w)
        queues.positions = saved
        result.setdefault("departure_us", {})[label] = round(took, 2)

    # The index alone: each of 2,000 workloads taken out and put back (two sequences each).
    start = time.thread_time()
    for w in sample:
        positions.remove(w.key)
    removed = time.thread_time()
    for w in sample:
        positions.add(CQ, w)
    result["index_us"] = {
        "remove": round((removed - start) / len(sample) * 1e6, 2),
        "add": round((time.thread_time() - removed) / len(sample) * 1e6, 2),
    }

    # What a reader holds the lock for: picking up the current sequences (50 LocalQueues).
    result["reader_lock_hold_us"] = round(
        statistics.median(timed(lambda: positions._view(CQ), 2000)[0]) * 1000, 2
    )

    # Kueue's way, for comparison: every pending workload sorted on each request.
    result["sort_every_request_ms"] = summary(
        timed(lambda: ordered(state.pending_workloads_in(CQ)), 10)
    )

    # With admission fair sharing: every LocalQueue's usage apart, so a page is cut from the
    # LocalQueues in usage order.
    fair = configured(fair=True)
    fair_positions = fair.queues.keep_positions(threading.Lock())
    for w in pending:
        fair.add_workload(w)
    usage = {"default/big": 5.0, **{f"ns-{i}/lq-{i}": float(i % 7) for i in range(49)}}
    fair_positions.set_usage(CQ, usage)
    fair_api = VisibilityApi(lambda: fair_positions, objects.get)
    result["answers_with_fair_sharing"] = answers(
        fair_api,
        args.repeat,
        {
            f"cluster_queue_100_at_{deep}": f"{CQ_PAGES}?limit=100&offset={deep}",
            f"local_queue_100_at_{deep}": f"{LQ_PAGES}?limit=100&offset={deep}",
        },
    )

    # A tenth of the queue: the same pages cost the same.
    small = configured()
    small_positions = small.queues.keep_positions(threading.Lock())
    for w in pending[: args.pending // 10]:
        small.add_workload(w)
    small_api = VisibilityApi(lambda: small_positions, objects.get)
    tenth = args.pending // 10
    result[f"answers_at_{tenth}_pending"] = answers(
        small_api,
        args.repeat,
        {
            "cluster_queue_first_100": f"{CQ_PAGES}?limit=100",
            f"cluster_queue_100_at_{tenth - 200}": f"{CQ_PAGES}?limit=100&offset={tenth - 200}",
        },
    )
    if args.standby:
        result["standby_cache_read"] = standby_read(pending)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
