"""Stands in for the kubelet of every Node that has none (Node objects made by hand).

A pod the real scheduler bound to such a Node is marked Running and Ready, then Succeeded once
its `sleep N` is over (never, when it restarts always or runs agnhost's `pause`, which waits
until it is stopped); a pod being deleted there is removed, as a kubelet confirms a deletion
(one that Kueue's finalizer holds is first marked Failed, as a kubelet ends it). A pod bound to
a Node with a real kubelet (shared/realk8s/node) is left to it: it really runs.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
import time
from datetime import UTC, datetime

from kubernetes import client

SLEEP = re.compile(r"\bsleep\s+(\d+(?:\.\d+)?)")


def _has_kubelet(node: client.V1Node) -> bool:
    return bool(node.status.node_info and node.status.node_info.kubelet_version)


def has_no_kubelets(api_client: client.ApiClient) -> bool:
    nodes = client.CoreV1Api(api_client).list_node().items
    return bool(nodes) and not any(_has_kubelet(n) for n in nodes)


def real_nodes(api_client: client.ApiClient) -> list[str]:
    """The Nodes a real kubelet runs (Ready), by name."""
    return [
        n.metadata.name
        for n in client.CoreV1Api(api_client).list_node().items
        if _has_kubelet(n)
        and any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or ())
    ]


def _seconds(pod: client.V1Pod) -> float:
    """How long the pod's containers run: their `sleep N`, forever for agnhost's `pause`,
    `netexec` and `test-webserver` (Kueue's TAS and provisioning examples and its e2e suite's
    BehaviorWaitForDeletion; their racks stay taken, as on a real node), else a second."""
    for container in pod.spec.containers:
        words = [*(container.command or []), *(container.args or [])]
        if {"pause", "netexec", "test-webserver"} & set(words):  # run until the pod is deleted
            return math.inf
        text = " ".join(words)
        match = SLEEP.search(text)
        if match:
            return float(match.group(1))
    return 1.0


class Kubelet:
    """A thread that plays every kubelet of the cluster, for pods in `namespaces`."""

    def __init__(self, api_client: client.ApiClient, namespaces: set[str]) -> None:
        self.core = client.CoreV1Api(api_client)
        self.namespaces = namespaces
        self.started: dict[str, float] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="fake-kubelet", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(10)

    def _run(self) -> None:
        while not self.stopping.wait(0.5):
            for namespace in list(self.namespaces):
                # A pod that changed or went meanwhile is seen by the next pass.
                with contextlib.suppress(client.ApiException):
                    self._sync(namespace)

    def _sync(self, namespace: str) -> None:
        now = time.monotonic()
        real = {n.metadata.name for n in self.core.list_node().items if _has_kubelet(n)}
        for pod in self.core.list_namespaced_pod(namespace).items:
            if pod.spec.node_name in real:
                continue  # its kubelet runs it
            name = pod.metadata.name
            if pod.metadata.deletion_timestamp is not None:
                held = "kueue.x-k8s.io/managed" in (pod.metadata.finalizers or [])
                if held and pod.spec.node_name and pod.status.phase not in ("Succeeded", "Failed"):
                    # Its containers are stopped: a kubelet gives the pod a terminal phase, which
                    # Kueue's finalizer waits for. (Only there: the stand-in leaves Job pods'
                    # accounting as it was.)
                    self._status(name, namespace, {"phase": "Failed"})
                self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
                continue
            if not pod.spec.node_name or pod.status.phase in ("Succeeded", "Failed"):
                continue
            uid = pod.metadata.uid
            if uid not in self.started:
                self.started[uid] = now
                stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                # No probes: ready as soon as it runs (a StatefulSet makes its next pod then).
                ready = [
                    {"type": kind, "status": "True", "lastTransitionTime": stamp}
                    for kind in ("Initialized", "ContainersReady", "Ready")
                ]
                self._status(
                    name, namespace, {"phase": "Running", "startTime": stamp, "conditions": ready}
                )
            elif pod.spec.restart_policy != "Always" and now - self.started[uid] >= _seconds(pod):
                # (A pod that restarts always, a Deployment's, runs until it is deleted.)
                self._status(name, namespace, {"phase": "Succeeded"})

    def _status(self, name: str, namespace: str, status: dict) -> None:
        self.core.patch_namespaced_pod_status(name, namespace, {"status": status})
