"""MultiKueue's worker clusters: each one's client, its Active condition, Tower's copies there.

A MultiKueueCluster names a worker by its kubeconfig: a Secret in Tower's own namespace (key
`kubeconfig`) or a path. Tower refuses kubeconfigs Kueue refuses (files, plugins, no TLS
verification; kubeconfig.py), connects, and says so on the cluster's Active
condition (Kueue's reasons); a worker not reached is tried again after 5 s, doubling up to
320 s. What Tower made on a worker (the origin label) is watched into a store of its own, so
the manager reads a worker's answer from memory and each change there wakes the Workload it
belongs to. Tower's writes there are copies.py's.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from kubernetes import config as k8s_config

from extender.core.admission import multikueue as policy
from extender.core.admission.multikueue import MultiKueueSettings
from extender.core.jobframework import registry
from extender.core.jobframework.adapter import JobAdapter, as_mapping
from extender.core.jobframework.parent import TemplateParent
from extender.kube.api.client import (
    ApiError,
    KubeClient,
    KubeError,
    RequestBudget,
    RestClient,
)
from extender.kube.api.informer import Informer
from extender.kube.api.resources import (
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    MULTIKUEUE_CLUSTERS,
    WORKLOADS,
    Resource,
)
from extender.kube.api.store import Store
from extender.kube.api.trim import prebuilt_name
from extender.kube.api.workqueue import Backoff
from extender.kube.controller.active import set_active
from extender.kube.controller.context import Context
from extender.kube.controller.multikueue.kubeconfig import Refusal, one_line, worker_config

Obj = dict[str, Any]
_PROBE = "tower.dev/multikueue-probe=none"
HEARTBEAT = 10.0  # seconds between looks at a connected worker (a lost one shows here)
WORKLOAD_INDEX = "workload"  # a worker's jobs by the key of the Workload each runs
RETRY_BASE, RETRY_STEPS = 5.0, 7  # a worker not reached: 5 s, 10 s ... 320 s (Kueue's)


@dataclass(slots=True)
class Worker:
    """One worker cluster: its client, the copies Tower made there, and whether it answers."""

    name: str
    fingerprint: str = ""
    client: KubeClient | None = None
    store: Store | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    connected: bool = False
    lost_since: float | None = None
    failures: int = 0
    retry_at: float = 0.0

    def close(self) -> None:
        self.stop.set()
        self.connected = False


ClientFactory = Callable[[Obj], KubeClient]


def rest_client_factory(fence: Callable[[], None] | None) -> ClientFactory:
    """Clients for workers from their kubeconfigs (the `kubernetes` package's)."""

    def make(kubeconfig: Obj) -> KubeClient:
        api_client = k8s_config.new_client_from_config_dict(kubeconfig)
        return RestClient(api_client, RequestBudget(50, 100), timeout=10.0, fence=fence)

    return make


class WorkerClusters:
    """Every MultiKueueCluster's connection, for one term, and what each worker shows of
    Tower's copies there (its watch's store, or its API server read now)."""

    def __init__(
        self,
        ctx: Context,
        settings: MultiKueueSettings,
        namespace: str,
        client_factory: ClientFactory,
        on_change: Callable[[], None],
        parents: Mapping[Resource, TemplateParent] | None = None,
        on_queues: Callable[[str], None] | None = None,
    ) -> None:
        self.ctx = ctx
        # With manager quota automation: each worker's queues are watched too, and a change
        # there is told (the worker's name).
        self.on_queues = on_queues
        # The kinds that declare group Workloads (a StatefulSet), copied to workers whole.
        self.parents = {r: p for r, p in (parents or {}).items() if p.runs_on_workers}
        self.settings = settings
        self.namespace = namespace  # where the kubeconfig Secrets are
        self.client_factory = client_factory
        self.on_change = on_change  # a worker came or went: dispatched Workloads look again
        self.workers: dict[str, Worker] = {}

    def stop(self) -> None:
        for worker in self.workers.values():
            worker.close()
        self.workers.clear()

    def job_resources(self) -> list[Resource]:
        """The kinds Tower makes on workers: jobs, pods, and objects that declare groups."""
        jobs = [r for r in self.ctx.job_resources if job_adapter(r) is not None]
        return [*jobs, *self.parents]

    def workloads_of(self, resource: Resource, obj: Any) -> tuple[str, ...]:
        """The names of the Workloads an object Tower made on a worker runs (its prebuilt
        one; every group of a LeaderWorkerSet, named as on the manager)."""
        meta = as_mapping(as_mapping(obj).get("metadata"))
        prebuilt = prebuilt_name(meta)
        parent = self.parents.get(resource)
        names = parent.workload_names(as_mapping(obj)) if parent is not None else ()
        return (prebuilt, *names) if prebuilt else tuple(names)

    def reconcile(self, name: str) -> float | None:
        ctx = self.ctx
        obj = ctx.store.get(MULTIKUEUE_CLUSTERS, name)
        if obj is None:
            worker = self.workers.pop(name, None)
            if worker is not None:
                worker.close()
            return None
        worker = self.workers.setdefault(name, Worker(name))
        loaded = worker_config(
            ctx.client,
            self.namespace,
            obj,
            ctx.settings.feature_gates,
            self.settings.access_providers,
        )
        if isinstance(loaded, Refusal):
            self._disconnect(worker)
            self._set_active(name, obj, "False", loaded.reason, loaded.message)
            return loaded.retry
        text, kubeconfig = loaded
        fingerprint = hashlib.sha256(text).hexdigest()
        if fingerprint != worker.fingerprint:
            worker.close()
            worker = self.workers[name] = Worker(name, fingerprint)
        now = ctx.monotonic()
        if not worker.connected and now < worker.retry_at:
            return worker.retry_at - now
        try:
            if worker.client is None:
                worker.client = self.client_factory(kubeconfig)
            # Reached, and allowed to read Workloads (a selector nothing carries: no items).
            worker.client.list(WORKLOADS, label_selector=_PROBE, page=1)
        except (KubeError, ValueError, OSError) as err:
            worker.failures += 1
            wait = RETRY_BASE * 2.0 ** (min(worker.failures, RETRY_STEPS) - 1)
            worker.retry_at = now + wait
            if worker.connected or worker.lost_since is None:
                worker.lost_since = ctx.clock()
            worker.connected = False
            self._set_active(name, obj, "False", "ClientConnectionFailed", one_line(err))
            self.on_change()
            return wait
        was = worker.connected
        worker.connected, worker.failures, worker.lost_since = True, 0, None
        if worker.store is None:
            self._watch(worker)
        self._set_active(name, obj, "True", "Active", "Connected")
        if not was:
            self.on_change()
        return HEARTBEAT

    def _disconnect(self, worker: Worker) -> None:
        if worker.connected or worker.lost_since is None:
            worker.lost_since = self.ctx.clock()
        worker.close()
        worker.client = None
        worker.store = None
        worker.fingerprint = ""
        self.on_change()

    def _watch(self, worker: Worker) -> None:
        """The copies Tower made on the worker, watched into a store of their own: a change
        there wakes its Workload here."""
        assert worker.client is not None
        store = Store()
        selector = f"{policy.ORIGIN_LABEL}={self.settings.origin}"
        queue = self.ctx.queues.checks

        def on_remote(resource: Resource, key: str, old: Any, new: Any) -> None:
            obj = new if new is not None else old
            meta = as_mapping(as_mapping(obj).get("metadata"))
            names: tuple[Any, ...] = (meta.get("name"),)
            if resource != WORKLOADS:
                names = self.workloads_of(resource, obj) or names
            for name in names:
                queue.add(("workload", f"{meta.get('namespace')}/{name}"))

        client = worker.client
        served = [
            r
            for r in self.job_resources()
            if r.plural in (client.served(f"{r.group}/{r.version}" if r.group else r.version) or ())
        ]

        def lost(resource: Resource, err: KubeError) -> None:
            # A watch cut off: the worker is looked at now, not at its next heartbeat.
            if not worker.stop.is_set():
                queue.add(("cluster", worker.name))

        def workload_keys(resource: Resource, obj: Any) -> list[str]:
            namespace = as_mapping(as_mapping(obj).get("metadata")).get("namespace")
            return [f"{namespace}/{name}" for name in self.workloads_of(resource, obj)]

        for resource in self.job_resources():
            # A Workload's jobs are found by key, not by reading every job on the worker
            # (those of a kind it does not serve come in as the answers of Tower's writes).
            store.add_index(resource, WORKLOAD_INDEX, partial(workload_keys, resource))
        watched: list[tuple[Resource, str | None, Callable[[str, Any, Any], None]]] = [
            (r, selector, partial(on_remote, r)) for r in (WORKLOADS, *served)
        ]
        if self.on_queues is not None:
            told = self.on_queues
            watched += [
                (r, None, lambda key, old, new: told(worker.name))
                for r in (CLUSTER_QUEUES, LOCAL_QUEUES)
            ]
        for resource, labels, handler in watched:
            store.register(resource)
            store.subscribe(resource, handler)
            Informer(
                worker.client,
                store,
                resource,
                stop=worker.stop,
                label_selector=labels,
                backoff=Backoff(base=0.5, cap=10.0),
                on_error=lost,
            ).start()
        worker.store = store

    def _set_active(self, name: str, obj: Any, status: str, reason: str, message: str) -> None:
        set_active(self.ctx, MULTIKUEUE_CLUSTERS, name, obj, status, reason, message)

    def read(self, cluster: str, resource: Resource, key: str) -> Obj | None:
        """An object read from the worker's API server now (None: not there, or the worker
        is not reached); the store's copy when the read fails."""
        worker = self.workers.get(cluster)
        if worker is None or worker.client is None or not worker.connected:
            return self.remote(cluster, resource, key)
        namespace, name = key.split("/", 1)
        try:
            found = worker.client.get(resource, name, namespace)
        except ApiError as err:
            if err.not_found:
                return None
            return self.remote(cluster, resource, key)
        except KubeError:
            return self.remote(cluster, resource, key)
        return found if isinstance(found, dict) else None

    def connected(self, cluster: str) -> bool:
        worker = self.workers.get(cluster)
        return worker is not None and worker.connected and worker.store is not None

    def queues_of(self, cluster: str) -> Store | None:
        """The store of a connected worker's queues (None: not connected, or not watched)."""
        worker = self.workers.get(cluster)
        if not self.connected(cluster) or worker is None or worker.store is None:
            return None
        return worker.store if worker.store.is_registered(CLUSTER_QUEUES) else None

    def remote(self, cluster: str, resource: Resource, key: str) -> Obj | None:
        worker = self.workers.get(cluster)
        if worker is None or worker.store is None:
            return None
        found = worker.store.get(resource, key)
        return found if isinstance(found, dict) else None

    def jobs_on(self, cluster: str, key: str) -> list[tuple[Resource, str, Obj]]:
        """(resource, name, object) of each job a worker holds for this Workload."""
        worker = self.workers.get(cluster)
        store = None if worker is None else worker.store
        if store is None:
            return []
        found = []
        for resource in self.job_resources():
            for job_key in store.by_index(resource, WORKLOAD_INDEX, key):
                job = store.get(resource, job_key)
                if job is not None:
                    found.append((resource, job_key.split("/", 1)[1], job))
        return found


def job_adapter(resource: Resource) -> JobAdapter | None:
    for adapter in registry.ADAPTERS.values():
        if adapter.plural == resource.plural and adapter.group == resource.group:
            return adapter if adapter.runs_on_workers else None
    return None
