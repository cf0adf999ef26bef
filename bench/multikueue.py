"""MultiKueue dispatch: 1,000 Jobs through a manager to three worker clusters, API doubles all.

    python bench/multikueue.py [--jobs 1000] [--workers 3] [--qps 1000] [--burst 2000]

This process serves four API doubles (a manager, three workers) and creates the Jobs on the
manager, suspended and handed to MultiKueue (spec.managedBy), as Tower's webhook leaves
them. Four Towers run as their own processes (`python -m extender run`), one per cluster,
each at --qps/--burst. Kueue's example setup on the manager (a ClusterQueue with a
MultiKueue check over the three workers, AllAtOnce); on each worker a ClusterQueue with room
for every Job. Times are taken where the doubles commit:
- reserved: the manager's Workload first QuotaReserved=True;
- admitted on a worker: its copy first Admitted=True on any worker (the worker's Tower);
- ready: the manager's check Ready (the winner chosen, the Job made there).
Prints one JSON object: p50/p99/max of reserved → admitted on a worker and of reserved →
ready, Workloads ready per second, and the writes each Tower made per Workload.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import config as k8s_config  # noqa: E402

from extender.kube.api import resources as r  # noqa: E402
from extender.kube.api.client import RequestBudget, RestClient  # noqa: E402
from extender.kube.generators.crds import custom_resource_definitions  # noqa: E402
from tests.apidouble import ApiDouble  # noqa: E402

CONTROLLER_USER = "system:serviceaccount:tower-system:tower-controller"
CRDS = r.Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
MANAGER_USER = "system:serviceaccount:kueue-system:multikueue-sa"  # the manager, on a worker


def queues(check: bool) -> list[tuple[r.Resource, dict[str, Any]]]:
    cq: dict[str, Any] = {
        "metadata": {"name": "cluster-queue"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": "default-flavor",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "100000"},
                                {"name": "memory", "nominalQuota": "100000Gi"},
                            ],
                        }
                    ],
                }
            ],
        },
    }
    if check:
        cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "sample-multikueue"}]}
    return [
        (r.RESOURCE_FLAVORS, {"metadata": {"name": "default-flavor"}}),
        (r.CLUSTER_QUEUES, cq),
        (
            r.LOCAL_QUEUES,
            {
                "metadata": {"name": "user-queue", "namespace": "default"},
                "spec": {"clusterQueue": "cluster-queue"},
            },
        ),
    ]


def job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        },
        "spec": {
            "suspend": True,
            "managedBy": MULTIKUEUE,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "c",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ],
                }
            },
        },
    }


class Cluster:
    """One API double, its admin client and the kubeconfig its Tower uses."""

    def __init__(self, tmp: str, name: str) -> None:
        self.name = name
        self.api = ApiDouble(history=200_000)
        self.api.start()
        self.admin_config = self.api.kubeconfig(os.path.join(tmp, f"{name}-admin"))
        self.tower_config = self.api.kubeconfig(
            os.path.join(tmp, f"{name}-tower"), token=f"tower-{name}", username=CONTROLLER_USER
        )
        # What a manager's Tower reaches this cluster as (its kubeconfig Secret).
        self.manager_config = self.api.kubeconfig(
            os.path.join(tmp, f"{name}-manager"), token="multikueue-sa", username=MANAGER_USER
        )
        self.admin = RestClient(
            k8s_config.new_client_from_config(config_file=self.admin_config),
            RequestBudget(10_000, 10_000),
        )
        for crd in custom_resource_definitions():
            self.admin.create(CRDS, crd)
        self.admin.create(r.NAMESPACES, {"metadata": {"name": "tower-system"}})

    def writes(self, user: str = CONTROLLER_USER) -> int:
        return sum(1 for m, _, u in list(self.api.requests) if u == user and m != "GET")


def tower(cluster: Cluster, qps: float, burst: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "extender",
            "run",
            "--kubeconfig",
            cluster.tower_config,
            "--no-leader-elect",
            "--health-address",
            "127.0.0.1:0",
            "--metrics-address",
            "127.0.0.1:0",
            "--kube-api-qps",
            str(qps),
            "--kube-api-burst",
            str(burst),
            "--log-level",
            "WARNING",
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "POD_NAMESPACE": "tower-system"},
    )
    assert proc.stderr is not None
    proc.stderr.readline()  # the health port: it is up

    def drain(stream: Any) -> None:
        for _ in stream:
            pass

    threading.Thread(target=drain, args=(proc.stderr,), daemon=True).start()
    return proc


class Clock:
    """First times seen at commit, per Workload name."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reserved: dict[str, float] = {}
        self.admitted: dict[str, tuple[float, str]] = {}
        self.ready: dict[str, float] = {}
        self.done = threading.Event()
        self.total = 0

    def manager(self, event: str, kind: Any, obj: dict[str, Any]) -> None:
        if kind.plural != "workloads" or event == "DELETED":
            return
        name, now = obj["metadata"]["name"], time.monotonic()
        status = obj.get("status") or {}
        true = {c["type"] for c in status.get("conditions") or [] if c["status"] == "True"}
        ready = any(c.get("state") == "Ready" for c in status.get("admissionChecks") or [])
        with self.lock:
            if "QuotaReserved" in true:
                self.reserved.setdefault(name, now)
            if ready and name not in self.ready:
                self.ready[name] = now
                if len(self.ready) >= self.total:
                    self.done.set()

    def worker(self, cluster: str) -> Any:
        def seen(event: str, kind: Any, obj: dict[str, Any]) -> None:
            if kind.plural != "workloads" or event == "DELETED":
                return
            conditions = (obj.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions):
                with self.lock:
                    self.admitted.setdefault(obj["metadata"]["name"], (time.monotonic(), cluster))

        return seen


def percentiles(values: list[float]) -> dict[str, float]:
    ms = sorted(v * 1000 for v in values)
    if not ms:
        return {}
    return {
        "p50_ms": round(statistics.median(ms), 1),
        "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 1),
        "max_ms": round(ms[-1], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--qps", type=float, default=1000)
    parser.add_argument("--burst", type=int, default=2000)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp()
    manager = Cluster(tmp, "manager")
    workers = [Cluster(tmp, f"worker{i + 1}") for i in range(args.workers)]
    clock = Clock()
    clock.total = args.jobs
    manager.api.hooks.append(clock.manager)
    for w in workers:
        for resource, obj in queues(False):
            w.admin.create(resource, obj, obj["metadata"].get("namespace"))
        w.api.hooks.append(clock.worker(w.name))
        data = base64.b64encode(Path(w.manager_config).read_bytes()).decode()
        manager.admin.create(
            r.SECRETS,
            {"metadata": {"name": f"{w.name}-secret"}, "data": {"kubeconfig": data}},
            "tower-system",
        )
        manager.admin.create(
            r.MULTIKUEUE_CLUSTERS,
            {
                "metadata": {"name": w.name},
                "spec": {"clusterSource": {"kubeConfig": {"location": f"{w.name}-secret"}}},
            },
        )
    manager.admin.create(
        r.MULTIKUEUE_CONFIGS,
        {"metadata": {"name": "multikueue-test"}, "spec": {"clusters": [w.name for w in workers]}},
    )
    manager.admin.create(
        r.ADMISSION_CHECKS,
        {
            "metadata": {"name": "sample-multikueue"},
            "spec": {
                "controllerName": MULTIKUEUE,
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "MultiKueueConfig",
                    "name": "multikueue-test",
                },
            },
        },
    )
    for resource, obj in queues(True):
        manager.admin.create(resource, obj, obj["metadata"].get("namespace"))
    procs = [tower(c, args.qps, args.burst) for c in (manager, *workers)]
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the check Active: every worker reached
            check = manager.api.get("admissionchecks", "sample-multikueue") or {}
            conditions = (check.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Active" and c["status"] == "True" for c in conditions):
                break
            time.sleep(0.1)
        started = time.monotonic()
        for i in range(args.jobs):
            manager.admin.create(r.JOBS, job(f"job-{i}"), "default")
        created = time.monotonic()
        finished = clock.done.wait(args.timeout)
        end = time.monotonic()
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
    with clock.lock:
        names = [n for n in clock.ready if n in clock.reserved]
        dispatch = [clock.admitted[n][0] - clock.reserved[n] for n in names if n in clock.admitted]
        to_ready = [clock.ready[n] - clock.reserved[n] for n in names]
        winners: dict[str, int] = {}
        for n in names:
            if n in clock.admitted:
                winners[clock.admitted[n][1]] = winners.get(clock.admitted[n][1], 0) + 1
        last_ready = max(clock.ready.values()) if clock.ready else end
    print(
        json.dumps(
            {
                "jobs": args.jobs,
                "workers": args.workers,
                "qps": args.qps,
                "all_ready": finished,
                "ready": len(clock.ready),
                "create_s": round(created - started, 2),
                "reserved_to_admitted_on_worker": percentiles(dispatch),
                "reserved_to_check_ready": percentiles(to_ready),
                "ready_per_s": round(len(clock.ready) / max(1e-9, last_ready - started), 1),
                "won_by_worker": dict(sorted(winners.items())),
                "manager_writes_per_workload": round(manager.writes() / max(1, args.jobs), 2),
                "worker_towers_writes_per_workload": round(
                    sum(w.writes() for w in workers) / max(1, args.jobs), 2
                ),
                "manager_writes_to_workers_per_workload": round(
                    sum(w.writes(MANAGER_USER) for w in workers) / max(1, args.jobs), 2
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
