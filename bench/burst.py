"""A burst of Jobs: how soon each starts, from its creation to `spec.suspend=false`.

200 small queued Jobs (one namespace, one LocalQueue, a ClusterQueue with room for all) are
created with `kubectl create -f` as fast as it goes; the controller (`python -m extender
run`, a separate process) admits and starts them. The runner watches the Jobs and records,
for each, when it was first seen and when it was first seen unsuspended. Reported:
- create → started, p50 / p99 / max, two ways: from each Job's creationTimestamp (whole
  seconds, as `kubectl get -o yaml` shows it; so up to a second too long) and from when the
  runner's watch first saw it (milliseconds);
- the controller's writes per Job and writes per second over the burst.

Against the API double (the default; each write then takes --write-latency seconds, what a
real kube-apiserver shows on this machine) or a real cluster (--kubeconfig; the Tower CRDs
are applied if missing). Prints one JSON object.

--check external: the ClusterQueue asks for an AdmissionCheck of another controller, which
the runner plays: it sets each reserved Workload's check Ready as soon as it sees it.
--check provisioning: Kueue's ProvisioningRequest check (Tower's controller), with the
runner playing cluster-autoscaler: each ProvisioningRequest is Provisioned as soon as seen.
Either way the runner's writes are not counted; what a check costs Tower is the difference.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import yaml  # noqa: E402
from kubernetes import config as k8s_config  # noqa: E402

from extender.core.jobframework.workloads import creation_seconds  # noqa: E402
from extender.kube.api import resources as r  # noqa: E402
from extender.kube.api.client import ApiError, RequestBudget, RestClient  # noqa: E402
from extender.kube.generators.crds import custom_resource_definitions  # noqa: E402
from tests.scrape import METRICS_LINE, scrape  # noqa: E402

CRDS = r.Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
NAMESPACES = r.Resource("", "v1", "namespaces", "Namespace", False)
CONTROLLER_USER = "system:serviceaccount:tower-system:tower-controller"
RUN_LABEL = "tower.dev/burst-run"  # this run's Jobs only (an earlier run's may be terminating)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(values), 3),
        "p99": round(percentile(values, 99), 3),
        "max": round(max(values), 3),
    }


def job_manifest(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": "burst", RUN_LABEL: namespace},
        },
        "spec": {
            "suspend": True,  # as the webhook leaves it (the webhook is not what is measured)
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "c",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "10m"}},
                        }
                    ],
                }
            },
        },
    }


CHECK = "bench-check"
PR_CRD = os.path.join(
    ROOT, "tests", "data", "autoscaler", "autoscaling.x-k8s.io_provisioningrequests.yaml"
)


def check_objects(check: str) -> list[tuple[r.Resource, dict[str, Any]]]:
    if check == "none":
        return []
    controller = (
        "kueue.x-k8s.io/provisioning-request" if check == "provisioning" else "example.com/bench"
    )
    spec: dict[str, Any] = {"controllerName": controller}
    out: list[tuple[r.Resource, dict[str, Any]]] = []
    if check == "provisioning":
        spec["parameters"] = {
            "apiGroup": "kueue.x-k8s.io",
            "kind": "ProvisioningRequestConfig",
            "name": "bench-config",
        }
        out.append(
            (
                r.PROVISIONING_REQUEST_CONFIGS,
                {
                    "metadata": {"name": "bench-config"},
                    "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io"},
                },
            )
        )
    out.append((r.ADMISSION_CHECKS, {"metadata": {"name": CHECK}, "spec": spec}))
    return out


def queue_objects(
    namespace: str, jobs: int, check: str = "none"
) -> list[tuple[r.Resource, dict[str, Any]]]:
    strategy = (
        {"admissionChecksStrategy": {"admissionChecks": [{"name": CHECK}]}}
        if check != "none"
        else {}
    )
    return [
        *check_objects(check),
        (NAMESPACES, {"metadata": {"name": namespace}}),
        (r.RESOURCE_FLAVORS, {"metadata": {"name": "burst-flavor"}, "spec": {}}),
        (
            r.CLUSTER_QUEUES,
            {
                "metadata": {"name": "burst"},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {
                                    "name": "burst-flavor",
                                    "resources": [{"name": "cpu", "nominalQuota": str(jobs)}],
                                }
                            ],
                        }
                    ],
                    **strategy,
                },
            },
        ),
        (
            r.LOCAL_QUEUES,
            {
                "metadata": {"name": "burst", "namespace": namespace},
                "spec": {"clusterQueue": "burst"},
            },
        ),
    ]


class Watcher:
    """When each Job was first seen, and first seen unsuspended (the runner's clock)."""

    def __init__(self, client: RestClient, namespace: str, expected: int) -> None:
        self.client = client
        self.namespace = namespace
        self.expected = expected
        self.seen: dict[str, float] = {}
        self.created: dict[str, float] = {}  # creationTimestamp, wall seconds
        self.started: dict[str, float] = {}  # wall seconds
        self.started_mono: dict[str, float] = {}
        self.done = threading.Event()
        self.ready = threading.Event()

    def run(self) -> None:
        selector = f"{RUN_LABEL}={self.namespace}"
        _, version = self.client.list(r.JOBS, self.namespace, label_selector=selector)
        self.ready.set()
        while not self.done.is_set():
            for _, obj in self.client.watch(
                r.JOBS, version, label_selector=selector, timeout_seconds=60
            ):
                version = obj["metadata"].get("resourceVersion", version)
                self._see(obj)
                if self.done.is_set():
                    return

    def _see(self, obj: dict[str, Any]) -> None:
        if obj["metadata"].get("namespace") != self.namespace:
            return
        name = obj["metadata"]["name"]
        now, mono = time.time(), time.monotonic()
        if name not in self.seen:
            self.seen[name] = mono
            self.created[name] = creation_seconds(obj["metadata"].get("creationTimestamp"))
        if obj.get("spec", {}).get("suspend") is False and name not in self.started:
            self.started[name] = now
            self.started_mono[name] = mono
            if len(self.started) >= self.expected:
                self.done.set()


def stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class CheckPlayer:
    """The other side of a check: an external controller that says Ready to every reserved
    Workload, or cluster-autoscaler that says Provisioned to every ProvisioningRequest."""

    def __init__(self, client: RestClient, namespace: str, check: str) -> None:
        self.client = client
        self.namespace = namespace
        self.check = check
        self.done = threading.Event()
        self.answered: set[str] = set()

    def activate(self) -> None:
        if self.check != "external":
            return
        condition = {
            "type": "Active",
            "status": "True",
            "reason": "Active",
            "message": "bench",
            "lastTransitionTime": stamp(),
        }
        self.client.patch(
            r.ADMISSION_CHECKS, CHECK, {"status": {"conditions": [condition]}}, subresource="status"
        )

    def run(self) -> None:
        resource = r.WORKLOADS if self.check == "external" else r.PROVISIONING_REQUESTS
        _, version = self.client.list(resource, self.namespace)
        while not self.done.is_set():
            for _, obj in self.client.watch(resource, version, timeout_seconds=60):
                version = obj["metadata"].get("resourceVersion", version)
                if obj["metadata"].get("namespace") == self.namespace:
                    self._answer(resource, obj)
                if self.done.is_set():
                    return

    def _answer(self, resource: r.Resource, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if name in self.answered:
            return
        if resource is r.WORKLOADS:
            entries = (obj.get("status") or {}).get("admissionChecks") or []
            if not any(e.get("name") == CHECK and e.get("state") == "Pending" for e in entries):
                return
            body = {
                "status": {
                    "admissionChecks": [
                        {
                            "name": CHECK,
                            "state": "Ready",
                            "message": "",
                            "lastTransitionTime": stamp(),
                        }
                    ]
                }
            }
        else:
            condition = {
                "type": "Provisioned",
                "status": "True",
                "reason": "Provisioned",
                "message": "",
                "lastTransitionTime": stamp(),
            }
            body = {"status": {"conditions": [condition]}}
        self.answered.add(name)
        try:
            self.client.patch(resource, name, body, self.namespace, subresource="status")
        except ApiError:
            self.answered.discard(name)  # seen again on its next change


def controller_writes(port: int, kubeconfig: str) -> int:
    """The controller's writes, from its /metrics, read with the kubeconfig's credentials."""
    text = scrape(port, kubeconfig=kubeconfig)
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("tower_kube_api_writes_total{")
    )


def start_controller(kubeconfig: str, args: argparse.Namespace) -> tuple[subprocess.Popen, int]:
    command = [
        sys.executable,
        "-m",
        "extender",
        "run",
        "--kubeconfig",
        kubeconfig,
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
        "WARNING",
    ]
    if args.write_concurrency is not None:  # None: the controller's default (and older code)
        command += ["--write-concurrency", str(args.write_concurrency)]
    controller = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    assert controller.stderr is not None
    port = int(controller.stderr.readline().split()[-1])
    metrics_port = next(
        int(found[1]) for line in controller.stderr if (found := METRICS_LINE.search(line))
    )

    def drain(stream: Any) -> None:
        for line in stream:
            sys.stderr.write(line)

    threading.Thread(target=drain, args=(controller.stderr,), daemon=True).start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2)
            break
        except OSError:
            time.sleep(0.2)
    return controller, metrics_port


def one_run(admin: RestClient, kubeconfig: str, controller_config: str, args: Any, n: int) -> dict:
    namespace = f"burst-{os.getpid()}-{n}"
    for resource, obj in queue_objects(namespace, args.jobs, args.check):
        obj = {"apiVersion": resource.api_version, "kind": resource.kind, **obj}
        try:
            admin.create(resource, obj, obj["metadata"].get("namespace"))
        except ApiError as err:
            if not err.already_exists:
                raise
    player = CheckPlayer(admin, namespace, args.check)
    if args.check != "none":
        player.activate()
        threading.Thread(target=player.run, daemon=True).start()
    controller, port = start_controller(controller_config, args)
    watcher = Watcher(admin, namespace, args.jobs)
    threading.Thread(target=watcher.run, daemon=True).start()
    watcher.ready.wait(30)
    time.sleep(1.0)  # the controller's caches are synced and its queues empty
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        yaml.safe_dump_all(
            [job_manifest(f"job-{i:03d}", namespace) for i in range(args.jobs)], handle
        )
    writes_before = controller_writes(port, kubeconfig)
    began = time.monotonic()
    subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "create", "-f", handle.name],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    created_in = time.monotonic() - began
    all_started = watcher.done.wait(args.timeout)
    writes = controller_writes(port, kubeconfig) - writes_before
    last = max(watcher.started_mono.values(), default=began)
    player.done.set()
    controller.terminate()
    controller.wait(30)
    os.unlink(handle.name)
    names = sorted(watcher.started)
    from_stamp = [watcher.started[x] - watcher.created[x] for x in names]
    from_seen = [watcher.started_mono[x] - watcher.seen[x] for x in names]
    admin.delete(NAMESPACES, namespace)
    deadline = time.monotonic() + 120  # the next run starts on a quiet API server
    while time.monotonic() < deadline:
        try:
            admin.get(NAMESPACES, namespace)
        except ApiError as err:
            if err.not_found:
                break
            raise
        time.sleep(1.0)
    return {
        "check": args.check,
        "jobs": args.jobs,
        "started": len(names),
        "all_started": all_started,
        "kubectl_create_s": round(created_in, 2),
        "create_to_started_from_creationTimestamp_s": summary(from_stamp) if names else None,
        "create_to_started_from_watch_s": summary(from_seen) if names else None,
        "controller_writes": writes,
        "writes_per_job": round(writes / max(1, len(names)), 3),
        "writes_per_second": round(writes / max(1e-9, last - began), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", help="a real cluster's (default: the API double)")
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--qps", type=float, default=1000)
    parser.add_argument("--burst", type=int, default=2000)
    parser.add_argument("--write-concurrency", type=int, default=None)
    parser.add_argument(
        "--write-latency",
        type=float,
        default=0.005,
        help="seconds each write takes in the API double (a real one here: about 0.005)",
    )
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument(
        "--check",
        choices=("none", "external", "provisioning"),
        default="none",
        help="an AdmissionCheck on the ClusterQueue, its other side played by the runner",
    )
    args = parser.parse_args()

    tmp = tempfile.mkdtemp()
    if args.kubeconfig:
        kubeconfig = controller_config = args.kubeconfig
        where = "real kube-apiserver"
    else:
        from tests.apidouble import ApiDouble

        api = ApiDouble(history=200_000)
        api.start()
        api.write_latency = args.write_latency
        kubeconfig = api.kubeconfig(os.path.join(tmp, "admin"))
        controller_config = api.kubeconfig(
            os.path.join(tmp, "tower"), token="tower", username=CONTROLLER_USER
        )
        where = f"API double, {args.write_latency * 1000:.0f} ms per write"
    admin = RestClient(
        k8s_config.new_client_from_config(config_file=kubeconfig), RequestBudget(10_000, 10_000)
    )
    for crd in custom_resource_definitions():
        try:
            admin.create(CRDS, crd)
        except ApiError as err:
            if not err.already_exists:
                raise
    if args.check == "provisioning":
        with open(PR_CRD) as f:
            try:
                admin.create(CRDS, yaml.safe_load(f))
            except ApiError as err:
                if not err.already_exists:
                    raise
    time.sleep(1.0)  # the CRDs are served
    runs = [one_run(admin, kubeconfig, controller_config, args, n) for n in range(args.runs)]
    print(
        json.dumps(
            {
                "where": where,
                "qps": args.qps,
                "burst": args.burst,
                "write_concurrency": args.write_concurrency,
                "runs": runs,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
