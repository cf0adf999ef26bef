"""Which LocalQueues hand their jobs to MultiKueue: read from the API server, briefly kept.

Kueue's job webhook gives a new Job or JobSet `spec.managedBy: kueue.x-k8s.io/multikueue`
when its LocalQueue's ClusterQueue has a MultiKueue AdmissionCheck, so the manager cluster's
own controller never runs it (a worker cluster does). spec.managedBy cannot change once the
job exists, so only the webhook can set it. This is the one thing the webhook reads from the
API server, and only with --kubeconfig: LocalQueue -> ClusterQueue -> its AdmissionChecks'
controllerName, each kept for a few seconds. A read that fails decides "no" and says why (a
warning on the answer); the webhook never fails a request for it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from extender.core.admission.multikueue import CONTROLLER
from extender.core.jobframework.adapter import as_mapping, as_sequence
from extender.kube.api.client import KubeError, RequestBudget, RestClient, load_api_client
from extender.kube.api.resources import ADMISSION_CHECKS, CLUSTER_QUEUES, LOCAL_QUEUES, Resource

IN_CLUSTER = "in-cluster"
TTL = 5.0  # seconds a read is kept: a queue set up just now is seen within this


class QueueRoutes:
    """Per process (made on first use: gunicorn forks the workers after the app is built)."""

    def __init__(
        self,
        kubeconfig: str,
        *,
        ttl: float = TTL,
        clock: Callable[[], float] = time.monotonic,
        timeout: float = 2.0,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.ttl = ttl
        self.clock = clock
        self.timeout = timeout
        self._client: RestClient | None = None
        self._kept: dict[tuple[str, str], tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def _read(self, resource: Resource, name: str, namespace: str | None = None) -> Any:
        """The object, or None when it does not exist; KubeError when it cannot be read."""
        key = (resource.plural, f"{namespace}/{name}" if namespace else name)
        now = self.clock()
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None and now - kept[0] < self.ttl:
            return kept[1]
        if self._client is None:
            path = None if self.kubeconfig == IN_CLUSTER else self.kubeconfig
            self._client = RestClient(
                load_api_client(path), RequestBudget(20, 40), timeout=self.timeout
            )
        try:
            obj: Any = self._client.get(resource, name, namespace)
        except KubeError as err:
            if getattr(err, "not_found", False):
                obj = None
            else:
                raise
        with self._lock:
            if len(self._kept) > 10_000:
                self._kept.clear()
            self._kept[key] = (now, obj)
        return obj

    def multikueue(self, namespace: str, queue: str) -> bool | str:
        """Whether the LocalQueue's ClusterQueue has a MultiKueue AdmissionCheck; a string
        says why it could not be told."""
        try:
            lq = self._read(LOCAL_QUEUES, queue, namespace)
            cq_name = as_mapping(as_mapping(lq).get("spec")).get("clusterQueue")
            if not cq_name:
                return False
            cq = as_mapping(self._read(CLUSTER_QUEUES, str(cq_name)))
            spec = as_mapping(cq.get("spec"))
            names = [
                as_mapping(c).get("name")
                for c in as_sequence(
                    as_mapping(spec.get("admissionChecksStrategy")).get("admissionChecks")
                )
            ]
            names += list(as_sequence(spec.get("admissionChecks")))
            for name in names:
                if not name:
                    continue
                check = as_mapping(self._read(ADMISSION_CHECKS, str(name)))
                if as_mapping(check.get("spec")).get("controllerName") == CONTROLLER:
                    return True
            return False
        except Exception as err:  # any failure decides "no", with the reason told
            return " ".join(str(err).split()) or type(err).__name__
