"""Tower on a real cluster through what users meet: priority preemption, cohort borrowing,
a webhook replica replaced under load, and the controller's leader killed mid-admission.

Tower runs on this machine as `make dev-up` runs it (the webhook registered by URL, two
controller replicas electing a leader on their own Lease), in a namespace and with queue
names of its own; everything is deleted at the end. A webhook replica is replaced as a
Deployment does it: the new replica receives the traffic before the old one gets SIGTERM
(a SIGKILLed replica fails the creates sent to it until the endpoints drop it, in Kueue
too; see docs/operations.md).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client, watch

from tests.e2e.conftest import KUBECONFIG, job_manifest, kubectl, wait, webhook_host_port
from tests.servers import free_port
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
SUFFIX = uuid.uuid4().hex[:5]
NS = f"tower-e2e-{SUFFIX}"
LEASE = ["--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "0.5"]


def queues_yaml() -> str:
    def cq(name, cpu, **spec):
        return {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": f"{name}-{SUFFIX}"},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": f"e2e-{SUFFIX}",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": cpu},
                                    {"name": "memory", "nominalQuota": "64Gi"},
                                ],
                            }
                        ],
                    }
                ],
                **spec,
            },
        }

    def lq(name, cluster_queue):
        return {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"namespace": NS, "name": name},
            "spec": {"clusterQueue": f"{cluster_queue}-{SUFFIX}"},
        }

    def priority(name, value):
        return {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": f"{name}-{SUFFIX}"},
            "value": value,
        }

    docs = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": f"e2e-{SUFFIX}"},
        },
        priority("low", 1),
        priority("high", 100),
        cq("urgent", 4, preemption={"withinClusterQueue": "LowerPriority"}),
        cq("lender", 4, cohortName=f"e2e-{SUFFIX}"),
        cq("borrower", 2, cohortName=f"e2e-{SUFFIX}"),
        cq("steady", 4),
        cq("load", 1000),
        lq("urgent", "urgent"),
        lq("borrower", "borrower"),
        lq("steady", "steady"),
        lq("load", "load"),
    ]
    return yaml.safe_dump_all(docs)


def job(name: str, queue: str, cpu: str, seconds: int, priority: str | None = None) -> dict:
    labels = {"kueue.x-k8s.io/queue-name": queue}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = f"{priority}-{SUFFIX}"
    return job_manifest(labels, name=name, cpu=cpu, memory="1Gi", seconds=seconds)


class Tower:
    """The webhook and two controller replicas, as processes on this machine."""

    def __init__(self, tmp: Path, host: str, port: int) -> None:
        self.tmp = tmp
        self.host = host
        self.certs = tmp / "certs"
        flag = "--ip-address" if host.replace(".", "").isdigit() or ":" in host else "--dns-name"
        subprocess.run(
            [sys.executable, "-m", "certs", "generate", "--out", str(self.certs), flag, host],
            cwd=ROOT, check=True, capture_output=True,
        )  # fmt: skip
        self.username = kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
        self.procs: list[subprocess.Popen[bytes]] = []
        self.webhook = self.start_webhook(port)
        self.controllers = [self.start_controller(i) for i in range(2)]

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 (the child keeps it)
        proc = subprocess.Popen([sys.executable, "-m", *args], cwd=ROOT, stdout=log,
                                stderr=subprocess.STDOUT)  # fmt: skip
        self.procs.append(proc)
        return proc

    def start_webhook(self, port: int) -> subprocess.Popen[bytes]:
        proc = self._spawn(
            f"webhook-{port}", "webhook", "--port", str(port), "--bind-address", self.host,
            "--tls-cert-file", str(self.certs / "tls.crt"),
            "--tls-private-key-file", str(self.certs / "tls.key"),
            "--controller-username", self.username, "--workers", "1",
        )  # fmt: skip
        wait(lambda: self._ready(port), timeout=30, what=f"the webhook on port {port}")
        subprocess.run(
            [sys.executable, "-m", "certs", "install", "--kubeconfig", KUBECONFIG or "",
             "--url", f"https://{self.host}:{port}", "--certs-dir", str(self.certs)],
            cwd=ROOT, check=True, capture_output=True,
        )  # fmt: skip
        return proc

    def _ready(self, port: int) -> bool:
        try:
            with socket.create_connection((self.host, port), timeout=1):
                return True
        except OSError:
            return False

    def start_controller(self, i: int) -> subprocess.Popen[bytes]:
        return self._spawn(
            f"controller-{i}", "extender", "run", "--kubeconfig", KUBECONFIG or "",
            "--health-address", "127.0.0.1:0", "--metrics-address", "127.0.0.1:0",
            "--status-interval", "0.5",
            "--leader-election-id", f"tower-e2e-{SUFFIX}", *LEASE,
        )  # fmt: skip

    def leader(self, coordination: client.CoordinationV1Api) -> subprocess.Popen[bytes] | None:
        try:
            lease = coordination.read_namespaced_lease(f"tower-e2e-{SUFFIX}", "tower-system")
        except client.ApiException:
            return None
        holder = lease.spec.holder_identity or ""
        for proc in self.controllers:
            if proc.poll() is None and holder.endswith(f"_{proc.pid}"):
                return proc
        return None

    def logs(self) -> str:
        return "".join(p.read_text() for p in sorted(self.tmp.glob("*.log")))

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture(scope="module")
def tower(tmp_path_factory, api_client, kubelet_namespaces):
    host, port = webhook_host_port()
    kubectl("apply", "-f", str(ROOT / "deploy" / "crds"), "-f", str(ROOT / "deploy" / "rbac"))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    kubectl("create", "namespace", NS)
    kubelet_namespaces.add(NS)
    queues = queues_yaml()
    kubectl("apply", "-f", "-", input=queues)
    tower = Tower(tmp_path_factory.mktemp("tower"), host, port)
    yield tower
    tower.stop()
    kubectl("delete", "namespace", NS, "--wait=true", "--timeout=120s", check=False)
    kubectl("delete", "-f", "-", "--ignore-not-found", input=queues, check=False)
    kubectl("delete", "lease", f"tower-e2e-{SUFFIX}", "-n", "tower-system",
            "--ignore-not-found", check=False)  # fmt: skip
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        kubectl("delete", kind, "-l", "app.kubernetes.io/part-of=tower", "--ignore-not-found",
                check=False)  # fmt: skip
    assert "Traceback" not in tower.logs(), tower.logs()[-5000:]


def workload(api_client, job_name: str) -> dict:
    items = client.CustomObjectsApi(api_client).list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", NS, "workloads"
    )["items"]
    for wl in items:
        if wl["metadata"]["name"].startswith(f"job-{job_name}-"):
            return wl
    return {}


def condition(obj: dict, kind: str) -> dict:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return c
    return {}


def suspended(api_client, name: str) -> bool:
    return bool(client.BatchV1Api(api_client).read_namespaced_job(name, NS).spec.suspend)


def succeeded(api_client, name: str) -> bool:
    return (client.BatchV1Api(api_client).read_namespaced_job(name, NS).status.succeeded or 0) > 0


def test_a_higher_priority_job_preempts_a_lower_one(tower, api_client):
    batch = client.BatchV1Api(api_client)
    batch.create_namespaced_job(NS, job("low", "urgent", "3", 600, priority="low"))
    wait(lambda: not suspended(api_client, "low"), what="the low-priority Job to start")
    batch.create_namespaced_job(NS, job("high", "urgent", "3", 3, priority="high"))
    wait(lambda: not suspended(api_client, "high"), what="the high-priority Job to start")
    assert suspended(api_client, "low")  # evicted to make room
    evicted = condition(workload(api_client, "low"), "Evicted")
    assert evicted.get("reason") == "Preempted", evicted
    wait(lambda: succeeded(api_client, "high"), what="the high-priority Job to complete")
    wait(lambda: not suspended(api_client, "low"), what="the low-priority Job to run again")


def test_a_cluster_queue_borrows_what_its_cohort_does_not_use(tower, api_client):
    batch = client.BatchV1Api(api_client)
    batch.create_namespaced_job(NS, job("borrows", "borrower", "3", 2))  # its own quota: 2
    wait(lambda: not suspended(api_client, "borrows"), what="the Job to start by borrowing")
    admitted = workload(api_client, "borrows")["status"]["admission"]
    assert admitted["clusterQueue"] == f"borrower-{SUFFIX}"
    wait(lambda: succeeded(api_client, "borrows"), what="the borrowing Job to complete")


def test_a_webhook_replica_replaced_under_load_fails_no_create(tower, api_client):
    batch = client.BatchV1Api(api_client)
    created, failed = [], []
    stop = threading.Event()

    def create() -> None:
        i = 0
        while not stop.is_set():
            try:
                made = batch.create_namespaced_job(NS, job(f"load-{i}", "load", "100m", 1))
                created.append(made)
            except client.ApiException as err:
                failed.append(f"load-{i}: {err.status} {err.body}")
            i += 1

    creator = threading.Thread(target=create, daemon=True)
    creator.start()
    try:
        wait(lambda: len(created) >= 20, timeout=60, what="creates before the replacement")
        old = tower.webhook
        tower.webhook = tower.start_webhook(free_port())  # ready, then it receives the traffic
        time.sleep(2)  # the Deployment's preStop: the API server stops sending to the old one
        old.send_signal(signal.SIGTERM)
        assert old.wait(timeout=30) == 0
        count = len(created)
        wait(lambda: len(created) >= count + 20, timeout=60, what="creates after")
    finally:
        stop.set()
        creator.join(30)
    assert failed == []
    assert all(j.spec.suspend for j in created)  # each went through a webhook


def test_the_leader_killed_mid_admission_admits_nothing_twice(tower, api_client):
    coordination = client.CoordinationV1Api(api_client)
    leader = wait(lambda: tower.leader(coordination), what="a leader")
    admissions: dict[str, int] = {}
    holding: set[str] = set()
    finished: set[str] = set()  # Workloads whose Finished the watch has delivered
    over: list[int] = []
    first_admission = threading.Event()
    stop = threading.Event()
    custom = client.CustomObjectsApi(api_client)

    def watch_workloads() -> None:
        stream = watch.Watch()
        for event in stream.stream(
            custom.list_namespaced_custom_object, "kueue.x-k8s.io", "v1beta2", NS,
            "workloads", timeout_seconds=300,
        ):  # fmt: skip
            if stop.is_set():
                stream.stop()
                return
            wl = event["object"]
            if wl["spec"].get("queueName") != "steady":
                continue
            name = wl["metadata"]["name"]
            holds = (
                event["type"] != "DELETED"
                and bool((wl.get("status") or {}).get("admission"))
                and condition(wl, "Finished").get("status") != "True"
            )
            if holds and name not in holding:
                admissions[name] = admissions.get(name, 0) + 1
                first_admission.set()
            (holding.add if holds else holding.discard)(name)
            if condition(wl, "Finished").get("status") == "True":
                finished.add(name)
            if len(holding) > 4:  # each asks for 1 cpu of the 4 `steady` has
                over.append(len(holding))

    watcher = threading.Thread(target=watch_workloads, daemon=True)
    watcher.start()
    time.sleep(1)
    batch = client.BatchV1Api(api_client)
    names = [f"steady-{i}" for i in range(10)]
    for name in names:
        batch.create_namespaced_job(NS, job(name, "steady", "1", 3))
    assert first_admission.wait(60), "nothing was admitted"
    os.kill(leader.pid, signal.SIGKILL)  # mid-admission: more are waiting to be admitted
    leader.wait(timeout=10)
    new = wait(lambda: tower.leader(coordination), timeout=30, what="the standby to lead")
    assert new is not leader
    wait(lambda: all(succeeded(api_client, n) for n in names), timeout=300,
         what="every Job to complete under the new leader")  # fmt: skip
    # The watch delivers on its own time: what it recorded is complete only once it has
    # delivered every Workload's Finished (each admission comes before it).
    wait_until(lambda: sorted(finished), lambda seen: len(seen) == len(names), timeout=60,
               interval=0.5, what="the watch to deliver every Workload's Finished")  # fmt: skip
    stop.set()
    assert over == []
    assert sorted(admissions.values()) == [1] * len(names), admissions
