"""MultiKueue's worker clusters: each one's client, its Active condition, Tower's copies there.

A MultiKueueCluster names a worker by its kubeconfig: a Secret in Tower's own namespace (key
`kubeconfig`) or a path. Tower refuses kubeconfigs Kueue refuses (files, plugins, no TLS
verification), connects, and says so on the cluster's Active condition (Kueue's reasons); a
worker not reached is tried again after 5 s, doubling up to 320 s. What Tower made on a
worker (the origin label) is watched into a store of its own, so the manager reads a
worker's answer from memory and each change there wakes the Workload it belongs to.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import yaml
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
from extender.kube.api.resources import MULTIKUEUE_CLUSTERS, SECRETS, WORKLOADS, Resource
from extender.kube.api.store import Store
from extender.kube.api.trim import prebuilt_name
from extender.kube.api.workqueue import Backoff
from extender.kube.controller.active import set_active
from extender.kube.controller.context import Context

log = logging.getLogger("tower.multikueue")

Obj = dict[str, Any]
_PROBE = "tower.dev/multikueue-probe=none"
HEARTBEAT = 10.0  # seconds between looks at a connected worker (a lost one shows here)
WRITERS = 8  # writes to workers in flight together
WORKLOAD_INDEX = "workload"  # a worker's jobs by the key of the Workload each runs
RETRY_BASE, RETRY_STEPS = 5.0, 7  # a worker not reached: 5 s, 10 s ... 320 s (Kueue's)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a worker cannot be reached: the Active condition's reason and message."""

    reason: str
    message: str


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
    """Every MultiKueueCluster's connection, for one term."""

    def __init__(
        self,
        ctx: Context,
        settings: MultiKueueSettings,
        namespace: str,
        client_factory: ClientFactory,
        on_change: Callable[[], None],
        parents: Mapping[Resource, TemplateParent] | None = None,
    ) -> None:
        self.ctx = ctx
        # The kinds that declare group Workloads (a StatefulSet), copied to workers whole.
        self.parents = {r: p for r, p in (parents or {}).items() if p.runs_on_workers}
        self.settings = settings
        self.namespace = namespace  # where the kubeconfig Secrets are
        self.client_factory = client_factory
        self.on_change = on_change  # a worker came or went: dispatched Workloads look again
        self.workers: dict[str, Worker] = {}
        # The writes to workers: never on the loop's thread (a worker may be slow or gone).
        self._pool: ThreadPoolExecutor | None = ThreadPoolExecutor(
            max_workers=WRITERS, thread_name_prefix="multikueue"
        )
        self._inflight: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()

    def stop(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
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
        source = policy.cluster_source(obj)
        if not isinstance(source, policy.KubeConfigSource):
            self._disconnect(worker)
            self._set_active(name, obj, "False", *source)
            return None
        loaded = self._kubeconfig(source)
        if isinstance(loaded, Refusal):
            self._disconnect(worker)
            self._set_active(name, obj, "False", loaded.reason, loaded.message)
            return None
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
            self._set_active(name, obj, "False", "ClientConnectionFailed", _one_line(err))
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

    def _kubeconfig(self, source: policy.KubeConfigSource) -> tuple[bytes, Obj] | Refusal:
        """The kubeconfig (its bytes and parsed) or (reason, message), in Kueue's words."""
        if source.location_type == "Secret":
            try:
                secret = self.ctx.client.get(SECRETS, source.location, self.namespace)
            except ApiError as err:
                if err.not_found:
                    return Refusal(
                        "BadKubeConfig",
                        f'load client config failed: secrets "{source.location}" not found '
                        f"in {self.namespace} (Tower reads workers' kubeconfigs from its own "
                        "namespace)",
                    )
                raise
            data = as_mapping(secret.get("data")).get(policy.SECRET_KEY)
            if not isinstance(data, str):
                return Refusal(
                    "BadKubeConfig",
                    f'load client config failed: key "{policy.SECRET_KEY}" not found in '
                    f'secret "{source.location}"',
                )
            try:
                text = base64.b64decode(data)
            except ValueError:
                return Refusal(
                    "BadKubeConfig",
                    "load client config failed: the secret's data is not base64",
                )
        else:
            try:
                with open(source.location, "rb") as handle:
                    text = handle.read()
            except OSError as err:
                return Refusal(
                    "BadKubeConfig",
                    f"load client config failed: {err.strerror}: {source.location}",
                )
        try:
            parsed = yaml.load(text, Loader=yaml.CSafeLoader)
        except yaml.YAMLError as err:
            return Refusal("BadKubeConfig", f"load client config failed: {_one_line(err)}")
        if not isinstance(parsed, dict):
            return Refusal(
                "BadKubeConfig", "load client config failed: not a kubeconfig (a YAML mapping)"
            )
        why = policy.insecure(parsed)
        if why is not None:
            return Refusal("InsecureKubeConfig", f"load client config failed: {why}")
        return text, parsed

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
        for resource in (WORKLOADS, *served):
            store.register(resource)
            store.subscribe(resource, partial(on_remote, resource))
            Informer(
                worker.client,
                store,
                resource,
                stop=worker.stop,
                label_selector=selector,
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

    def remote(self, cluster: str, resource: Resource, key: str) -> Obj | None:
        worker = self.workers.get(cluster)
        if worker is None or worker.store is None:
            return None
        found = worker.store.get(resource, key)
        return found if isinstance(found, dict) else None

    def create(self, cluster: str, key: str, resource: Resource, body: Callable[[], Obj]) -> None:
        """Make an object on a worker, in the background (`body` is read there too): the
        loop never waits on a worker's API server."""
        self._submit(
            cluster,
            key,
            f"create {resource.plural}",
            lambda: self._create(cluster, resource, body()),
        )

    def patch(self, cluster: str, key: str, resource: Resource, job_key: str, body: Obj) -> None:
        """Merge-patch a job Tower made on a worker, in the background."""

        def send() -> None:
            worker = self.workers.get(cluster)
            if worker is None or worker.client is None or not worker.connected:
                return
            namespace, name = job_key.split("/", 1)
            made = worker.client.patch(resource, name, body, namespace)
            if worker.store is not None:
                worker.store.record(resource, made)

        self._submit(cluster, key, f"patch {resource.plural}", send)

    def remove(self, cluster: str, key: str) -> None:
        """Remove a Workload's job and copy from one worker, in the background, unless all
        that is left there is already going: its going wakes the Workload, and a DELETE sent
        again for an object held Terminating (a kubelet's grace period, a finalizer) would be
        sent as fast as the worker answers."""
        if self._left_to_remove(cluster, key):
            self._submit(cluster, key, "remove", lambda: self._remove(cluster, key))

    def _left_to_remove(self, cluster: str, key: str) -> bool:
        copy = self.remote(cluster, WORKLOADS, key)
        if copy is not None and (
            not _deleting(copy)
            or policy.RESOURCE_IN_USE in (as_mapping(copy.get("metadata")).get("finalizers") or ())
        ):
            return True
        return any(not _deleting(job) for _, _, job in self._jobs_on(cluster, key))

    def _jobs_on(self, cluster: str, key: str) -> list[tuple[Resource, str, Obj]]:
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

    def _submit(self, cluster: str, key: str, what: str, work: Callable[[], None]) -> None:
        """One piece of work per (worker, Workload, what) at a time; when it is done, its
        Workload is looked at again (a failure too, after a pause)."""
        token = (cluster, key, what)
        with self._lock:
            if token in self._inflight or self._pool is None:
                return
            self._inflight.add(token)

        def run() -> None:
            retry = 0.0
            try:
                work()
            except Exception as err:  # an unreachable worker, a refused write: tried again
                log.warning("worker %s: %s for %s: %s", cluster, what, key, _one_line(err))
                retry = RETRY_BASE
            finally:
                with self._lock:
                    self._inflight.discard(token)
                if retry:
                    self.ctx.queues.checks.add_after(("workload", key), retry)
                else:
                    self.ctx.queues.checks.add(("workload", key))

        self._pool.submit(run)

    def _create(self, cluster: str, resource: Resource, body: Obj) -> None:
        worker = self.workers.get(cluster)
        if worker is None or worker.client is None:
            return
        assert worker.client is not None
        namespace = body["metadata"]["namespace"]
        try:
            made = worker.client.create(resource, body, namespace)
        except ApiError as err:
            if err.already_exists:
                return
            raise
        if worker.store is not None:
            worker.store.record(resource, made)
        log.info(
            "%s %s/%s created on worker %s",
            resource.kind,
            namespace,
            body["metadata"]["name"],
            cluster,
        )

    def _remove(self, cluster: str, key: str) -> None:
        """A Workload's job and copy removed from one worker: the job (only one Tower made),
        then the copy, its Kueue finalizer taken off first."""
        worker = self.workers.get(cluster)
        if worker is None or worker.client is None or not worker.connected:
            return
        client = worker.client
        namespace, name = key.split("/", 1)
        copy = self.remote(cluster, WORKLOADS, key)
        for resource, job_name, job in self._jobs_on(cluster, key):
            if not _deleting(job):
                _delete(client, resource, job_name, namespace)
        if copy is not None:
            finalizers = as_mapping(copy.get("metadata")).get("finalizers") or []
            if policy.RESOURCE_IN_USE in finalizers:
                kept = [f for f in finalizers if f != policy.RESOURCE_IN_USE]
                try:
                    client.patch(
                        WORKLOADS, name, {"metadata": {"finalizers": kept or None}}, namespace
                    )
                except ApiError as err:
                    if not err.not_found:
                        raise
        if copy is None or not _deleting(copy):
            _delete(client, WORKLOADS, name, namespace)

    def remove_everywhere(self, key: str, keep: str | None) -> None:
        for cluster in list(self.workers):
            if cluster != keep:
                self.remove(cluster, key)

    def collect(self) -> None:
        """Copies on connected workers whose Workload here is gone (Kueue's gcInterval)."""
        for cluster, worker in list(self.workers.items()):
            if not worker.connected or worker.store is None:
                continue
            for key, _ in worker.store.items(WORKLOADS):
                local = self.ctx.store.get(WORKLOADS, key)
                if local is None or (
                    as_mapping(as_mapping(local).get("metadata")).get("deletionTimestamp")
                ):
                    log.info("Workload %s is gone here: its copy on %s is removed", key, cluster)
                    self.remove(cluster, key)


def job_adapter(resource: Resource) -> JobAdapter | None:
    for adapter in registry.ADAPTERS.values():
        if adapter.plural == resource.plural and adapter.group == resource.group:
            return adapter if adapter.runs_on_workers else None
    return None


def _delete(client: KubeClient, resource: Resource, name: str, namespace: str) -> None:
    try:
        client.delete(resource, name, namespace)  # Background propagation, as Kueue's
    except ApiError as err:
        if not err.not_found:
            raise


def _deleting(obj: Any) -> bool:
    return bool(as_mapping(as_mapping(obj).get("metadata")).get("deletionTimestamp"))


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())
