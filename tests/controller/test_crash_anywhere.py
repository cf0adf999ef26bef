"""Killed at random writes and restarted: never over quota, nothing admitted twice, all done."""

from __future__ import annotations

import os
import random
import signal
import threading

from tests.controller.conftest import controller_process, eventually
from tests.controller.test_faults import stop
from tests.controller.test_seed import CQ, FLAVOR, LQ

QUOTA_MILLI_CPU = 4000


def cpu_milli(value: str) -> int:
    return int(value[:-1]) if value.endswith("m") else int(value) * 1000


def test_sigkill_at_random_writes_keeps_every_promise(cluster):
    cluster.apply(FLAVOR, CQ, LQ)
    rng = random.Random(20261129)
    lock = threading.Lock()
    seen = {"writes": 0, "kill_at": rng.randint(3, 12), "kills": 0, "over": []}
    admissions: dict[str, int] = {}
    state = {"proc": None}

    def watch(event, kind, obj):
        if kind.plural != "workloads":
            return
        with lock:
            name = obj["metadata"]["name"]
            status = obj.get("status") or {}
            finished = any(
                c["type"] == "Finished" and c["status"] == "True"
                for c in status.get("conditions") or []
            )
            # Count transitions into "holds quota" (the admission write).
            if status.get("admission") and not finished:
                if admissions.get(name, 0) % 2 == 0:
                    admissions[name] = admissions.get(name, 0) + 1
            elif admissions.get(name, 0) % 2 == 1:
                admissions[name] += 1
            used = 0
            for wl in cluster.api.store.objects[kind.key].values():
                st = wl.get("status") or {}
                done = any(
                    c["type"] == "Finished" and c["status"] == "True"
                    for c in st.get("conditions") or []
                )
                if st.get("admission") and not done:
                    for psa in st["admission"]["podSetAssignments"]:
                        used += cpu_milli(psa["resourceUsage"]["cpu"])
            if used > QUOTA_MILLI_CPU:
                seen["over"].append(used)

    def count_writes(event, kind, obj):
        # Every commit the controller causes; kill it at a random one.
        with lock:
            seen["writes"] += 1
            proc = state["proc"]
            if proc is not None and seen["writes"] >= seen["kill_at"] and seen["kills"] < 6:
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGKILL)
                    seen["kills"] += 1
                seen["kill_at"] = seen["writes"] + rng.randint(3, 12)

    cluster.api.hooks.extend([watch, count_writes])
    jobs = [cluster.job(f"job-{i}", rng.choice(["1", "2", "3"]), duration="0.3s") for i in range(8)]
    logs = []
    try:
        for _ in range(30):
            proc = state["proc"] = controller_process(cluster, "--no-leader-elect")
            if seen["kills"] >= 6:
                break  # this one is left to finish the work
            proc.wait(timeout=60)  # until it is killed at a random write
            logs.append(proc.stdout.read().decode())
        eventually(
            lambda: all(_finished(cluster.workload_of(j)) for j in jobs),
            timeout=60,
            what="every job to finish",
        )
    finally:
        if state["proc"] is not None:
            logs.append(stop(state["proc"]))
    assert seen["kills"] == 6
    assert seen["over"] == [], "quota was exceeded"
    for job in jobs:
        name = cluster.workload_of(job)["metadata"]["name"]
        assert admissions.get(name) == 2, (
            name,
            admissions.get(name),
        )  # admitted once, released once
    assert all("Traceback" not in log for log in logs), logs


def _finished(workload):
    return any(
        c["type"] == "Finished" and c["status"] == "True"
        for c in ((workload or {}).get("status") or {}).get("conditions") or []
    )
