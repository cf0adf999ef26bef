"""The Spark operator that Kueue's SparkApplication e2e cases run (spark-operator v2.5.1), played
by a thread of the test: its CRD is installed (tests/data/spark-operator/), its controller is not.

The player does what the operator and spark-submit do with an application's spec, and no more:
a suspended application is SUSPENDED (its pods deleted); once unsuspended it is SUBMITTED with
a driver pod made from `spec.driver` (its labels, annotations, nodeSelector, tolerations and
`template.spec.schedulingGates`, where Tower wrote the admission), RUNNING once that pod runs,
when the driver makes `spec.executor.instances` executor pods from `spec.executor` the same
way, and COMPLETED (or FAILED, with the operator's error message) when the driver pod ends;
the driver stops its executors then, as Spark's does. `status.executorState` follows the
executor pods. The pods run busybox's `sleep` (Spark's image is not on this machine): the
driver's for `DRIVER_SECONDS`, standing in for SparkPi's work, on the real node's containerd
or the stand-in kubelet; the real scheduler binds them.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from extender.core.jobframework.adapter import workload_name
from extender.core.jobframework.spark import java_memory
from tests.e2e.conftest import kubectl
from tests.e2e.kueue.util import MEDIUM_TIMEOUT, QUEUE_LABEL, ROOT, Cluster, eventually

GROUP, VERSION, PLURAL = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"
CRD = ROOT / "tests" / "data" / "spark-operator" / "sparkoperator.k8s.io_sparkapplications.yaml"
FRAMEWORK = "sparkoperator.k8s.io/sparkapplication"

# The labels the operator and spark-submit put on an application's pods.
APP_NAME = "sparkoperator.k8s.io/app-name"
LAUNCHED = "sparkoperator.k8s.io/launched-by-spark-operator"
SUBMISSION = "sparkoperator.k8s.io/submission-id"
APP_SELECTOR = "spark-app-selector"
ROLE = "spark-role"
EXEC_ID = "spark-exec-id"

IMAGE = "busybox:1.36"
DRIVER_SECONDS = 8  # SparkPi's computation, as the driver's run time
EXECUTOR_STATE = {"Pending": "PENDING", "Running": "RUNNING", "Succeeded": "COMPLETED",
                  "Failed": "FAILED"}  # fmt: skip


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def install_crd() -> None:
    """The operator's CRD, as Kueue's e2e cluster has it (its helm chart installs it)."""
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    # A CRD just created has no conditions yet, which `kubectl wait` takes for an error.
    eventually(
        lambda: kubectl("wait", "--for=condition=Established", f"crd/{PLURAL}.{GROUP}",
                        "--timeout=60s") is not None,
        MEDIUM_TIMEOUT,
        "the SparkApplication CRD established",
    )  # fmt: skip


def make_spark_application(
    name: str, ns: str, queue: str, service_account: str, image: str = "spark:4.0.0"
) -> dict[str, Any]:
    """sparkapplicationtesting.MakeSparkApplication(name, ns) with the case's setters: the
    image, Spark version, both service accounts, 500m and 512m (Java's units) a role, one
    executor, the queue and Suspend(true)."""
    role = {"coreRequest": "500m", "memory": "512m", "serviceAccount": service_account}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: queue}},
        "spec": {
            "type": "Scala",
            "mode": "cluster",
            "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
            "mainClass": "org.apache.spark.examples.SparkPi",
            "arguments": ["1000"],
            "image": image,
            "sparkVersion": image.rpartition(":")[2],
            "suspend": True,
            "driver": dict(role),
            "executor": {**role, "instances": 1, "deleteOnTermination": False},
        },
    }


def workload_of(app: dict[str, Any]) -> str:
    """sparkapplication.GetWorkloadNameForSparkApplication(name, uid)."""
    return workload_name("SparkApplication", GROUP, app["metadata"]["name"], app["metadata"]["uid"])


def get(cluster: Cluster, ns: str, name: str) -> dict[str, Any]:
    return cluster.custom.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)


def create(cluster: Cluster, body: dict[str, Any]) -> dict[str, Any]:
    ns = body["metadata"]["namespace"]
    return cluster.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)


def state(app: dict[str, Any]) -> str:
    return str(((app.get("status") or {}).get("applicationState") or {}).get("state") or "")


def _owner(obj: dict[str, Any] | Any) -> dict[str, Any]:
    if isinstance(obj, dict):
        meta = obj["metadata"]
        api_version, kind = obj["apiVersion"], obj["kind"]
        name, uid = meta["name"], meta["uid"]
    else:  # a V1Pod
        api_version, kind, name, uid = "v1", "Pod", obj.metadata.name, obj.metadata.uid
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid,
            "controller": True, "blockOwnerDeletion": True}  # fmt: skip


def spark_pod(app: dict[str, Any], role: str, name: str, seconds: int) -> dict[str, Any]:
    """A driver or executor pod as the operator's pod defaulter and spark-submit make it from
    the role's fields (Spark's own JVM memory overhead left out)."""
    spec = app["spec"]
    fields = spec.get(role) or {}
    template = fields.get("template") or {}
    labels = {
        **((template.get("metadata") or {}).get("labels") or {}),
        **(fields.get("labels") or {}),
        APP_NAME: app["metadata"]["name"],
        LAUNCHED: "true",
        SUBMISSION: app["metadata"]["uid"],
        APP_SELECTOR: f"spark-{app['metadata']['uid'][:8]}",
        ROLE: role,
    }
    annotations = {
        **((template.get("metadata") or {}).get("annotations") or {}),
        **(fields.get("annotations") or {}),
    }
    requests: dict[str, str] = {}
    if fields.get("coreRequest"):
        requests["cpu"] = str(fields["coreRequest"])
    if fields.get("memory"):
        requests["memory"] = java_memory(str(fields["memory"]))
    container = {
        "name": "spark-kubernetes-driver" if role == "driver" else "spark-kubernetes-executor",
        "image": IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sleep", str(seconds)],
        "resources": {"requests": requests, "limits": {}},
    }
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [container],
        "terminationGracePeriodSeconds": 1,
    }
    if fields.get("serviceAccount"):
        pod_spec["serviceAccountName"] = fields["serviceAccount"]
    for key in ("nodeSelector", "tolerations", "affinity", "schedulerName", "priorityClassName"):
        if fields.get(key):
            pod_spec[key] = copy.deepcopy(fields[key])
    gates = (template.get("spec") or {}).get("schedulingGates")
    if gates:
        pod_spec["schedulingGates"] = copy.deepcopy(gates)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": pod_spec,
    }


class SparkOperator:
    """One thread that plays the Spark operator in one namespace, twice a second."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.cluster = cluster
        self.ns = namespace
        self.stopping = threading.Event()
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, name="spark-operator", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(10)

    def _run(self) -> None:
        while not self.stopping.wait(0.5):
            try:
                apps = self.cluster.custom.list_namespaced_custom_object(
                    GROUP, VERSION, self.ns, PLURAL
                )["items"]
            except client.ApiException:
                continue  # the namespace is going
            for app in apps:
                if app["metadata"].get("deletionTimestamp"):
                    continue
                try:
                    self.play(app)
                except client.ApiException as err:
                    if err.status not in (404, 409):  # a race the next pass settles
                        self.errors.append(f"{app['metadata']['name']}: {err}")
                except Exception as err:  # said at the end of the test
                    self.errors.append(f"{app['metadata']['name']}: {err!r}")

    def _pods(self, app: str) -> list[Any]:
        selector = f"{APP_NAME}={app}"
        return list(self.cluster.core.list_namespaced_pod(self.ns, label_selector=selector).items)

    def _create_pod(self, body: dict[str, Any], owner: dict[str, Any]) -> None:
        body["metadata"]["ownerReferences"] = [owner]
        try:
            self.cluster.core.create_namespaced_pod(self.ns, body)
        except client.ApiException as err:
            if err.status != 409:  # made by an earlier pass
                raise

    def _delete(self, pods: list[Any]) -> None:
        for pod in pods:
            with contextlib.suppress(client.ApiException):
                self.cluster.core.delete_namespaced_pod(
                    pod.metadata.name, self.ns, grace_period_seconds=0
                )

    def _status(self, app: dict[str, Any], status: dict[str, Any]) -> None:
        have = app.get("status") or {}
        if all(have.get(k) == v for k, v in status.items()):
            return
        status.setdefault("driverInfo", have.get("driverInfo") or {})  # the CRD requires it
        self.cluster.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, self.ns, PLURAL, app["metadata"]["name"], {"status": status}
        )

    def play(self, app: dict[str, Any]) -> None:
        name = app["metadata"]["name"]
        current = state(app)
        if current in ("COMPLETED", "FAILED"):
            return
        pods = self._pods(name)
        if (app["spec"] or {}).get("suspend"):
            if current != "SUSPENDED":  # Suspending: its resources deleted, then Suspended
                self._delete(pods)
                self._status(app, {"applicationState": {"state": "SUSPENDED"}})
            return
        driver_name = f"{name}-driver"
        drivers = [p for p in pods if p.metadata.name == driver_name]
        if current in ("", "SUSPENDED", "RESUMING") or (not drivers and current == "SUBMITTED"):
            if not drivers:
                body = spark_pod(app, "driver", driver_name, DRIVER_SECONDS)
                self._create_pod(body, _owner(app))
            self._status(app, {
                "applicationState": {"state": "SUBMITTED"},
                "driverInfo": {"podName": driver_name},
                "submissionID": app["metadata"]["uid"],
                "lastSubmissionAttemptTime": now(),
                "submissionAttempts": 1,
            })  # fmt: skip
            return
        if not drivers:
            self._status(app, {"applicationState": {
                "state": "FAILED", "errorMessage": "driver pod not found"}})  # fmt: skip
            return
        driver = drivers[0]
        executors = [p for p in pods if (p.metadata.labels or {}).get(ROLE) == "executor"]
        phase = driver.status.phase
        executor_state = {
            p.metadata.name: EXECUTOR_STATE.get(p.status.phase or "Pending", "UNKNOWN")
            for p in executors
        }
        if phase == "Running":
            wanted = int((app["spec"].get("executor") or {}).get("instances") or 0)
            have = {p.metadata.name for p in executors}
            for i in range(1, wanted + 1):
                pod_name = f"{name}-exec-{i}"
                if pod_name not in have:
                    # Spark's driver makes its executors, and owns them.
                    body = spark_pod(app, "executor", pod_name, 3600)
                    body["metadata"]["labels"][EXEC_ID] = str(i)
                    self._create_pod(body, _owner(driver))
            self._status(app, {"applicationState": {"state": "RUNNING"},
                               "executorState": executor_state})  # fmt: skip
        elif phase == "Succeeded":
            self._delete([p for p in executors if p.status.phase in ("Pending", "Running")])
            done = {k: "COMPLETED" if v in ("PENDING", "RUNNING") else v
                    for k, v in executor_state.items()}  # fmt: skip
            self._status(app, {"applicationState": {"state": "COMPLETED"},
                               "executorState": done, "terminationTime": now()})  # fmt: skip
        elif phase == "Failed":
            self._delete([p for p in executors if p.status.phase in ("Pending", "Running")])
            message = f"driver container failed (pod {driver_name} phase Failed)"
            self._status(app, {"applicationState": {"state": "FAILED", "errorMessage": message},
                               "executorState": executor_state,
                               "terminationTime": now()})  # fmt: skip


@contextlib.contextmanager
def spark_operator(cluster: Cluster, namespace: str) -> Iterator[SparkOperator]:
    played = SparkOperator(cluster, namespace)
    try:
        yield played
    finally:
        played.stop()
    assert not played.errors, f"the Spark operator's player failed: {played.errors[:3]}"


def delete_all(cluster: Cluster, ns: str) -> None:
    """util.DeleteAllSparkApplicationsInNamespace."""
    with contextlib.suppress(client.ApiException):
        cluster.custom.delete_collection_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, propagation_policy="Background"
        )
