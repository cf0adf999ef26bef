"""The store handlers of one term: each event from the cache becomes keys on the queues."""

from __future__ import annotations

from typing import Any

from extender.kube.api.resources import CONFIG, WORKLOADS, Resource
from extender.kube.api.store import Handler
from extender.kube.api.trim import JobView, workload_key
from extender.kube.controller import dra
from extender.kube.controller.context import Context
from extender.kube.controller.jobs import JobReconciler
from extender.kube.controller.multikueue import MultiKueueController
from extender.kube.controller.pod_groups.reconciler import GroupReconciler
from extender.kube.controller.provisioning import ProvisioningController
from extender.kube.controller.topology.ungater import TopologyUngater


class Watches:
    """The term's handlers, subscribed to the store when it starts and unsubscribed when it
    ends. A handler runs on the watch's thread, so it only enqueues keys: the loop
    reconciles them on its own."""

    def __init__(
        self,
        ctx: Context,
        *,
        jobs: JobReconciler,
        groups: GroupReconciler,
        ungater: TopologyUngater,
        provisioning: ProvisioningController,
        multikueue: MultiKueueController,
    ) -> None:
        self.ctx = ctx
        self.jobs = jobs
        self.groups = groups
        self.ungater = ungater
        self.provisioning = provisioning
        self.multikueue = multikueue
        self._handlers: list[tuple[Resource, Handler]] = []

    def subscribe(self) -> None:
        queues = self.ctx.queues
        for resource in CONFIG:

            def on_config(key: str, old: Any, new: Any, plural: str = resource.plural) -> None:
                queues.config.add((plural, key))

            self._handlers.append((resource, on_config))

        def on_workload(key: str, old: Any, new: Any) -> None:
            queues.workloads.add(key)
            for obj in (old, new):
                owner = self.ctx.owner_of(obj) if obj is not None else None
                if owner is not None:
                    queues.jobs.add((owner[0].plural, owner[1]))
            self.provisioning.workload_changed(key, old, new)
            self.multikueue.workload_changed(key, old, new)

        self._handlers.append((WORKLOADS, on_workload))

        self._handlers += self.provisioning.handlers()
        self._handlers += self.multikueue.handlers()
        self._handlers += dra.handlers(self.ctx)
        for resource in self.ctx.job_resources:

            def on_job(key: str, old: Any, new: Any, plural: str = resource.plural) -> None:
                view = new if new is not None else old
                if isinstance(view, JobView) and view.group is not None:
                    return  # a member of a group: the group room follows it (its handlers)
                if isinstance(new, JobView) and new.source is not None:  # no Workload yet
                    queues.creations.add((plural, key), self.jobs.priority(new))
                else:
                    queues.jobs.add((plural, key))
                if isinstance(view, JobView):
                    queues.workloads.add(workload_key(view))
                    if view.parent is not None:  # a RayJob follows its RayCluster's scaling
                        parent = self.ctx.job_resource_of_kind(view.parent[0])
                        if parent is not None:
                            queues.jobs.add((parent.plural, f"{view.namespace}/{view.parent[1]}"))

            self._handlers.append((resource, on_job))
        self._handlers += self.groups.handlers()
        self._handlers += self.ungater.handlers()
        for resource, handler in self._handlers:
            self.ctx.store.subscribe(resource, handler)

    def unsubscribe(self) -> None:
        for resource, handler in self._handlers:
            self.ctx.store.unsubscribe(resource, handler)
        self._handlers.clear()
