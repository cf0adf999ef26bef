"""Kueue's baseline scheduler benchmark run the way Kueue runs it: against an API server.

The runner (this process) serves the Kubernetes API double, creates the scenario's objects
(shared/reference/performance.md §1.2: 5 cohorts × 6 ClusterQueues, nominal 20 cpu,
borrowingLimit 100, reclaimWithinCohort Any, withinClusterQueue LowerPriority; 15,000
single-pod Workloads in three classes arriving at fixed intervals), watches the Workloads and
marks each Finished once its run time has passed since admission — as Kueue's runner does.
The controller (`python -m extender run`) is a separate process with its client budget at
50 QPS / burst 100, as minimalkueue's. With --jobs, the runner creates suspended Jobs (as
the webhook would leave them) instead of Workloads, and the double's Job controller finishes
them. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import config as k8s_config  # noqa: E402

from extender.kube.api import resources as r  # noqa: E402
from extender.kube.api.client import RequestBudget, RestClient  # noqa: E402
from extender.kube.generators.crds import custom_resource_definitions  # noqa: E402
from tests.apidouble import ApiDouble, Fault, JobRunner  # noqa: E402
from tests.scrape import METRICS_LINE, scrape  # noqa: E402

CONTROLLER_USER = "system:serviceaccount:tower-system:tower-controller"
CRDS = r.Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
# name: (count per ClusterQueue, interval s, runtime s, priority, cpu)
CLASSES = {
    "small": (350, 0.100, 0.200, 50, 1),
    "medium": (100, 0.500, 0.500, 100, 5),
    "large": (50, 1.200, 1.000, 200, 20),
}
KUEUE = {
    "wall_s": 351.1,
    "requests_per_workload": 1.17,
    "cpu_m": 396,
    "rss_mib": 435,
    "tta_ms": {"large": 16501, "medium": 76768, "small": 215468},
    "min_cq_usage": 55.9,
}


def scenario_objects(cohorts: int, queues: int) -> list[tuple[r.Resource, dict[str, Any]]]:
    objs: list[tuple[r.Resource, dict[str, Any]]] = [
        (r.RESOURCE_FLAVORS, {"metadata": {"name": "default"}, "spec": {}}),
    ]
    for c in range(cohorts):
        for q in range(queues):
            name = f"cq-{c}-{q}"
            objs.append(
                (
                    r.CLUSTER_QUEUES,
                    {
                        "metadata": {"name": name},
                        "spec": {
                            "cohortName": f"cohort-{c}",
                            "namespaceSelector": {},
                            "preemption": {
                                "reclaimWithinCohort": "Any",
                                "withinClusterQueue": "LowerPriority",
                            },
                            "resourceGroups": [
                                {
                                    "coveredResources": ["cpu"],
                                    "flavors": [
                                        {
                                            "name": "default",
                                            "resources": [
                                                {
                                                    "name": "cpu",
                                                    "nominalQuota": 20,
                                                    "borrowingLimit": 100,
                                                }
                                            ],
                                        }
                                    ],
                                }
                            ],
                        },
                    },
                )
            )
            objs.append(
                (
                    r.LOCAL_QUEUES,
                    {
                        "metadata": {"name": name, "namespace": "default"},
                        "spec": {"clusterQueue": name},
                    },
                )
            )
    return objs


def workload_body(name: str, queue: str, klass: str) -> dict[str, Any]:
    _, _, _, priority, cpu = CLASSES[klass]
    return {
        "metadata": {"name": name, "namespace": "default", "labels": {"class": klass}},
        "spec": {
            "queueName": queue,
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "x",
                                    "resources": {"requests": {"cpu": str(cpu)}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


def job_body(name: str, queue: str, klass: str) -> dict[str, Any]:
    _, _, runtime, priority, cpu = CLASSES[klass]
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"class": klass, "kueue.x-k8s.io/queue-name": queue},
            "annotations": {
                "tower.dev/sim-duration": f"{runtime}s",
                "tower.dev/original-suspend": "false",
            },
        },
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "priorityClassName": f"p{priority}",
                    "containers": [
                        {"name": "c", "image": "x", "resources": {"requests": {"cpu": str(cpu)}}}
                    ],
                }
            },
        },
    }


class Runner:
    def __init__(self, api: ApiDouble, client: RestClient, jobs: bool) -> None:
        self.api = api
        self.client = client
        self.jobs = jobs
        self.created: dict[str, float] = {}
        self.admitted: dict[str, float] = {}
        self.finished: dict[str, float] = {}
        self.klass: dict[str, str] = {}
        self.queue_of: dict[str, str] = {}
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.total = 0
        self.evictions = 0
        self.uid_to_name: dict[str, str] = {}
        api.hooks.append(self._on_commit)

    def _on_commit(self, event: str, kind: Any, obj: dict[str, Any]) -> None:
        """Observe admissions and finishes at commit time (the double's watch cache view)."""
        if kind.plural != "workloads" or event == "DELETED":
            return
        status = obj.get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        labels = obj["metadata"].get("labels") or {}
        key = obj["metadata"]["name"] if not self.jobs else labels.get("kueue.x-k8s.io/job-uid")
        now = time.monotonic()
        with self.lock:
            if self.jobs:
                key = self.uid_to_name.get(key or "")
            if key is None:
                return
            if (
                conditions.get("Admitted") == "True"
                and status.get("admission")
                and key not in self.admitted
            ):
                self.admitted[key] = now
                if not self.jobs:
                    runtime = CLASSES[self.klass[key]][2]
                    timer = threading.Timer(runtime, self._finish, args=(key, now))
                    timer.daemon = True
                    timer.start()
            if (
                conditions.get("Admitted") != "True"
                and key in self.admitted
                and key not in self.finished
                and conditions.get("Finished") != "True"
            ):
                self.admitted.pop(key)  # preempted: waits again, and runs again in full
                self.evictions += 1
            if conditions.get("Finished") == "True" and key not in self.finished:
                self.finished[key] = now
                if len(self.finished) == self.total:
                    self.done.set()

    def _finish(self, name: str, admitted_at: float) -> None:
        with self.lock:
            if self.admitted.get(name) != admitted_at:
                return  # evicted since: its run starts again at its next admission

        def mark(status: dict[str, Any]) -> None:
            conditions = status.setdefault("conditions", [])
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            conditions.append(
                {
                    "type": "Finished",
                    "status": "True",
                    "reason": "Succeeded",
                    "message": "done",
                    "lastTransitionTime": stamp,
                }
            )

        # The runner's own write, through the API like Kueue's runner.
        obj = self.api.get("workloads", name, "default")
        if obj is None:
            return
        status = obj.get("status") or {}
        mark(status)
        self.client.patch(
            r.WORKLOADS,
            name,
            {"status": {"conditions": status["conditions"]}},
            "default",
            subresource="status",
        )

    def create_all(self, cohorts: int, queues: int, scale: float) -> None:
        schedule = []
        for klass, (count, interval, _, _, _) in CLASSES.items():
            n = max(1, int(count * scale))
            for c in range(cohorts):
                for q in range(queues):
                    for i in range(n):
                        schedule.append(
                            (i * interval, f"{klass}-{c}-{q}-{i}", f"cq-{c}-{q}", klass)
                        )
        schedule.sort()
        self.total = len(schedule)
        start = time.monotonic()
        resource, body = (r.JOBS, job_body) if self.jobs else (r.WORKLOADS, workload_body)
        for offset, name, queue, klass in schedule:
            delay = start + offset - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            with self.lock:
                self.klass[name] = klass
                self.queue_of[name] = queue
                self.created[name] = time.monotonic()
            created = self.client.create(resource, body(name, queue, klass), "default")
            if self.jobs:
                with self.lock:
                    self.uid_to_name[created["metadata"]["uid"]] = name


def proc_stats(pid: int) -> tuple[float, float]:
    """(CPU seconds user+sys, peak RSS MiB) of a live process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    with open(f"/proc/{pid}/status") as f:
        hwm = next(line for line in f if line.startswith("VmHWM:"))
    return cpu, int(hwm.split()[1]) / 1024


def scrape_writes(port: int) -> dict[str, int]:
    """The controller's own count of its writes, by purpose, from its /metrics."""
    text = scrape(port)
    out: dict[str, int] = {}
    for line in text.splitlines():
        if line.startswith("tower_kube_api_writes_total{"):
            labels, value = line.rsplit(" ", 1)
            verb = labels.split('verb="')[1].split('"')[0]
            plural = labels.split('resource="')[1].split('"')[0]
            out[f"{verb} {plural}"] = int(float(value))
        elif line.startswith("tower_kube_api_write_failures_total{"):
            labels, value = line.rsplit(" ", 1)
            code = labels.split('code="')[1].split('"')[0]
            out[f"failed {code}"] = out.get(f"failed {code}", 0) + int(float(value))
        elif line.startswith("tower_evictions_dropped_total "):
            out["evictions dropped"] = int(float(line.rsplit(" ", 1)[1]))
        elif line.startswith("kueue_admission_attempts_total{"):
            out["cycles"] = out.get("cycles", 0) + int(float(line.rsplit(" ", 1)[1]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", action="store_true", help="Jobs instead of bare Workloads")
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="fraction of each class's count (1.0 = Kueue's 15,000)",
    )
    parser.add_argument("--cohorts", type=int, default=5)
    parser.add_argument("--qps", type=float, default=50)
    parser.add_argument("--timeout", type=float, default=1800, help="give up after (s)")
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument(
        "--controller-log", help="write the controller's INFO log (admissions, evictions) here"
    )
    parser.add_argument(
        "--fail-rate",
        type=float,
        default=0.0,
        help="answer this fraction of the controller's writes 503 Service Unavailable",
    )
    parser.add_argument(
        "--restart-at",
        type=float,
        action="append",
        default=[],
        metavar="SECONDS",
        help="restart the API server (every connection and watch dropped, watch history "
        "gone) this many seconds into the run; repeatable",
    )
    args = parser.parse_args()

    api = ApiDouble(history=200_000)
    api.start()
    job_runner = JobRunner(api) if args.jobs else None
    tmp = tempfile.mkdtemp()
    admin_config = api.kubeconfig(os.path.join(tmp, "admin"))
    controller_config = api.kubeconfig(
        os.path.join(tmp, "tower"), token="tower", username=CONTROLLER_USER
    )
    admin = RestClient(
        k8s_config.new_client_from_config(config_file=admin_config), RequestBudget(10_000, 10_000)
    )
    for crd in custom_resource_definitions():
        admin.create(CRDS, crd)
    for value in (50, 100, 200):
        admin.create(
            r.PRIORITY_CLASSES,
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": f"p{value}"},
                "value": value,
            },
        )
    for resource, obj in scenario_objects(args.cohorts, 6):
        admin.create(resource, obj, obj["metadata"].get("namespace"))

    controller = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "extender",
            "run",
            "--kubeconfig",
            controller_config,
            "--no-leader-elect",
            "--health-address",
            "127.0.0.1:0",
            "--metrics-address",
            "127.0.0.1:0",
            "--kube-api-qps",
            str(args.qps),
            "--kube-api-burst",
            str(args.burst),
            "--log-level",
            "INFO" if args.controller_log else "WARNING",
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert controller.stderr is not None
    controller.stderr.readline()  # the health port: it is up
    metrics_port = next(
        int(found[1]) for line in controller.stderr if (found := METRICS_LINE.search(line))
    )

    def drain_log(stream: Any, path: str | None) -> None:
        # Read the pipe to its end: a full pipe would stall the controller's logging.
        with open(path or os.devnull, "w") as out:
            for line in stream:
                out.write(line)

    threading.Thread(
        target=drain_log, args=(controller.stderr, args.controller_log), daemon=True
    ).start()
    time.sleep(2.0)  # caches synced on an empty queue
    runner = Runner(api, admin, args.jobs)
    started = time.monotonic()
    creator = threading.Thread(target=runner.create_all, args=(args.cohorts, 6, args.scale))
    creator.start()
    cpu_before, _ = proc_stats(controller.pid)

    def progress() -> None:
        while not runner.done.wait(10):
            writes = sum(1 for m, _, u in list(api.requests) if u == CONTROLLER_USER and m != "GET")
            print(
                f"{time.monotonic() - started:6.0f}s created {len(runner.created)} admitted "
                f"{len(runner.admitted)} finished {len(runner.finished)} controller writes "
                f"{writes}",
                file=sys.stderr,
                flush=True,
            )

    threading.Thread(target=progress, daemon=True).start()
    failing = None
    if args.fail_rate:
        failing = Fault(
            "WRITE", "*", code=503, times=-1, probability=args.fail_rate, user=CONTROLLER_USER
        )
        api.faults.append(failing)

    def restarts() -> None:
        for at in sorted(args.restart_at):
            if runner.done.wait(max(0.0, started + at - time.monotonic())):
                return
            print(f"{at:6.0f}s restarting the API server", file=sys.stderr, flush=True)
            api.restart(downtime=1.0)

    threading.Thread(target=restarts, daemon=True).start()
    finished_in_time = runner.done.wait(timeout=args.timeout)
    wall = time.monotonic() - started
    cpu_after, rss = proc_stats(controller.pid)
    purposes = scrape_writes(metrics_port)
    creator.join()
    controller.terminate()
    controller.wait(timeout=30)

    writes: Counter[str] = Counter()
    reviews = 0
    for method, path, user in api.requests:
        if user == CONTROLLER_USER and "selfsubject" in path:
            reviews += 1  # who am I, may I: asked once at start, they change nothing
        elif user == CONTROLLER_USER and method in ("POST", "PUT", "PATCH", "DELETE"):
            parts = path.strip("/").split("/")
            what = parts[-1] if parts[-1] == "status" else ""
            plural = next(
                (
                    p
                    for p in parts
                    if p
                    in ("workloads", "jobs", "events", "clusterqueues", "localqueues", "leases")
                ),
                "?",
            )
            writes[f"{method} {plural}{'/status' if what else ''}"] += 1
    events = sum(v for k, v in writes.items() if "events" in k)
    total_writes = sum(writes.values()) - events
    n = runner.total
    tta: dict[str, list[float]] = defaultdict(list)
    for name, created in runner.created.items():
        if name in runner.admitted:
            tta[runner.klass[name]].append(runner.admitted[name] - created)
    first = min(runner.created.values())
    last = max(runner.finished.values()) if runner.finished else time.monotonic()
    used: Counter[str] = Counter()
    for name, admitted_at in runner.admitted.items():
        end = runner.finished.get(name, last)
        used[runner.queue_of[name]] += CLASSES[runner.klass[name]][4] * (end - admitted_at)
    usage = {q: 100 * u / (20 * (last - first)) for q, u in used.items()}
    result = {
        "scenario": f"baseline{' (Jobs)' if args.jobs else ''}, scale {args.scale}"
        + (f", {args.fail_rate:.0%} of writes answered 503" if args.fail_rate else "")
        + (f", API server restarted at {args.restart_at} s" if args.restart_at else ""),
        "workloads": n,
        "finished": len(runner.finished),
        "completed": finished_in_time,
        "never_admitted": sorted(set(runner.created) - set(runner.finished) - set(runner.admitted))[
            :10
        ],
        "wall_s": round(wall, 1),
        "controller_writes": total_writes,
        "controller_writes_per_workload": round(total_writes / n, 3),
        "self_reviews_at_start": reviews,
        "injected_503": failing.hits if failing is not None else 0,
        "api_restarts": len(args.restart_at),
        "writes_by_kind": dict(writes),
        "workload_status_writes_by_purpose": {
            k: v for k, v in purposes.items() if not k.startswith(("failed", "evictions", "cycles"))
        },
        "write_failures_by_code": {
            k.split()[1]: v for k, v in purposes.items() if k.startswith("failed")
        },
        "evictions_dropped": purposes.get("evictions dropped", 0),
        "scheduling_cycles_with_heads": purposes.get("cycles", 0),
        "events": events,
        "evictions": runner.evictions,
        "avg_time_to_admission_ms": {k: round(1000 * sum(v) / len(v)) for k, v in tta.items()},
        "min_cq_usage_percent": round(min(usage.values()), 1) if usage else None,
        "controller_cpu_m": round(1000 * (cpu_after - cpu_before) / wall),
        "controller_peak_rss_mib": round(rss, 1),
        "kueue": KUEUE,
    }
    print(json.dumps(result, indent=2))
    if job_runner is not None:
        job_runner.stop()
    api.stop()


if __name__ == "__main__":
    main()
