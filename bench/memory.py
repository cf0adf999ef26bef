"""The controller's memory with 100,000 Jobs in the cluster, as a real API server lists them.

The runner fills the API double with N Jobs shaped like the seed Job a real kube-apiserver
v1.32 listed (shared/fixtures/real-apiserver/api/list-jobs-default.json: managedFields,
the Job controller's labels and status), each with the Workload Tower made for it. Most
Jobs of a busy cluster are finished, so by default 95% are Complete with a Finished
Workload; the rest run, admitted in a ClusterQueue large enough to hold them. Then
`python -m extender run` starts as its own process, lists everything (500 a page, as
client-go does), rebuilds its state and goes idle. Prints one JSON object: the time to
ready and the process's peak and settled RSS.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import config as k8s_config  # noqa: E402

from extender.core.jobframework.jobs import workload_for  # noqa: E402
from extender.kube.api import objects as o  # noqa: E402
from extender.kube.api import resources as r  # noqa: E402
from extender.kube.api.client import RequestBudget, RestClient  # noqa: E402
from extender.kube.generators.crds import custom_resource_definitions  # noqa: E402
from tests.apidouble import ApiDouble  # noqa: E402
from tests.fixtures import load  # noqa: E402

CONTROLLER_USER = "system:serviceaccount:tower-system:tower-controller"
CRDS = r.Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
SEED_JOB = next(
    item
    for item in load("api/list-jobs-default.json")["response"]["body"]["items"]
    if "kueue.x-k8s.io/queue-name" in (item["metadata"].get("labels") or {})
)
V2 = "kueue.x-k8s.io/v1beta2"


def queues(cpu: int) -> list[dict[str, Any]]:
    return [
        {"apiVersion": V2, "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
        {
            "apiVersion": V2,
            "kind": "ClusterQueue",
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
                                    {"name": "cpu", "nominalQuota": cpu},
                                    {"name": "memory", "nominalQuota": f"{cpu * 4}Gi"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": V2,
            "kind": "LocalQueue",
            "metadata": {"name": "user-queue", "namespace": "default"},
            "spec": {"clusterQueue": "cluster-queue"},
        },
    ]


def job(i: int, running: bool) -> dict[str, Any]:
    """The seed Job again, under another name and uid; running, or complete."""
    out = copy.deepcopy(SEED_JOB)
    uid, name = str(uuid.uuid4()), f"sample-job-{i:06d}"
    meta = out["metadata"]
    meta.update(name=name, uid=uid)
    meta.pop("generateName", None)
    out["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"] = uid
    labels = out["spec"]["template"]["metadata"]["labels"]
    for key in labels:
        labels[key] = uid if "uid" in key else name
    out["apiVersion"], out["kind"] = "batch/v1", "Job"
    if running:
        out["spec"]["suspend"] = False
        out["status"] = {
            "active": 1,
            "startTime": out["status"]["startTime"],
            "conditions": [out["status"]["conditions"][0]],
            "ready": 0,
            "terminating": 0,
            "uncountedTerminatedPods": {},
        }
    return out


def workload(job_obj: dict[str, Any], running: bool) -> dict[str, Any]:
    meta = job_obj["metadata"]
    model = workload_for(job_obj, uid=meta["uid"], creation_time=0.0)
    body = o.workload_manifest(job_obj, model)
    body["metadata"]["uid"] = str(uuid.uuid4())
    body["metadata"]["creationTimestamp"] = meta["creationTimestamp"]
    body["metadata"]["managedFields"] = copy.deepcopy(meta.get("managedFields"))
    admission = {
        "clusterQueue": "cluster-queue",
        "podSetAssignments": [
            {
                "name": "main",
                "flavors": {"cpu": "default-flavor", "memory": "default-flavor"},
                "resourceUsage": {"cpu": "3", "memory": "4Gi"},
                "count": 1,
            }
        ],
    }
    stamp = meta["creationTimestamp"]
    conditions = [
        {"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": stamp}
        for t in ("QuotaReserved", "Admitted")
    ]
    if not running:
        conditions.append(
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": "Job finished successfully",
                "lastTransitionTime": stamp,
            }
        )
    body["status"] = {"admission": admission, "conditions": conditions}
    return body


def fill(api: ApiDouble, count: int, running_every: int) -> tuple[int, int]:
    """Put the objects straight into the double's store (no watch history: none is read)."""
    store = api.store
    jobs_kind = api.kind("jobs")
    workloads_kind = api.kind("workloads")
    running = 0
    with store.lock:
        for i in range(count):
            is_running = running_every > 0 and i % running_every == 0
            running += is_running
            job_obj = job(i, is_running)
            for kind, obj in (
                (jobs_kind, job_obj),
                (workloads_kind, workload(job_obj, is_running)),
            ):
                obj["metadata"]["resourceVersion"] = str(store.next_rv())
                store.objects[kind.key][("default", obj["metadata"]["name"])] = obj
        for key in store.oldest:
            store.oldest[key] = store.rv  # the watch cache starts now
    return count, running


def status_of(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as err:
        return int(err.code)
    except OSError:
        return 0


def rss(pid: int) -> tuple[float, float]:
    """(peak, current) resident set of a process in MiB."""
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmHWM:", "VmRSS:")):
                values[line.split(":")[0]] = int(line.split()[1]) / 1024
    return values["VmHWM"], values["VmRSS"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument(
        "--running-every",
        type=int,
        default=20,
        help="one Job in this many runs (admitted); the rest are complete (0: none runs)",
    )
    parser.add_argument("--settle", type=float, default=15.0, help="seconds idle before RSS")
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="for the controller"
    )
    args = parser.parse_args()

    api = ApiDouble()
    api.start()
    tmp = tempfile.mkdtemp()
    config = api.kubeconfig(os.path.join(tmp, "tower"), token="tower", username=CONTROLLER_USER)
    admin = RestClient(
        k8s_config.new_client_from_config(config_file=api.kubeconfig(os.path.join(tmp, "a"))),
        RequestBudget(1000, 1000),
    )
    for crd in custom_resource_definitions():
        admin.create(CRDS, crd)
    running_cpu = 3 * (args.jobs // max(args.running_every, 1) + 1)
    for obj in queues(running_cpu):
        resource = {"ResourceFlavor": r.RESOURCE_FLAVORS, "ClusterQueue": r.CLUSTER_QUEUES}.get(
            obj["kind"], r.LOCAL_QUEUES
        )
        admin.create(resource, obj, obj["metadata"].get("namespace"))
    started = time.monotonic()
    jobs, running = fill(api, args.jobs, args.running_every)
    print(f"filled {jobs} Jobs in {time.monotonic() - started:.0f}s", file=sys.stderr)

    controller = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "extender",
            "run",
            "--kubeconfig",
            config,
            "--no-leader-elect",
            "--health-address",
            "127.0.0.1:0",
            "--metrics-address",
            "127.0.0.1:0",
            "--log-level",
            "WARNING",
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **dict(e.split("=", 1) for e in args.env)},
    )
    assert controller.stderr is not None
    port = int(controller.stderr.readline().split()[-1])
    launched = time.monotonic()
    while status_of(port, "/readyz") != 200:
        if controller.poll() is not None:
            raise SystemExit(f"the controller exited: {controller.stderr.read()}")
        time.sleep(0.5)
    ready = time.monotonic() - launched
    time.sleep(args.settle)
    peak, current = rss(controller.pid)
    controller.terminate()
    controller.wait(timeout=30)
    print(
        json.dumps(
            {
                "scenario": f"{jobs} Jobs ({running} running, the rest complete), each with "
                "its Workload, as a real API server lists them (managedFields included)",
                "jobs": jobs,
                "running": running,
                "time_to_ready_s": round(ready, 1),
                "controller_peak_rss_mib": round(peak, 1),
                "controller_rss_after_settle_mib": round(current, 1),
                "target_rss_mib": 250,
            },
            indent=2,
        )
    )
    api.stop()


if __name__ == "__main__":
    main()
