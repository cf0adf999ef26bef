"""Tower's writes to worker clusters: copies made, patched and removed off the loop's thread."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from extender.core.admission import multikueue as policy
from extender.core.jobframework.adapter import as_mapping
from extender.kube.api.client import ApiError, KubeClient
from extender.kube.api.resources import WORKLOADS, Resource
from extender.kube.controller.context import Context
from extender.kube.controller.multikueue.kubeconfig import one_line
from extender.kube.controller.multikueue.workers import RETRY_BASE, WorkerClusters

log = logging.getLogger("tower.multikueue")

Obj = dict[str, Any]
WRITERS = 8  # writes to workers in flight together


class WorkerCopies:
    """What Tower makes on the worker clusters, for one term: each write is sent in the
    background, once per (worker, Workload, what) at a time, and its Workload is looked at
    again when it is done; the copies whose Workload is gone are collected."""

    def __init__(self, ctx: Context, clusters: WorkerClusters) -> None:
        self.ctx = ctx
        self.clusters = clusters  # each worker's client, and the copies watched there
        # Never on the loop's thread: a worker may be slow or gone.
        self._pool: ThreadPoolExecutor | None = ThreadPoolExecutor(
            max_workers=WRITERS, thread_name_prefix="multikueue"
        )
        self._inflight: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()

    def stop(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def create(
        self,
        cluster: str,
        key: str,
        resource: Resource,
        body: Callable[[], Obj],
        made: Callable[[], None] = lambda: None,
    ) -> None:
        """Make an object on a worker, in the background (`body` is read there too): the
        loop never waits on a worker's API server. `made` runs once it is made (not when it
        was there already)."""
        self._submit(
            cluster,
            key,
            f"create {resource.plural}",
            lambda: self._create(cluster, resource, body(), made),
        )

    def patch(
        self,
        cluster: str,
        key: str,
        resource: Resource,
        job_key: str,
        body: Obj,
        subresource: str = "",
    ) -> None:
        """Merge-patch a job Tower made on a worker (or its `subresource`), in the background."""

        def send() -> None:
            worker = self.clusters.workers.get(cluster)
            if worker is None or worker.client is None or not worker.connected:
                return
            namespace, name = job_key.split("/", 1)
            made = worker.client.patch(resource, name, body, namespace, subresource=subresource)
            if worker.store is not None:
                worker.store.record(resource, made)

        self._submit(cluster, key, f"patch {resource.plural}{subresource}", send)

    def remove(self, cluster: str, key: str) -> None:
        """Remove a Workload's job and copy from one worker, in the background, unless all
        that is left there is already going: its going wakes the Workload, and a DELETE sent
        again for an object held Terminating (a kubelet's grace period, a finalizer) would be
        sent as fast as the worker answers."""
        if self._left_to_remove(cluster, key):
            self._submit(cluster, key, "remove", lambda: self._remove(cluster, key))

    def remove_everywhere(self, key: str, keep: str | None) -> None:
        for cluster in list(self.clusters.workers):
            if cluster != keep:
                self.remove(cluster, key)

    def collect(self) -> None:
        """Copies on connected workers whose Workload here is gone (Kueue's gcInterval)."""
        for cluster, worker in list(self.clusters.workers.items()):
            if not worker.connected or worker.store is None:
                continue
            for key, _ in worker.store.items(WORKLOADS):
                local = self.ctx.store.get(WORKLOADS, key)
                if local is None or (
                    as_mapping(as_mapping(local).get("metadata")).get("deletionTimestamp")
                ):
                    log.info("Workload %s is gone here: its copy on %s is removed", key, cluster)
                    self.remove(cluster, key)

    def _left_to_remove(self, cluster: str, key: str) -> bool:
        copy = self.clusters.remote(cluster, WORKLOADS, key)
        if copy is not None and (
            not _deleting(copy)
            or policy.RESOURCE_IN_USE in (as_mapping(copy.get("metadata")).get("finalizers") or ())
        ):
            return True
        return any(not _deleting(job) for _, _, job in self.clusters.jobs_on(cluster, key))

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
                log.warning("worker %s: %s for %s: %s", cluster, what, key, one_line(err))
                retry = RETRY_BASE
            finally:
                with self._lock:
                    self._inflight.discard(token)
                if retry:
                    self.ctx.queues.checks.add_after(("workload", key), retry)
                else:
                    self.ctx.queues.checks.add(("workload", key))

        self._pool.submit(run)

    def _create(
        self, cluster: str, resource: Resource, body: Obj, made: Callable[[], None]
    ) -> None:
        worker = self.clusters.workers.get(cluster)
        if worker is None or worker.client is None:
            return
        assert worker.client is not None
        namespace = body["metadata"]["namespace"]
        try:
            created = worker.client.create(resource, body, namespace)
        except ApiError as err:
            if err.already_exists:
                return
            raise
        if worker.store is not None:
            worker.store.record(resource, created)
        made()
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
        worker = self.clusters.workers.get(cluster)
        if worker is None or worker.client is None or not worker.connected:
            return
        client = worker.client
        namespace, name = key.split("/", 1)
        copy = self.clusters.remote(cluster, WORKLOADS, key)
        for resource, job_name, job in self.clusters.jobs_on(cluster, key):
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


def _delete(client: KubeClient, resource: Resource, name: str, namespace: str) -> None:
    try:
        client.delete(resource, name, namespace)  # Background propagation, as Kueue's
    except ApiError as err:
        if not err.not_found:
            raise


def _deleting(obj: Any) -> bool:
    return bool(as_mapping(as_mapping(obj).get("metadata")).get("deletionTimestamp"))
