"""Kueue's MultiKueue e2e setup (test/e2e/multikueue/*/suite_test.go, BeforeEach), in Python.

The manager is the suite's plane with the package's Tower; each worker is a real v1.32 control
plane with its own Tower (webhook and controller, Kueue's e2e Configuration) and a Node made by
hand whose kubelet the test plays (`WorkerKubelet`): a bound pod runs, gets an IP and Kueue's
conditions, and ends when the test says so (`terminate_active_pods`, as Kueue's
WaitForActivePodsAndTerminate asks agnhost over exec). Worker 1 is TOWER_E2E_WORKER_KUBECONFIG;
worker 2 is TOWER_E2E_WORKER2_KUBECONFIG, or a control plane started here with
shared/realk8s/up.sh (REALK8S_PORT_OFFSET=400) and stopped after the package.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest
from kubernetes import client, config

from certs.kube import CONVERTED_CRDS
from tests.e2e.conftest import kubectl
from tests.e2e.kueue.util import (
    CONFIGURATION,
    KUEUE,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    ROOT,
    TIMEOUT,
    Cluster,
    Tower,
    V,
    condition,
    eventually,
    free_port,
    gone,
)

WORKER1 = os.environ.get("TOWER_E2E_WORKER_KUBECONFIG")
WORKER2 = os.environ.get("TOWER_E2E_WORKER2_KUBECONFIG")
REALK8S = Path(os.environ.get("REALK8S_DIR", ROOT.parent / "shared" / "realk8s"))
TOWER_NS = "tower-system"  # where Tower reads workers' kubeconfigs (Kueue: kueue-system)
MULTIKUEUE_CONTROLLER = f"{KUEUE}/multikueue"
ORIGIN_LABEL = f"{KUEUE}/multikueue-origin"
GATE = f"{KUEUE}/admission"
NODE = "kind-worker"
TAS_NODE_GROUP = "cloud.provider.com/node-group"  # tas_test.go tasNodeGroupLabel
SERVICE = {"service": {"name": "tower-webhook", "namespace": TOWER_NS, "path": "/convert"}}

# The extra virtual resources that steer a job to one worker (extraResourceGPU*Cost).
GPU_HIGH = "example.com/gpu-h100"
GPU_LOW = "example.com/gpu-v100s"

NO_WORKER = (
    "no worker cluster: set TOWER_E2E_WORKER_KUBECONFIG (shared/realk8s/up.sh with "
    "REALK8S_PORT_OFFSET=100)"
)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class WorkerKubelet:
    """Plays the kubelet of the worker's Node: a pod bound to it runs (Running, an IP, Ready,
    its container started) until `terminate` ends it with an exit code, or it exits at once
    (agnhost's entrypoint-tester); a pod being deleted is removed. Its conditions are those a
    kubelet writes, in a kubelet's order."""

    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)
        self.namespaces: set[str] = set()
        self.exits: dict[str, int] = {}  # pod uid -> the exit code asked for
        self.ip = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="worker-kubelet", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(10)

    def terminate(self, pod: client.V1Pod, code: int) -> None:
        self.exits[pod.metadata.uid] = code

    def _run(self) -> None:
        while not self.stopping.wait(0.3):
            for namespace in list(self.namespaces):
                try:
                    self._sync(namespace)
                except Exception as err:  # a pod that changed or went: the next pass sees it
                    print(f"worker kubelet, {namespace}: {err!r}"[:300], file=sys.stderr)

    def _sync(self, namespace: str) -> None:
        for pod in self.core.list_namespaced_pod(namespace).items:
            if pod.metadata.deletion_timestamp is not None:
                if pod.spec.node_name and pod.status.phase not in ("Succeeded", "Failed"):
                    self._end(pod, 137)
                self.core.delete_namespaced_pod(
                    pod.metadata.name, namespace, grace_period_seconds=0
                )
                continue
            # Any Node of the worker (one another test made by hand too): none has a kubelet.
            if not pod.spec.node_name or pod.status.phase in ("Succeeded", "Failed"):
                continue
            args = pod.spec.containers[0].args or []
            if pod.status.phase != "Running":
                self._start(pod)
            elif "entrypoint-tester" in args:
                self._end(pod, 0)
            elif pod.metadata.uid in self.exits:
                self._end(pod, self.exits.pop(pod.metadata.uid))

    def _start(self, pod: client.V1Pod) -> None:
        self.ip += 1
        stamp = now()
        body = self._status(pod)
        body["status"].update(
            phase="Running",
            podIP=f"10.250.{self.ip // 250}.{self.ip % 250 + 1}",
            hostIP="10.250.255.1",
            startTime=stamp,
            conditions=_conditions(pod, "True", "True", "True", "True", "", stamp),
            containerStatuses=[
                {"name": c.name, "image": c.image, "imageID": "", "ready": True,
                 "restartCount": 0, "started": True, "state": {"running": {"startedAt": stamp}}}
                for c in pod.spec.containers
            ],
        )  # fmt: skip
        self.core.replace_namespaced_pod_status(pod.metadata.name, pod.metadata.namespace, body)

    def _end(self, pod: client.V1Pod, code: int) -> None:
        stamp = now()
        reason = "PodCompleted" if code == 0 else "PodFailed"
        body = self._status(pod)
        body["status"].update(
            phase="Succeeded" if code == 0 else "Failed",
            conditions=_conditions(pod, "False", "True", "False", "False", reason, stamp),
            containerStatuses=[
                {"name": c.name, "image": c.image, "imageID": "", "ready": False,
                 "restartCount": 0, "started": False,
                 "state": {"terminated": {"exitCode": code,
                                          "reason": "Completed" if code == 0 else "Error",
                                          "startedAt": stamp, "finishedAt": stamp}}}
                for c in pod.spec.containers
            ],
        )  # fmt: skip
        self.core.replace_namespaced_pod_status(pod.metadata.name, pod.metadata.namespace, body)

    def _status(self, pod: client.V1Pod) -> dict[str, Any]:
        raw = self.core.api_client.sanitize_for_serialization(pod)
        raw.setdefault("status", {})
        return dict(raw)


def _conditions(
    pod: client.V1Pod,
    to_start: str,
    initialized: str,
    ready: str,
    containers_ready: str,
    reason: str,
    stamp: str,
) -> list[dict[str, Any]]:
    """A kubelet's pod conditions, in the order it writes them (PodScheduled, the
    scheduler's, last)."""

    def one(kind: str, status: str, why: str = "") -> dict[str, Any]:
        return {"type": kind, "status": status, "lastTransitionTime": stamp,
                **({"reason": why} if why else {})}  # fmt: skip

    scheduled = next(
        (c for c in pod.status.conditions or [] if c.type == "PodScheduled"),
        None,
    )
    return [
        one("PodReadyToStartContainers", to_start),
        one("Initialized", initialized, reason if initialized == "True" and reason else ""),
        one("Ready", ready, reason),
        one("ContainersReady", containers_ready, reason),
        {"type": "PodScheduled", "status": "True",
         "lastTransitionTime": scheduled.last_transition_time.strftime("%Y-%m-%dT%H:%M:%SZ")
         if scheduled and scheduled.last_transition_time else stamp},
    ]  # fmt: skip


class Worker:
    """One worker cluster: its API, Tower's CRDs, webhook and controller there, its Node and
    kubelet (played), and the Secret on the manager that holds its kubeconfig."""

    def __init__(self, name: str, kubeconfig: str, tmp: Path) -> None:
        self.name = name  # the Secret's name on the manager ("multikueue1")
        self.kubeconfig = kubeconfig
        self.tmp = tmp
        self.api = config.new_client_from_config(config_file=kubeconfig)
        self.cluster = Cluster(self.api)
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self._conversion(SERVICE, check=False)  # as deploy/crds have it (a run cut short)
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f",
                     str(ROOT / "deploy" / "crds"))  # fmt: skip
        self.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        self.kubectl("create", "namespace", TOWER_NS, check=False)
        self._node()
        self.kubelet = WorkerKubelet(self.api)
        self.procs: list[subprocess.Popen[bytes]] = []
        self._webhook()
        self.procs.append(self._controller(CONFIGURATION))
        flat = self.kubectl("config", "view", "--raw", "--flatten", "--minify")
        kubectl("create", "namespace", TOWER_NS, check=False)
        kubectl("delete", "secret", name, "-n", TOWER_NS, "--ignore-not-found")
        kubectl("create", "secret", "generic", name, "-n", TOWER_NS,
                f"--from-literal=kubeconfig={flat}")  # fmt: skip

    def _controller(self, configuration: str) -> subprocess.Popen[bytes]:
        (self.tmp / "config.yaml").write_text(configuration)
        return self._spawn(
            "controller", "extender", "run", "--kubeconfig", self.kubeconfig,
            "--config", str(self.tmp / "config.yaml"), "--no-leader-elect",
            "--health-address", "127.0.0.1:0", "--metrics-address", "127.0.0.1:0",
            "--status-interval", "0.5",
        )  # fmt: skip

    def restart_controller(self, configuration: str = CONFIGURATION) -> None:
        """The worker's Tower stopped and started again with another Configuration (Kueue's
        sequential cases restart the workers' Kueue too); its webhook stays."""
        controller = self.procs.pop()
        controller.send_signal(signal.SIGTERM)
        try:
            controller.wait(timeout=20)
        except subprocess.TimeoutExpired:
            controller.kill()
        self.procs.append(self._controller(configuration))

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        return kubectl(*args, input=input, check=check, kubeconfig=self.kubeconfig)

    def _node(self) -> None:
        """A Node as kind's worker, Ready, with room for the suite's jobs, the virtual GPUs
        among them (Kueue's kind workers have none, and admit on quota alone; Tower's physical
        fit, on for extended resources, asks a node for them)."""
        labels = {"kubernetes.io/hostname": NODE, "instance-type": "on-demand",
                  TAS_NODE_GROUP: "tas-node"}  # fmt: skip
        with contextlib.suppress(client.ApiException):
            self.core.create_node({"metadata": {"name": NODE, "labels": labels}})
        self.core.patch_node(NODE, {"metadata": {"labels": labels}})
        room = {"cpu": "8", "memory": "32Gi", "ephemeral-storage": "100Gi", "pods": "110",
                GPU_HIGH: "4", GPU_LOW: "4"}  # fmt: skip
        status = {"status": {"capacity": room, "allocatable": room, "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e",
             "lastHeartbeatTime": now(), "lastTransitionTime": now()}]}}  # fmt: skip
        self.core.patch_node_status(NODE, status)
        self.kubectl("taint", "node", NODE, "node.kubernetes.io/not-ready-", check=False)

    def _webhook(self) -> None:
        port = free_port("127.0.0.1")
        certs = self.tmp / "certs"
        python = [sys.executable, "-m"]
        subprocess.run([*python, "certs", "generate", "--out", str(certs), "--ip-address",
                        "127.0.0.1"], check=True, cwd=ROOT, capture_output=True)  # fmt: skip
        webhook_config = self.tmp / "webhook-config.yaml"
        webhook_config.write_text(CONFIGURATION)
        self.procs.append(self._spawn(
            "webhook", "webhook", "--port", str(port), "--bind-address", "127.0.0.1",
            "--tls-cert-file", str(certs / "tls.crt"),
            "--tls-private-key-file", str(certs / "tls.key"),
            "--controller-username", "kubernetes-admin", "--workers", "1",
            "--kubeconfig", self.kubeconfig,
            "--config", str(webhook_config),
        ))  # fmt: skip

        def listening() -> bool:
            import socket

            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                return True
            return False

        eventually(listening, 30, f"{self.name}'s webhook to listen")
        subprocess.run([*python, "certs", "install", "--kubeconfig", self.kubeconfig, "--url",
                        f"https://127.0.0.1:{port}", "--certs-dir", str(certs),
                        "--config", str(webhook_config)],
                       check=True, cwd=ROOT, capture_output=True)  # fmt: skip
        bundle = base64.b64encode((certs / "ca.crt").read_bytes()).decode()
        self._conversion({"url": f"https://127.0.0.1:{port}/convert", "caBundle": bundle})

    def _conversion(self, client_config: dict[str, Any], check: bool = True) -> None:
        """The CRDs' v1beta1<->v1beta2 conversion sent to `client_config`."""
        patch = [{"op": "replace", "path": "/spec/conversion/webhook/clientConfig",
                  "value": client_config}]  # fmt: skip
        for crd in CONVERTED_CRDS:
            self.kubectl("patch", "crd", crd, "--type=json", "-p", json.dumps(patch), check=check)

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 (the child keeps it)
        return subprocess.Popen(
            [sys.executable, "-m", *args], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT
        )

    def stop(self) -> None:
        self.kubelet.stop()
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        self._conversion(SERVICE, check=False)
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            self.kubectl("delete", kind, f"tower-{kind[:-len('webhookconfiguration')]}-webhook",
                         "--ignore-not-found", check=False)  # fmt: skip
        kubectl("delete", "secret", self.name, "-n", TOWER_NS, "--ignore-not-found", check=False)
        # Its Node goes too: no kubelet runs it once this one stops, and another suite's pods
        # would be bound to it.
        self.kubectl("delete", "node", NODE, "--ignore-not-found", "--wait=false", check=False)

    # ----- what Kueue's cases read on a worker ------------------------------------------

    def workload(self, name: str, namespace: str) -> dict | None:
        return self.cluster.workload(name, namespace)

    def terminate_active_pods(
        self, namespace: str, count: int, code: int, selector: str | None = None
    ) -> None:
        """util.WaitForActivePodsAndTerminate: `count` pods running (with an IP), each ended
        with `code`."""

        def active() -> list[client.V1Pod]:
            pods = self.core.list_namespaced_pod(namespace, label_selector=selector).items
            running = [p for p in pods if p.status.pod_ip and p.status.phase == "Running"]
            assert len(running) == count, f"{len(running)} active pods, want {count}"
            return running

        for pod in eventually(active, LONG_TIMEOUT, f"{count} active pods on {self.name}"):
            self.kubelet.terminate(pod, code)


def _start_plane(run: Path) -> str:
    """A control plane for worker 2 (shared/realk8s/up.sh), its admin kubeconfig."""
    env = dict(os.environ, REALK8S_RUN=str(run), REALK8S_PORT_OFFSET="400")
    subprocess.run(["bash", str(REALK8S / "up.sh")], env=env, check=True, capture_output=True,
                   timeout=300)  # fmt: skip
    return str(run / "admin.kubeconfig")


@pytest.fixture(scope="package", name="workers")
def workers_fixture(
    tower: Tower, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Worker, Worker]]:
    """Kueue's two worker clusters, each with its Tower, and their Secrets on the manager
    (createSharedMultiKueueSecrets)."""
    if not WORKER1:
        pytest.skip(NO_WORKER)
    started: Path | None = None
    second = WORKER2
    if not second:
        if not os.environ.get("REALK8S_BIN"):
            pytest.skip("no second worker: set TOWER_E2E_WORKER2_KUBECONFIG, or REALK8S_BIN "
                        "for shared/realk8s/up.sh to start one")  # fmt: skip
        started = tmp_path_factory.mktemp("worker2-plane")
        second = _start_plane(started)
    one = Worker("multikueue1", WORKER1, tmp_path_factory.mktemp("worker1"))
    two = Worker("multikueue2", second, tmp_path_factory.mktemp("worker2"))
    yield one, two
    one.stop()
    two.stop()
    if started is not None:
        env = dict(os.environ, REALK8S_RUN=str(started))
        subprocess.run(["bash", str(REALK8S / "down.sh")], env=env, check=False)


def generated(cluster: Cluster, plural: str, body: dict[str, Any]) -> str:
    """util.MustCreate of an object with a generated name: its name."""
    return str(cluster.create(plural, body)["metadata"]["name"])


def flavor_quotas(flavor: str, quotas: dict[str, str]) -> dict[str, Any]:
    return {"coveredResources": list(quotas), "flavors": [{"name": flavor, "resources": [
        {"name": r, "nominalQuota": q} for r, q in quotas.items()]}]}  # fmt: skip


def cluster_queue(
    name: str, flavor: str, quotas: dict[str, str], checks: list[str] | None = None,
    generate: bool = False, preemption: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """utiltestingapi.MakeClusterQueue(name).ResourceGroup(...).AdmissionChecks(...)
    .Preemption(WithinClusterQueue: LowerPriority)."""
    meta = {"generateName": name} if generate else {"name": name}
    spec: dict[str, Any] = {"namespaceSelector": {},
                            "resourceGroups": [flavor_quotas(flavor, quotas)]}  # fmt: skip
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    if preemption:
        spec["preemption"] = {"withinClusterQueue": "LowerPriority"}
    return {"apiVersion": f"{KUEUE}/{V}", "kind": "ClusterQueue", "metadata": meta, "spec": spec}


def local_queue(name: str, namespace: str, cq: str) -> dict[str, Any]:
    return {"apiVersion": f"{KUEUE}/{V}", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cq}}  # fmt: skip


def wait_active(cluster: Cluster, plural: str, name: str, namespace: str | None = None) -> None:
    eventually(
        lambda: condition(cluster.get(plural, name, namespace), "Active").get("status") == "True",
        MEDIUM_TIMEOUT,
        f"{plural}/{name} to be Active",
    )


class MultiKueueSetup:
    """The objects of Kueue's baseline BeforeEach: the manager's namespace (and the same on
    both workers), two MultiKueueClusters, a MultiKueueConfig, the check, the priority
    classes, and a flavor, ClusterQueue and LocalQueue on each cluster."""

    MANAGER_QUOTA: ClassVar[dict[str, str]] = {"cpu": "2", "memory": "4G", "ephemeral-storage": "100G",
                     GPU_HIGH: "2", GPU_LOW: "2"}  # fmt: skip
    WORKER1_QUOTA: ClassVar[dict[str, str]] = {"cpu": "2", "memory": "1G", "ephemeral-storage": "15G",
                     GPU_HIGH: "2", GPU_LOW: "1"}  # fmt: skip
    WORKER2_QUOTA: ClassVar[dict[str, str]] = {"cpu": "1200m", "memory": "4G", "ephemeral-storage": "5G",
                     GPU_HIGH: "1", GPU_LOW: "2"}  # fmt: skip

    def __init__(
        self, manager: Cluster, workers: tuple[Worker, Worker], ns: str,
        quotas: tuple[dict[str, str], ...] | None = None, topology: bool = False,
        flavor_prefix: str = "default-", cq_prefix: str = "q1-",
    ) -> None:  # fmt: skip
        """With `topology`, tas_test.go's: a one-level Topology `default-<ns>` on each
        cluster, the flavor of nodes `cloud.provider.com/node-group: tas-node` under it, the
        ClusterQueues without preemption."""
        quotas = quotas or (self.MANAGER_QUOTA, self.WORKER1_QUOTA, self.WORKER2_QUOTA)
        self.topology = f"default-{ns}" if topology else None
        self.manager = manager
        self.workers = workers
        self.ns = ns
        for worker in workers:
            worker.core.create_namespace({"metadata": {"name": ns}})
            worker.kubelet.namespaces.add(ns)
        self.cluster_names: list[str] = []
        for worker, prefix in zip(workers, ("worker1-", "worker2-"), strict=True):
            self.cluster_names.append(generated(manager, "multikueueclusters", {
                "apiVersion": f"{KUEUE}/{V}", "kind": "MultiKueueCluster",
                "metadata": {"generateName": prefix},
                "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret",
                                                          "location": worker.name}}}}))  # fmt: skip
        self.config = generated(manager, "multikueueconfigs", {
            "apiVersion": f"{KUEUE}/{V}", "kind": "MultiKueueConfig",
            "metadata": {"generateName": "multikueueconfig-"},
            "spec": {"clusters": self.cluster_names}})  # fmt: skip
        self.check = generated(manager, "admissionchecks", {
            "apiVersion": f"{KUEUE}/{V}", "kind": "AdmissionCheck",
            "metadata": {"generateName": "ac1-"},
            "spec": {"controllerName": MULTIKUEUE_CONTROLLER,
                     "parameters": {"apiGroup": KUEUE, "kind": "MultiKueueConfig",
                                    "name": self.config}}})  # fmt: skip
        wait_active(manager, "admissionchecks", self.check)
        self.high = self._priority_class(manager, "high-workload-", 300, generate=True)
        self.low = self._priority_class(manager, "low-workload-", 100, generate=True)
        flavor_spec: dict[str, Any] = {}
        if self.topology:
            flavor_spec = {"nodeLabels": {TAS_NODE_GROUP: "tas-node"},
                           "topologyName": self.topology}  # fmt: skip
            for cluster in (manager, *(w.cluster for w in workers)):
                cluster.create("topologies", {
                    "apiVersion": f"{KUEUE}/{V}", "kind": "Topology",
                    "metadata": {"name": self.topology},
                    "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}})  # fmt: skip
        self.flavor = generated(manager, "resourceflavors", {
            "apiVersion": f"{KUEUE}/{V}", "kind": "ResourceFlavor",
            "metadata": {"generateName": flavor_prefix}, "spec": flavor_spec})  # fmt: skip
        self.cq = generated(manager, "clusterqueues", cluster_queue(
            cq_prefix, self.flavor, quotas[0], [self.check], generate=True,
            preemption=not topology))  # fmt: skip
        wait_active(manager, "clusterqueues", self.cq)
        self.lq = self.cq
        manager.create("localqueues", local_queue(self.lq, ns, self.cq), ns)
        wait_active(manager, "localqueues", self.lq, ns)
        for worker, quota in zip(workers, quotas[1:], strict=True):
            self._priority_class(worker.cluster, self.high, 300)
            self._priority_class(worker.cluster, self.low, 100)
            worker.cluster.create("resourceflavors", {
                "apiVersion": f"{KUEUE}/{V}", "kind": "ResourceFlavor",
                "metadata": {"name": self.flavor}, "spec": flavor_spec})  # fmt: skip
            worker.cluster.create("clusterqueues", cluster_queue(
                self.cq, self.flavor, quota, preemption=not topology))  # fmt: skip
            wait_active(worker.cluster, "clusterqueues", self.cq)
            worker.cluster.create("localqueues", local_queue(self.lq, ns, self.cq), ns)
            wait_active(worker.cluster, "localqueues", self.lq, ns)
        # kubernetesClientsMap: a worker by its MultiKueueCluster's name
        self.by_cluster = dict(zip(self.cluster_names, workers, strict=True))

    @staticmethod
    def _priority_class(cluster: Cluster, name: str, value: int, generate: bool = False) -> str:
        meta = {"generateName": name} if generate else {"name": name}
        body = {"apiVersion": f"{KUEUE}/{V}", "kind": "WorkloadPriorityClass",
                "metadata": meta, "value": value}  # fmt: skip
        return generated(cluster, "workloadpriorityclasses", body)

    def teardown(self) -> None:
        """Kueue's AfterEach: namespaces, then queues, flavors, priority classes and the
        MultiKueue objects, on every cluster."""
        self.manager.delete_namespace(self.ns)
        for worker in self.workers:
            worker.cluster.delete_namespace(self.ns)
        for worker in self.workers:
            for plural, name in (("clusterqueues", self.cq), ("resourceflavors", self.flavor),
                                 ("workloadpriorityclasses", self.high),
                                 ("workloadpriorityclasses", self.low)):  # fmt: skip
                worker.cluster.delete(plural, name, strip_finalizers=True)
        for plural, name in (("clusterqueues", self.cq), ("resourceflavors", self.flavor),
                             ("workloadpriorityclasses", self.high),
                             ("workloadpriorityclasses", self.low),
                             ("admissionchecks", self.check),
                             ("multikueueconfigs", self.config),
                             *(("multikueueclusters", c) for c in self.cluster_names)):  # fmt: skip
            self.manager.delete(plural, name, strip_finalizers=True)
        if self.topology:
            for cluster in (self.manager, *(w.cluster for w in self.workers)):
                cluster.delete("topologies", self.topology, strip_finalizers=True)


@pytest.fixture(name="mk")
def mk_fixture(
    cluster: Cluster, workers: tuple[Worker, Worker], kubelet_namespaces: set[str]
) -> Iterator[MultiKueueSetup]:
    ns = cluster.create_namespace_from_prefix("multikueue-")
    kubelet_namespaces.add(ns)
    setup = MultiKueueSetup(cluster, workers, ns)
    yield setup
    setup.teardown()


# ----- Kueue's assertions over workloads (pkg/workload, test/util) --------------------------


def is_admitted(wl: dict | None) -> bool:
    """workload.IsAdmitted."""
    return condition(wl, "Admitted").get("status") == "True"


def is_evicted(wl: dict | None) -> bool:
    """workloadevict.IsEvicted."""
    return condition(wl, "Evicted").get("status") == "True"


def has_quota(wl: dict | None) -> bool:
    """workload.HasActiveQuotaReservation (QuotaReserved, not evicted meanwhile)."""
    return condition(wl, "QuotaReserved").get("status") == "True"


def check_state(wl: dict | None, check: str) -> dict[str, Any]:
    """admissioncheck.FindAdmissionCheck."""
    for state in ((wl or {}).get("status") or {}).get("admissionChecks") or []:
        if state["name"] == check:
            return dict(state)
    return {}


def worker_from_message(message: str) -> str:
    """util.GetMultiKueueClusterNameFromAdmissionCheckMessage."""
    match = re.search(r'"([^"]*)"', message)
    return match.group(1) if match else ""


def expect_admitted_and_get_worker(manager: Cluster, name: str, namespace: str, check: str) -> str:
    """util.ExpectWorkloadsToBeAdmittedAndGetWorkerName."""

    def admitted() -> bool:
        wl = manager.workload(name, namespace)
        assert is_admitted(wl), f"{name} not admitted: {(wl or {}).get('status')}"
        return True

    eventually(admitted, MEDIUM_TIMEOUT, f"{name} admitted on the manager")

    def worker() -> str:
        found = worker_from_message(
            check_state(manager.workload(name, namespace), check).get("message", "")
        )
        assert found, f"no worker named in the check {check} of {name}"
        return found

    return str(eventually(worker, MEDIUM_TIMEOUT, "the admitting worker"))


def expect_check_state(
    manager: Cluster, name: str, namespace: str, check: str, state: str, message: str
) -> None:
    """util.ExpectAdmissionCheckStateWithMessage (an empty message is not compared)."""

    def seen() -> bool:
        wl = manager.workload(name, namespace)
        found = check_state(wl, check)
        assert found.get("state") == state, f"check {check}: {(wl or {}).get('status')}"
        if message:
            assert found.get("message") == message, f"check {check}: {found}"
        return True

    eventually(seen, MEDIUM_TIMEOUT, f"the check {check} {state}")


def expect_copy_admitted(
    manager: Cluster, worker: Worker, other: Worker, name: str, namespace: str,
    timeout: float = TIMEOUT,
) -> None:  # fmt: skip
    """The Workload admitted on `worker`, its spec the manager's, and not on `other`."""

    def seen() -> bool:
        here = manager.workload(name, namespace)
        there = worker.workload(name, namespace)
        assert there is not None, f"{name} not on {worker.name}"
        assert is_admitted(there), f"{name} not admitted on {worker.name}: {there.get('status')}"
        assert here is not None
        assert there["spec"] == here["spec"], (there["spec"], here["spec"])
        assert other.workload(name, namespace) is None, f"{name} is on {other.name}"
        return True

    eventually(seen, timeout, f"{name} admitted on {worker.name} only")


def expect_not_on(workers: tuple[Worker, ...], name: str, namespace: str, timeout: float) -> None:
    eventually(
        lambda: all(w.workload(name, namespace) is None for w in workers),
        timeout,
        f"{name} gone from the workers",
    )


def job_gone_on(workers: tuple[Worker, ...], name: str, namespace: str) -> None:
    """util.ExpectObjectToBeDeletedOnClusters for a Job."""
    eventually(
        lambda: all(gone(lambda w=w: w.batch.read_namespaced_job(name, namespace))
                    for w in workers),
        LONG_TIMEOUT,
        f"job {name} gone from the workers",
    )  # fmt: skip


def job_created(cluster: Cluster, body: dict[str, Any], namespace: str) -> Any:
    """util.MustCreate of a Job (a generated name is read back)."""
    return cluster.batch.create_namespaced_job(namespace, body)


def wait_seconds(seconds: float) -> None:
    time.sleep(seconds)
