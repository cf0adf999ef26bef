"""Writes in flight together, through the API double: a burst of Jobs is admitted and started
with writes overlapping, never two to one object at once, within the budget, and the
latencies and the pool's queue are exported."""

from __future__ import annotations

import copy
import re
import threading
import time
from collections import defaultdict

from extender.kube.controller.context import Settings
from tests.controller.conftest import Running, eventually
from tests.controller.test_faults import running
from tests.controller.test_seed import CQ, FLAVOR, LQ

JOBS = 24


def roomy_queues(cpu: int = 64) -> tuple[dict, dict, dict]:
    cq = copy.deepcopy(CQ)
    for resource in cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
        resource["nominalQuota"] = cpu if resource["name"] == "cpu" else f"{cpu * 2}Gi"
    return FLAVOR, cq, LQ


def object_of(path: str) -> str:
    """A write's object: its path without the query and the /status subresource."""
    return re.sub(r"/status$", "", path.split("?", 1)[0])


def controller_spans(cluster) -> list[tuple[float, float, str, str]]:
    return [
        (began, answered, method, object_of(path))
        for began, answered, token, method, path in list(cluster.api.write_spans)
        if token == "tower" and "/events" not in path and "/leases" not in path
    ]


def most_at_once(spans) -> int:
    edges = sorted([(b, 1) for b, _, _, _ in spans] + [(a, -1) for _, a, _, _ in spans])
    now = most = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def test_a_burst_of_jobs_is_written_concurrently_and_each_object_in_order(
    cluster, start_controller
):
    cluster.apply(*roomy_queues())
    cluster.api.write_latency = 0.02  # each write takes 20 ms: one writer would need 1.4 s
    ctl = start_controller(write_concurrency=4)
    for i in range(JOBS):
        cluster.job(f"burst-{i}", "1", duration="600s")
    eventually(
        lambda: all(running(cluster, f"burst-{i}") for i in range(JOBS)),
        timeout=30,
        what="every Job of the burst to start",
    )
    spans = controller_spans(cluster)
    # Workload created, admitted, Job started: three writes a Job, at least.
    assert len(spans) >= 3 * JOBS
    # In flight together, and bounded: the pool's four senders, and the loop's own write (a
    # queue's status, an eviction) besides them.
    assert 1 < most_at_once(spans) <= 4 + 1
    by_object = defaultdict(list)
    for span in spans:
        if span[2] != "POST":  # a create's path is its collection's, not its object's
            by_object[span[3]].append(span)
    assert len(by_object) >= 2 * JOBS  # each Job and each Workload was written
    for path, writes in by_object.items():
        assert most_at_once(writes) == 1, f"two writes to {path} were in flight at once"

    sample = ctl.controller.metrics.registry.get_sample_value
    cq = CQ["metadata"]["name"]
    # The last answers may still be on their way into the loop.
    eventually(
        lambda: sample("tower_start_wait_time_seconds_count", {"cluster_queue": cq}) == JOBS,
        what="every start to be counted",
    )
    kueue = {"cluster_queue": cq, "priority_class": "", "replica_role": "standalone"}
    assert sample("kueue_admission_wait_time_seconds_count", kueue) == JOBS
    assert (
        sample("tower_admitted_until_start_wait_time_seconds_count", {"cluster_queue": cq}) == JOBS
    )
    eventually(lambda: sample("tower_kube_api_writes_queued", {}) == 0, what="an empty queue")
    eventually(lambda: sample("tower_kube_api_writes_in_flight", {}) == 0, what="nothing sent")
    assert sample("tower_kube_api_write_queue_wait_seconds_count", {}) >= 3 * JOBS


def test_the_budget_bounds_writes_in_flight_together(cluster):
    cluster.apply(*roomy_queues())
    cluster.api.write_latency = 0.005
    qps, burst = 20.0, 5
    client = cluster.controller_client(qps=qps, burst=burst)
    # The moments the budget lets a request go, as it reckons them where it decides: a
    # request reaches the double some milliseconds later, and a thread wakes from its wait
    # later still on a busy machine, so times taken there bunch.
    released: list[float] = []
    mine = threading.local()  # the moment the budget reckoned for this thread's request
    budget = client.budget

    def on_release(when: float) -> None:
        released.append(when)
        mine.when = when

    budget.released = on_release
    take = budget.acquire
    early: list[float] = []

    def acquire() -> None:  # ... and the request really waited until then
        take()
        if time.monotonic() < mine.when - 0.001:
            early.append(mine.when - time.monotonic())

    budget.acquire = acquire  # type: ignore[method-assign]
    ctl = Running(client, Settings(status_interval=0.05, write_concurrency=8))
    try:
        for i in range(12):
            cluster.job(f"paced-{i}", "1", duration="600s")
        eventually(
            lambda: all(running(cluster, f"paced-{i}") for i in range(12)),
            timeout=30,
            what="every Job to start",
        )
    finally:
        ctl.halt()
    # Every request takes a token (reads too): in any window the budget lets at most
    # burst + qps × its length go, and the double saw no write the budget did not let go.
    writes = controller_spans(cluster)
    assert len(writes) >= 36
    assert len(writes) <= len(released)
    assert not early, f"{len(early)} requests went before the budget let them"
    went = sorted(released)
    for i, first in enumerate(went):
        for j in range(i, len(went)):
            window = went[j] - first
            assert j - i + 1 <= burst + qps * window + 1, (
                f"{j - i + 1} requests in {window:.3f}s: over the budget of {qps} QPS, "
                f"burst {burst}"
            )
