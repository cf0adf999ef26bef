"""Kueue's e2e helpers (test/util, pkg/util/testing*), in Python, for the port of its suite.

Each function is named after the Kueue helper it stands for, so a ported case reads as the Go
one does; Tower runs as the webhook and one controller on this machine, with the
Configuration of Kueue's e2e suite (test/e2e/config/default/controller_manager_config.yaml).
"""

from __future__ import annotations

import base64
import copy
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from certs.kube import CONVERTED_CRDS
from extender.core.jobframework.adapter import workload_name
from tests.e2e.conftest import KUBECONFIG, kubectl, webhook_host_port

ROOT = Path(__file__).resolve().parents[3]
KUEUE = "kueue.x-k8s.io"
V = "v1beta2"

# The namespace of Kueue's own objects in its suite (util.GetKueueNamespace): here the fixture's,
# holding the visibility Service; its `default` ServiceAccount is the impersonated subject.
KUEUE_NS = "tower-e2e-kueue-system"
VISIBILITY_SERVICE = "tower-visibility-server"

# test/util/constants.go
TIMEOUT = 10.0
MEDIUM_TIMEOUT = 45.0
LONG_TIMEOUT = 90.0
INTERVAL = 0.25
AGNHOST = "registry.k8s.io/e2e-test-images/agnhost:2.53"
BEHAVIOR_WAIT_FOR_DELETION = ["netexec"]
BEHAVIOR_WAIT_FOR_DELETION_FAIL_ON_EXIT = ["test-webserver"]
BEHAVIOR_EXIT_FAST = ["entrypoint-tester"]

# Kueue's e2e Configuration, less what Tower takes from its own defaults (tls: Tower's webhook
# takes its cipher suites from gunicorn; groupKindConcurrency: Tower's loop is not per kind)
# and less its featureGates but MultiKueueManagerQuotaAutomation (on in every Kueue e2e
# Configuration): Tower refuses to start with a gate on whose behaviour it lacks
# (ElasticJobsViaWorkloadSlices, ConcurrentAdmission), and
# LocalQueueMetrics is on by default here.
CONFIGURATION = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
metrics:
  enableClusterQueueResources: true
fairSharing:
  preemptionStrategies: ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
clientConnection:
  qps: 300
  burst: 500
integrations:
  frameworks:
  - "batch/job"
  - "kubeflow.org/mpijob"
  - "ray.io/rayjob"
  - "ray.io/raycluster"
  - "ray.io/rayservice"
  - "jobset.x-k8s.io/jobset"
  - "kubeflow.org/paddlejob"
  - "kubeflow.org/pytorchjob"
  - "kubeflow.org/tfjob"
  - "kubeflow.org/xgboostjob"
  - "kubeflow.org/jaxjob"
  - "trainer.kubeflow.org/trainjob"
  - "workload.codeflare.dev/appwrapper"
  - "pod"
  - "deployment"
  - "statefulset"
  - "leaderworkerset.x-k8s.io/leaderworkerset"
featureGates:
  MultiKueueManagerQuotaAutomation: true
"""


def eventually(check: Callable[[], Any], timeout: float = TIMEOUT, what: str = "") -> Any:
    """gomega.Eventually: `check` returns a truthy value, or raises AssertionError, until it
    passes; the last failure is reported."""
    deadline = time.monotonic() + timeout
    last: AssertionError | None = None
    while True:
        try:
            value = check()
            if value:
                return value
            last = AssertionError(f"{what or 'condition'}: got {value!r}")
        except AssertionError as err:
            last = err
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}: {last}")
        time.sleep(INTERVAL)


def free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def bridge_ip() -> str | None:
    """The host's address on the real node's pod bridge (the gateway of its podCIDR), where
    kube-apiserver's aggregator can reach a process of this machine (it refuses loopback
    Endpoints); None where there is no real node here."""
    conf = Path(os.environ.get("NODE_RUN", "")) / "conf" / "kubelet-config.yaml"
    if not os.environ.get("NODE_RUN") or not conf.exists():
        return None
    cidr = yaml.safe_load(conf.read_text()).get("podCIDR")
    if not cidr:
        return None
    gateway = str(next(ipaddress.ip_network(cidr).hosts()))
    try:
        with socket.socket() as sock:
            sock.bind((gateway, 0))
    except OSError:
        return None
    return gateway


class Tower:
    """Tower's webhook and controller on this machine, registered with the cluster.

    The controller serves Kueue's visibility API on the pod bridge's address (where the
    aggregator reaches it; `visibility` is None without a real node) and /metrics over HTTPS
    on a free loopback port (`metrics_port`)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        gateway = bridge_ip()
        self.visibility = (gateway, free_port(gateway)) if gateway else None
        self.metrics_port = free_port("127.0.0.1")
        host, port = webhook_host_port()
        certs = tmp / "certs"
        flag = "--ip-address" if host.replace(".", "").isdigit() else "--dns-name"
        python = [sys.executable, "-m"]
        subprocess.run(
            [*python, "certs", "generate", "--out", str(certs), flag, host],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        user = kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
        # The webhook and its registrations read the same file as the controller: which kinds
        # are queued (Kueue's e2e list, pods among them) and in which namespaces.
        webhook_config = tmp / "webhook-config.yaml"
        webhook_config.write_text(CONFIGURATION)
        self.procs = [
            self._spawn(
                "webhook",
                "webhook",
                "--port",
                str(port),
                "--bind-address",
                host,
                "--tls-cert-file",
                str(certs / "tls.crt"),
                "--tls-private-key-file",
                str(certs / "tls.key"),
                "--controller-username",
                user,
                # As deployed (in-cluster): it reads the queues, so a job queued to a
                # MultiKueue ClusterQueue gets Kueue's managedBy.
                "--kubeconfig",
                KUBECONFIG or "",
                "--workers",
                "1",
                "--config",
                str(webhook_config),
            ),
        ]
        eventually(lambda: _listening(host, port), 30, "the webhook to listen")
        subprocess.run(
            [
                *python,
                "certs",
                "install",
                "--kubeconfig",
                KUBECONFIG or "",
                "--url",
                f"https://{host}:{port}",
                "--certs-dir",
                str(certs),
                "--config",
                str(webhook_config),
            ],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        self._convert_here(f"https://{host}:{port}/convert", certs / "ca.crt")
        self.procs.append(self._controller(CONFIGURATION))

    @staticmethod
    def _conversion(client_config: dict[str, Any]) -> None:
        patch = [{"op": "replace", "path": "/spec/conversion/webhook/clientConfig",
                  "value": client_config}]  # fmt: skip
        for crd in CONVERTED_CRDS:
            kubectl("patch", "crd", crd, "--type=json", "-p", json.dumps(patch))

    def _convert_here(self, url: str, ca: Path) -> None:
        """The CRDs' v1beta1<->v1beta2 conversion sent to this webhook (deploy/crds name the
        in-cluster Service, which is not there when Tower runs on this machine)."""
        bundle = base64.b64encode(ca.read_bytes()).decode()
        self._conversion({"url": url, "caBundle": bundle})

    def _controller(
        self, configuration: str, visibility_from_file: bool = False
    ) -> subprocess.Popen[bytes]:
        config = self.tmp / "config.yaml"
        config.write_text(configuration)
        visibility = f"{self.visibility[0]}:{self.visibility[1]}" if self.visibility else "0"
        flags = [] if visibility_from_file else ["--visibility-address", visibility]
        return self._spawn(
            "controller",
            "extender",
            "run",
            "--kubeconfig",
            KUBECONFIG or "",
            "--config",
            str(config),
            "--no-leader-elect",
            "--health-address",
            "127.0.0.1:0",
            "--status-interval",
            "0.5",
            "--metrics-address",
            f"127.0.0.1:{self.metrics_port}",
            *flags,
        )

    def restart_controller(
        self, configuration: str = CONFIGURATION, visibility_from_file: bool = False
    ) -> None:
        """util.UpdateKueueConfigurationAndRestart: the controller stopped and started again
        with another Configuration (the webhook stays). With `visibility_from_file`, the
        file's visibilityServer says where the visibility API listens."""
        controller = self.procs.pop()
        controller.send_signal(signal.SIGTERM)
        try:
            controller.wait(timeout=20)
        except subprocess.TimeoutExpired:
            controller.kill()
        self.procs.append(self._controller(configuration, visibility_from_file))
        eventually(lambda: _listening("127.0.0.1", self.metrics_port), 30, "the controller")

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 (the child keeps it)
        return subprocess.Popen(
            [sys.executable, "-m", *args], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT
        )

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        # The conversion as deploy/crds have it, for the rest of tests/e2e.
        self._conversion({"service": {"name": "tower-webhook", "namespace": "tower-system",
                                      "path": "/convert"}})  # fmt: skip
        # Its webhook is gone: its registrations would refuse every create that follows.
        kubectl("delete", "mutatingwebhookconfiguration", "tower-mutating-webhook",
                "--ignore-not-found", check=False)  # fmt: skip
        kubectl("delete", "validatingwebhookconfiguration", "tower-validating-webhook",
                "--ignore-not-found", check=False)  # fmt: skip


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


class Cluster:
    """The test's handle on the cluster: Kueue's util functions over the real client."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api = api_client
        self.core = client.CoreV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.apps = client.AppsV1Api(api_client)

    # util.CreateNamespaceFromPrefixWithLog
    def create_namespace_from_prefix(self, prefix: str) -> str:
        name = f"{prefix}{uuid.uuid4().hex[:5]}"
        self.core.create_namespace({"metadata": {"name": name}})
        return name

    # util.DeleteNamespace + ExpectAllPodsInNamespaceDeleted
    def delete_namespace(self, name: str) -> None:
        for plural in ("workloads", "localqueues"):
            for item in self.list(plural, name):
                self.delete(plural, item["metadata"]["name"], name, strip_finalizers=True)
        kubectl("delete", "namespace", name, "--wait=false", check=False)

    def create(self, plural: str, body: dict[str, Any], namespace: str | None = None) -> dict:
        if namespace is None:
            return self.custom.create_cluster_custom_object(KUEUE, V, plural, body)
        return self.custom.create_namespaced_custom_object(KUEUE, V, namespace, plural, body)

    def get(self, plural: str, name: str, namespace: str | None = None) -> dict:
        if namespace is None:
            return self.custom.get_cluster_custom_object(KUEUE, V, plural, name)
        return self.custom.get_namespaced_custom_object(KUEUE, V, namespace, plural, name)

    def list(self, plural: str, namespace: str | None = None) -> list[dict]:
        if namespace is None:
            return self.custom.list_cluster_custom_object(KUEUE, V, plural)["items"]
        return self.custom.list_namespaced_custom_object(KUEUE, V, namespace, plural)["items"]

    def delete(
        self, plural: str, name: str, namespace: str | None = None, strip_finalizers: bool = False
    ) -> None:
        try:
            if strip_finalizers:
                patch = {"metadata": {"finalizers": None}}
                if namespace is None:
                    self.custom.patch_cluster_custom_object(KUEUE, V, plural, name, patch)
                else:
                    self.custom.patch_namespaced_custom_object(
                        KUEUE, V, namespace, plural, name, patch
                    )
            if namespace is None:
                self.custom.delete_cluster_custom_object(KUEUE, V, plural, name)
            else:
                self.custom.delete_namespaced_custom_object(KUEUE, V, namespace, plural, name)
        except client.ApiException as err:
            if err.status != 404:
                raise

    # util.ExpectObjectToBeDeleted, for cluster-scoped Kueue objects
    def expect_deleted(self, plural: str, name: str, timeout: float = LONG_TIMEOUT) -> None:
        self.delete(plural, name)

        def gone() -> bool:
            try:
                self.get(plural, name)
            except client.ApiException as err:
                return err.status == 404
            return False

        eventually(gone, timeout, f"{plural}/{name} to be deleted")

    # util.CreateClusterQueuesAndWaitForActive / CreateLocalQueuesAndWaitForActive
    def create_active(
        self, plural: str, body: dict[str, Any], namespace: str | None = None
    ) -> None:
        self.create(plural, body, namespace)
        name = body["metadata"]["name"]
        eventually(
            lambda: condition(self.get(plural, name, namespace), "Active").get("status") == "True",
            TIMEOUT,
            f"{plural}/{name} to be Active",
        )

    def workload_for_job(self, job: Any, namespace: str) -> str:
        """workloadjob.GetWorkloadNameForJob."""
        return workload_name("Job", "batch", job.metadata.name, job.metadata.uid)

    def workload(self, name: str, namespace: str) -> dict | None:
        try:
            return self.get("workloads", name, namespace)
        except client.ApiException as err:
            if err.status == 404:
                return None
            raise

    # util.ExpectJobUnsuspendedWithNodeSelectors
    def expect_job_unsuspended_with_node_selectors(
        self, name: str, namespace: str, selectors: dict[str, str]
    ) -> None:
        def check() -> bool:
            job = self.batch.read_namespaced_job(name, namespace)
            assert job.spec.suspend is False, "the job is still suspended"
            assert (job.spec.template.spec.node_selector or {}) == selectors
            return True

        eventually(check, TIMEOUT, f"job {name} unsuspended with {selectors}")


def condition(obj: dict | None, kind: str) -> dict:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c
    return {}


def has_quota_reservation(wl: dict | None) -> bool:
    """workload.HasQuotaReservation."""
    return condition(wl, "QuotaReserved").get("status") == "True"


def is_admitted(wl: dict | None) -> bool:
    return condition(wl, "Admitted").get("status") == "True"


def is_finished(wl: dict | None) -> bool:
    return condition(wl, "Finished").get("status") == "True"


def make_resource_flavor(name: str, node_labels: dict[str, str] | None = None) -> dict:
    spec: dict[str, Any] = {"nodeLabels": node_labels} if node_labels else {}
    return {
        "apiVersion": f"{KUEUE}/{V}",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": spec,
    }


def make_flavor_quotas(flavor: str, **resources: str) -> dict:
    return {
        "name": flavor,
        "resources": [{"name": r, "nominalQuota": q} for r, q in resources.items()],
    }


def make_cluster_queue(name: str, *flavors: dict, **spec: Any) -> dict:
    covered = sorted({r["name"] for f in flavors for r in f["resources"]})
    body: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": covered, "flavors": list(flavors)}],
    }
    body.update(spec)
    return {
        "apiVersion": f"{KUEUE}/{V}",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": body,
    }


def make_local_queue(name: str, namespace: str, cluster_queue: str) -> dict:
    return {
        "apiVersion": f"{KUEUE}/{V}",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def make_job(
    name: str,
    namespace: str,
    *,
    queue: str | None = None,
    args: list[str] | None = None,
    requests: dict[str, str] | None = None,
    parallelism: int = 1,
    completions: int = 1,
    priority_class: str | None = None,
    backoff_limit: int | None = None,
) -> dict:
    """testingjob.MakeJob(...).Queue(...).Image(agnhost, args).RequestAndLimit(...)
    .WorkloadPriorityClass(...).BackoffLimit(...)."""
    resources = dict(requests or {})
    labels = {f"{KUEUE}/queue-name": queue} if queue else {}
    if priority_class:
        labels[f"{KUEUE}/priority-class"] = priority_class
    container = {
        "name": "c",
        "image": AGNHOST,
        "args": args or BEHAVIOR_WAIT_FOR_DELETION,
        "resources": {"requests": resources, "limits": resources},
    }
    extra = {} if backoff_limit is None else {"backoffLimit": backoff_limit}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            **extra,
            "parallelism": parallelism,
            "completions": completions,
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [container],
                }
            },
        },
    }


def set_container_defaults(container: dict[str, Any]) -> None:
    """testingjob.SetContainerDefaults: what the API server defaults on a Job's container."""
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("imagePullPolicy", "IfNotPresent")


def node_labels(api_client: client.ApiClient) -> Iterator[tuple[str, dict[str, str]]]:
    for node in client.CoreV1Api(api_client).list_node().items:
        yield node.metadata.name, node.metadata.labels or {}


def make_workload_priority_class(name: str, value: int) -> dict:
    return {"apiVersion": f"{KUEUE}/{V}", "kind": "WorkloadPriorityClass",
            "metadata": {"name": name}, "value": value}  # fmt: skip


def consistently(check: Callable[[], Any], duration: float = 0.3, what: str = "") -> None:
    """gomega.Consistently: `check` holds (raises no AssertionError) for `duration`."""
    deadline = time.monotonic() + duration
    while time.monotonic() < deadline:
        check()
        time.sleep(0.05)


def make_admission_check(name: str, controller_name: str) -> dict:
    return {"apiVersion": f"{KUEUE}/{V}", "kind": "AdmissionCheck", "metadata": {"name": name},
            "spec": {"controllerName": controller_name}}  # fmt: skip


def set_admission_check_active(cluster: Cluster, name: str, status: str = "True") -> None:
    """util.SetAdmissionCheckActive: the check's controller (played here) says it is active."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    body = {"status": {"conditions": [{"type": "Active", "status": status, "reason": "ByTest",
                                       "message": "by test", "lastTransitionTime": now}]}}  # fmt: skip
    cluster.custom.patch_cluster_custom_object_status(KUEUE, V, "admissionchecks", name, body)


def set_workloads_admission_check(
    cluster: Cluster, name: str, namespace: str, check: str, state: str
) -> None:
    """util.SetWorkloadsAdmissionCheck: the check's state written into the Workload's status
    (a merge patch replaces the list: the other checks are kept as they are)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def write() -> bool:
        wl = cluster.get("workloads", name, namespace)
        checks = [c for c in (wl.get("status") or {}).get("admissionChecks") or []]
        for c in checks:
            if c["name"] == check:
                c.update(state=state, lastTransitionTime=now, message="by test")
        body = {"metadata": {"resourceVersion": wl["metadata"]["resourceVersion"]},
                "status": {"admissionChecks": checks}}  # fmt: skip
        try:
            cluster.custom.patch_namespaced_custom_object_status(
                KUEUE, V, namespace, "workloads", name, body
            )
        except client.ApiException as err:
            if err.status == 409:
                return False
            raise
        return True

    eventually(write, TIMEOUT, f"the check {check} set {state} on {name}")


class VisibilityClient:
    """Kueue's visibility clientset (VisibilityV1beta1/V1beta2), through kube-apiserver's
    aggregator, as the kubeconfig's user or as `impersonate` (util.CreateVisibilityClient)."""

    def __init__(self, version: str = "v1beta2", impersonate: str | None = None) -> None:
        self.api = config.new_client_from_config(config_file=KUBECONFIG)
        if impersonate:
            self.api.set_default_header("Impersonate-User", impersonate)
        self.base = f"/apis/visibility.{KUEUE}/{version}"

    def _get(self, path: str) -> list[dict]:
        request = self.api.param_serialize(
            "GET", self.base + path, header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )  # fmt: skip
        response = self.api.call_api(*request)
        response.read()
        answer = self.api.response_deserialize(response, {"200": "object"}).data
        return list(answer.get("items") or [])

    def cluster_queue_pending(self, name: str) -> list[dict]:
        """ClusterQueues().GetPendingWorkloadsSummary(name): its items."""
        return self._get(f"/clusterqueues/{name}/pendingworkloads")

    def local_queue_pending(self, namespace: str, name: str) -> list[dict]:
        """LocalQueues(namespace).GetPendingWorkloadsSummary(name): its items."""
        return self._get(f"/namespaces/{namespace}/localqueues/{name}/pendingworkloads")


def pending_workload(
    namespace: str, job: str, priority: int, local_queue: str, in_lq: int, in_cq: int
) -> dict:
    """A visibility.PendingWorkload as Kueue's cases write it (defaultOwnerReferenceForJob)."""
    return {
        "metadata": {
            "namespace": namespace,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job}],
        },
        "priority": priority,
        "positionInLocalQueue": in_lq,
        "positionInClusterQueue": in_cq,
        "localQueueName": local_queue,
    }


PENDING_WORKLOAD_FIELDS = ("priority", "positionInLocalQueue", "positionInClusterQueue",
                           "localQueueName")  # fmt: skip


def comparable_pending(items: list[dict]) -> list[dict]:
    """The items as Kueue's pendingWorkloadsCmpOpts compare them: the fields of its typed
    PendingWorkload, less the name, creationTimestamp and owners' uid the server makes."""
    out = []
    for item in items:
        meta = dict(item.get("metadata") or {})
        meta.pop("name", None)
        meta.pop("creationTimestamp", None)
        owners = [
            {k: v for k, v in o.items() if k != "uid"} for o in meta.get("ownerReferences") or []
        ]
        if owners:
            meta["ownerReferences"] = owners
        fields = {k: item[k] for k in PENDING_WORKLOAD_FIELDS if item.get(k) not in (None, 0, "")}
        out.append({"metadata": meta, **fields})
    return out


def expected_pending(items: list[dict]) -> list[dict]:
    """The wanted items with Go's zero values left out, as they compare equal to absent ones."""
    return [{"metadata": i["metadata"], **{k: i[k] for k in PENDING_WORKLOAD_FIELDS
                                           if i.get(k) not in (None, 0, "")}} for i in items]  # fmt: skip


def status_of(err: client.ApiException) -> int:
    return int(err.status or 0)


# pkg/util/testingjobs/pod, statefulset and deployment; the pod integration's constants.
QUEUE_LABEL = f"{KUEUE}/queue-name"
PRIORITY_CLASS_LABEL = f"{KUEUE}/priority-class"
POD_GROUP_LABEL = f"{KUEUE}/pod-group-name"
POD_GROUP_TOTAL = f"{KUEUE}/pod-group-total-count"
SCHEDULING_GATE = f"{KUEUE}/admission"
AGNHOST_OLD = "registry.k8s.io/e2e-test-images/agnhost:2.52"


def make_pod(
    name: str,
    namespace: str,
    *,
    queue: str | None = None,
    args: list[str] | None = None,
    cpu: str | None = None,
    grace: int | None = None,
    priority_class: str | None = None,
) -> dict:
    """podtesting.MakePod(name, ns).Image(agnhost, args).Queue(queue).RequestAndLimit(cpu)
    .TerminationGracePeriod(grace).WorkloadPriorityClass(...)."""
    labels = {QUEUE_LABEL: queue} if queue else {}
    if priority_class:
        labels[PRIORITY_CLASS_LABEL] = priority_class
    resources = {"cpu": cpu} if cpu else {}
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": AGNHOST, "args": args or BEHAVIOR_EXIT_FAST,
                        "resources": {"requests": resources, "limits": dict(resources)}}],
    }  # fmt: skip
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels,
                         "annotations": {}},
            "spec": spec}  # fmt: skip


def make_group(pod: dict, count: int) -> list[dict]:
    """PodWrapper.MakeGroup: `count` copies named <name>-<i>, the group named after the pod."""
    name = pod["metadata"]["name"]
    group = []
    for i in range(count):
        member = copy.deepcopy(pod)
        member["metadata"]["name"] = f"{name}-{i}"
        member["metadata"]["labels"][POD_GROUP_LABEL] = name
        member["metadata"]["annotations"][POD_GROUP_TOTAL] = str(count)
        group.append(member)
    return group


def _pod_template_owner(
    kind: str,
    name: str,
    namespace: str,
    *,
    queue: str | None,
    replicas: int,
    cpu: str,
    image: str,
    args: list[str],
    grace: int | None,
    priority_class: str | None,
) -> dict:
    app = f"{name}-pod"
    labels = {QUEUE_LABEL: queue} if queue else {}
    if priority_class:
        labels[PRIORITY_CLASS_LABEL] = priority_class
    pod_spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": image, "args": args,
                        "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}],
        "nodeSelector": {},
    }  # fmt: skip
    if grace is not None:
        pod_spec["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}}, "spec": pod_spec}}}  # fmt: skip


def make_stateful_set(
    name: str,
    namespace: str,
    *,
    queue: str | None = None,
    replicas: int = 1,
    cpu: str = "200m",
    image: str = AGNHOST,
    args: list[str] | None = None,
    grace: int | None = 1,
    priority_class: str | None = None,
) -> dict:
    """statefulsettesting.MakeStatefulSet(...).Image(...).RequestAndLimit(cpu)
    .TerminationGracePeriod(grace).Replicas(n).Queue(q).WorkloadPriorityClass(...)."""
    return _pod_template_owner("StatefulSet", name, namespace, queue=queue, replicas=replicas,
                               cpu=cpu, image=image, args=args or BEHAVIOR_WAIT_FOR_DELETION,
                               grace=grace, priority_class=priority_class)  # fmt: skip


def make_deployment(
    name: str,
    namespace: str,
    *,
    queue: str | None = None,
    replicas: int = 1,
    cpu: str = "200m",
    args: list[str] | None = None,
    grace: int | None = 1,
) -> dict:
    """deploymenttesting.MakeDeployment(...), as make_stateful_set."""
    return _pod_template_owner("Deployment", name, namespace, queue=queue, replicas=replicas,
                               cpu=cpu, image=AGNHOST, args=args or BEHAVIOR_WAIT_FOR_DELETION,
                               grace=grace, priority_class=None)  # fmt: skip


def gone(read: Callable[[], Any]) -> bool:
    """True once `read` answers 404."""
    try:
        read()
    except client.ApiException as err:
        if err.status == 404:
            return True
        raise
    return False


def expect_workload_to_finish(
    cluster: Cluster, name: str, namespace: str, timeout: float = LONG_TIMEOUT
) -> None:
    """util.ExpectWorkloadToFinishWithTimeout."""

    def finished() -> bool:
        wl = cluster.workload(name, namespace)
        assert wl is not None, f"workload {name} not found"
        assert is_finished(wl), f"workload {name}: {(wl.get('status') or {}).get('conditions')}"
        return True

    eventually(finished, timeout, f"workload {name} to finish")


def expect_workloads_finalized_or_gone(cluster: Cluster, name: str, namespace: str) -> None:
    """util.ExpectWorkloadsFinalizedOrGone."""

    def finalized() -> bool:
        wl = cluster.workload(name, namespace)
        assert wl is None or not wl["metadata"].get("finalizers"), wl["metadata"]["finalizers"]
        return True

    eventually(finalized, LONG_TIMEOUT, f"workload {name} finalized or gone")


def pod_workload_name(pod: Any) -> str:
    """pod.GetWorkloadNameForPod."""
    return workload_name("Pod", "", pod.metadata.name, pod.metadata.uid)


def stateful_set_workload_name(sts: Any) -> str:
    """statefulset.GetWorkloadName."""
    return workload_name("StatefulSet", "apps", sts.metadata.name, sts.metadata.uid)


def expect_events(
    cluster: Cluster, namespace: str, names: set[str], reason: str,
    note: str = "", timeout: float = MEDIUM_TIMEOUT,
) -> None:  # fmt: skip
    """util.ExpectEventsForObjectsWithTimeout: an event of `reason` (its note containing
    `note`) about each of the named objects."""

    def seen() -> bool:
        events = cluster.core.list_namespaced_event(namespace).items
        about = {e.involved_object.name for e in events
                 if e.reason == reason and note in (e.message or "")}  # fmt: skip
        missing = names - about
        assert not missing, f"no {reason} event for {sorted(missing)}"
        return True

    eventually(seen, timeout, f"{reason} events")


def workload_condition_status(wl: dict | None, kind: str) -> tuple[str, str]:
    found = condition(wl, kind)
    return found.get("status", ""), found.get("reason", "")


CONTAINERD = "/run/containerd/containerd.sock"


def end_container(pod: Any, signal_name: str = "SIGTERM") -> None:
    """Kueue's util.WaitForActivePodsAndTerminate asks a running pod's agnhost (over
    `kubectl exec`) to exit with code 0. kube-apiserver here cannot reach the real kubelet's
    exec endpoint (the node's name does not resolve), so the container is told by the node's
    containerd instead: netexec ends with code 0 on SIGTERM."""
    statuses = pod.status.container_statuses or []
    started = [s.container_id for s in statuses if s.container_id]
    assert started, f"{pod.metadata.name}: no container yet"
    container = started[0].split("://", 1)[-1]
    done = subprocess.run(
        ["ctr", "--address", CONTAINERD, "-n", "k8s.io", "task", "kill", "--signal",
         signal_name, container],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0, f"ctr task kill {pod.metadata.name}: {done.stderr}"
