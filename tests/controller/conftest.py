"""A cluster for controller tests: the API double, the real webhook over TLS, Tower's CRDs."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import config as k8s_config

from certs import kube as certs_kube
from extender.core.jobframework import registry
from extender.kube.api import resources as r
from extender.kube.api.cache import Cache, watch_for_kinds
from extender.kube.api.client import RequestBudget, RestClient
from extender.kube.api.events import Recorder
from extender.kube.api.metrics import Metrics
from extender.kube.controller.context import Settings
from extender.kube.controller.loop import Controller
from extender.kube.generators.crds import custom_resource_definitions
from tests.apidouble import ApiDouble, JobRunner
from tests.servers import ROOT, generate, start_webhook

CONTROLLER_USER = "system:serviceaccount:tower-system:tower-controller"
CRDS = r.Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)


@pytest.fixture(scope="session")
def webhook(tmp_path_factory):
    certs = tmp_path_factory.mktemp("controller-certs")
    generate(certs)
    server = start_webhook(certs, tmp_path_factory.mktemp("controller-metrics"), workers=1)
    yield server
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(timeout=20)


class Cluster:
    """The double plus clients: `admin` as kubectl's user, `controller_client` as Tower's."""

    def __init__(self, api: ApiDouble, tmp: Path) -> None:
        self.api = api
        self.tmp = tmp
        self.admin_config = api.kubeconfig(str(tmp / "admin.kubeconfig"))
        self.controller_config = api.kubeconfig(
            str(tmp / "controller.kubeconfig"), token="tower", username=CONTROLLER_USER
        )
        self.admin = RestClient(
            k8s_config.new_client_from_config(config_file=self.admin_config),
            RequestBudget(1000, 1000),
        )

    def controller_client(self, qps: float = 1000, burst: int = 1000) -> RestClient:
        return RestClient(
            k8s_config.new_client_from_config(config_file=self.controller_config),
            RequestBudget(qps, burst),
        )

    def apply(self, *objs: dict[str, Any]) -> None:
        plural = {
            "ResourceFlavor": r.RESOURCE_FLAVORS,
            "ClusterQueue": r.CLUSTER_QUEUES,
            "Cohort": r.COHORTS,
            "LocalQueue": r.LOCAL_QUEUES,
            "Namespace": r.NAMESPACES,
            "WorkloadPriorityClass": r.WORKLOAD_PRIORITY_CLASSES,
            "PriorityClass": r.PRIORITY_CLASSES,
            "AdmissionCheck": r.ADMISSION_CHECKS,
            "Topology": r.TOPOLOGIES,
            "MultiKueueConfig": r.MULTIKUEUE_CONFIGS,
            "MultiKueueCluster": r.MULTIKUEUE_CLUSTERS,
        }
        for obj in objs:
            resource = plural[obj["kind"]]
            self.admin.create(resource, obj, (obj.get("metadata") or {}).get("namespace"))

    def job(
        self,
        name: str,
        cpu: str,
        *,
        queue: str = "user-queue",
        duration: str = "60s",
        namespace: str = "default",
        labels: dict[str, str] | None = None,
        generate: bool = False,
        **pod: Any,
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "labels": {"kueue.x-k8s.io/queue-name": queue, **(labels or {})},
            "annotations": {"tower.dev/sim-duration": duration},
        }
        meta["generateName" if generate else "name"] = name
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": meta,
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        **pod,
                        "containers": [
                            {
                                "name": "worker",
                                "image": "busybox:1.36",
                                "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                            }
                        ],
                    }
                },
            },
        }
        return self.admin.create(r.JOBS, body, namespace)

    def get(self, plural: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return self.api.get(plural, name, namespace)

    def workload_of(self, job: dict[str, Any]) -> dict[str, Any] | None:
        uid = job["metadata"]["uid"]
        for wl in self.api.list("workloads", job["metadata"]["namespace"]):
            if (wl["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") == uid:
                return wl
        return None


@pytest.fixture
def cluster(tmp_path, webhook) -> Iterator[Cluster]:
    api = ApiDouble(bookmark_interval=1.0)
    api.start()
    runner = JobRunner(api)
    c = Cluster(api, tmp_path)
    for crd in custom_resource_definitions():
        c.admin.create(CRDS, crd)
    c.admin.create(r.NAMESPACES, {"metadata": {"name": "tower-system"}})
    ca = (webhook.certs / "ca.crt").read_bytes()
    certs_kube.install(c.admin.api_client, webhook.url, ca)
    yield c
    runner.stop()
    api.stop()


class Running:
    """A controller in a thread of the test process, with its cache."""

    def __init__(
        self, client: RestClient, settings: Settings, metrics: Metrics | None = None
    ) -> None:
        self.stop = threading.Event()
        self.cache = Cache(
            client,
            adapters=registry.enabled(settings.integrations),
            group_parents=registry.group_parents(settings.integrations),
        )
        self.cache.discover_kinds()
        self.cache.discover_optional()
        watch_for_kinds(self.cache, self.stop, every=0.2)  # a CRD installed later is taken up
        self.cache.start(self.stop)
        self.recorder = Recorder(client)
        self.controller = Controller(
            client, self.cache, settings=settings, recorder=self.recorder, metrics=metrics
        )
        self.thread = threading.Thread(target=self.controller.run, args=(self.stop,), daemon=True)
        self.thread.start()
        assert self.controller.ready.wait(10), "the controller's caches never synced"

    def halt(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.recorder.close()


@pytest.fixture
def start_controller(cluster) -> Iterator[Callable[..., Running]]:
    running: list[Running] = []

    def start(**settings: Any) -> Running:
        client = cluster.controller_client()
        running.append(Running(client, Settings(status_interval=0.05, **settings)))
        return running[-1]

    yield start
    for item in running:
        item.halt()


def eventually(check: Callable[[], Any], timeout: float = 10.0, what: str = "") -> Any:
    """Poll until `check()` is truthy; the last value is returned (or the test fails)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.02)


class Drained:
    """A child's output pipe read continuously by a thread, so a chatty child never blocks
    on a full pipe; `readline()` and `read()` behave as the pipe's would."""

    def __init__(self, pipe: Any) -> None:
        self._lines: list[bytes] = []
        self._next = 0
        self._done = False
        self._ready = threading.Condition()
        threading.Thread(target=self._pump, args=(pipe,), daemon=True).start()

    def _pump(self, pipe: Any) -> None:
        for line in iter(pipe.readline, b""):
            with self._ready:
                self._lines.append(line)
                self._ready.notify_all()
        with self._ready:
            self._done = True
            self._ready.notify_all()

    def readline(self) -> bytes:
        with self._ready:
            self._ready.wait_for(lambda: self._next < len(self._lines) or self._done)
            if self._next < len(self._lines):
                self._next += 1
                return self._lines[self._next - 1]
            return b""

    def read(self) -> bytes:
        with self._ready:
            self._ready.wait_for(lambda: self._done)
            rest = b"".join(self._lines[self._next :])
            self._next = len(self._lines)
            return rest


def controller_process(
    cluster: Cluster, *extra: str, kubeconfig: str | None = None
) -> subprocess.Popen[bytes]:
    """`python -m extender run` against the double, as a separate process."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "extender",
            "run",
            "--kubeconfig",
            kubeconfig or cluster.controller_config,
            "--health-address",
            "127.0.0.1:0",
            "--metrics-address",
            "127.0.0.1:0",
            "--status-interval",
            "0.05",
            *extra,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    proc.stdout = Drained(proc.stdout)  # type: ignore[assignment]
    return proc
