"""The controller's view of the cluster: one store, kept in sync by one informer per kind.

It runs on every replica, leader or not, so a standby that takes over (or serves the
scheduler extender) starts from warm caches. Jobs are watched with a label selector on
`kueue.x-k8s.io/queue-name`: Jobs Tower does not queue are never cached.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from extender.core.models import QUEUE_NAME_LABEL
from extender.kube.api.client import KubeClient, KubeError
from extender.kube.api.informer import Informer
from extender.kube.api.placement import Placement, node_view, pod_transform
from extender.kube.api.resources import CONFIG, JOBS, JOBSETS, NODES, PODS, WORKLOADS, Resource
from extender.kube.api.store import Store
from extender.kube.api.trim import job_view, owner_index, trim, workload_key
from extender.kube.api.trim import workload as trimmed_workload


class Cache:
    """Informers for the configuration, Workloads, Jobs (and JobSets where served)."""

    def __init__(
        self,
        client: KubeClient,
        *,
        jobsets: bool = False,
        watch_timeout: int = 300,
        on_error: Callable[[Resource, KubeError], None] | None = None,
        placement: Placement | None = None,
    ) -> None:
        self.client = client
        self.store = Store()
        self.job_resources: tuple[Resource, ...] = (JOBS, JOBSETS) if jobsets else (JOBS,)
        # Nodes and pods, for physical fit: pods keep only their node, phase, checked
        # requests and owner.
        self.placement = placement
        self.node_resources: tuple[Resource, ...] = (NODES, PODS) if placement else ()
        self.watch_timeout = watch_timeout
        self.on_error = on_error
        self.informers: list[Informer] = []
        store = self.store
        for resource in CONFIG:
            store.register(resource, trim)
        store.register(WORKLOADS, trimmed_workload)
        for resource in self.job_resources:
            store.register(resource, self._job_transform)
        store.add_index(WORKLOADS, "owner", owner_index)
        if placement is not None:
            store.register(NODES, node_view)
            store.register(PODS, pod_transform(placement.inventory.is_checked))
            placement.attach(store)

    def _job_transform(self, obj: dict[str, Any]) -> Any:
        """A Job keeps its whole template only while no Workload was made from it."""
        view = job_view(obj, keep_source=False)
        if view is None or view.queue_name is None or view.finished is not None:
            return view
        if self.store.get(WORKLOADS, workload_key(view)) is not None:
            return view
        return job_view(obj, keep_source=True)

    @property
    def resources(self) -> tuple[Resource, ...]:
        return (*CONFIG, WORKLOADS, *self.job_resources, *self.node_resources)

    def start(self, stop: threading.Event) -> None:
        workloads_synced = self.store.synced(WORKLOADS)
        for resource in self.resources:
            is_job = resource in self.job_resources
            informer = Informer(
                self.client,
                self.store,
                resource,
                stop=stop,
                label_selector=QUEUE_NAME_LABEL if is_job else None,
                timeout_seconds=self.watch_timeout,
                after=(workloads_synced,) if is_job else (),
                on_error=self.on_error,
            )
            self.informers.append(informer)
            informer.start()

    def synced(self) -> bool:
        return all(self.store.synced(r).is_set() for r in self.resources)

    def unsynced(self) -> list[str]:
        """The kinds whose first list has not arrived yet."""
        return [r.plural for r in self.resources if not self.store.synced(r).is_set()]

    def wait_synced(self, stop: threading.Event, poll: float = 0.02) -> bool:
        while not self.synced():
            if stop.wait(poll):
                return False
        return True
