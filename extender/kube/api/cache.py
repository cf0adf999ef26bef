"""The controller's view of the cluster: one store, kept in sync by one informer per kind.

It runs on every replica, leader or not, so a standby that takes over (or serves the
scheduler extender) starts from warm caches. Jobs of every enabled kind are watched with a
label selector on `kueue.x-k8s.io/queue-name`: jobs Tower does not queue are never cached.
An enabled kind whose CRD the API server does not serve is said once, at INFO, and watched
from the moment the CRD appears (`discover_kinds`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from extender.core.api.models import QUEUE_NAME_LABEL
from extender.core.jobframework import registry
from extender.core.jobframework.adapter import JobAdapter
from extender.core.jobframework.dra import template_keys
from extender.core.jobframework.parent import TemplateParent
from extender.kube.api.client import KubeClient, KubeError
from extender.kube.api.informer import Informer
from extender.kube.api.placement import (
    Placement,
    node_view,
    pod_transform,
    topology_workload_index,
)
from extender.kube.api.resources import (
    CONFIG,
    NODES,
    OPTIONAL,
    PODS,
    PROVISIONING_REQUESTS,
    RESOURCE_CLAIM_TEMPLATES,
    WORKLOADS,
    Resource,
    resource_of,
    resource_of_parent,
)
from extender.kube.api.store import Store
from extender.kube.api.trim import job_view, owner_index, trim, workload_key
from extender.kube.api.trim import workload as trimmed_workload

log = logging.getLogger("tower.cache")

# The Workloads' index by the ResourceClaimTemplates their pods claim devices through.
CLAIM_TEMPLATES = "claim-templates"


class Cache:
    """Informers for the configuration, Workloads, the jobs of every enabled kind whose CRD
    is served (and nodes and pods for placement)."""

    def __init__(
        self,
        client: KubeClient,
        *,
        adapters: Iterable[JobAdapter] | None = None,
        group_parents: Iterable[TemplateParent] | None = None,
        watch_timeout: int = 300,
        on_error: Callable[[Resource, KubeError], None] | None = None,
        placement: Placement | None = None,
    ) -> None:
        self.client = client
        self.store = Store()
        self.adapters: tuple[JobAdapter, ...] = tuple(
            registry.enabled() if adapters is None else adapters
        )
        # Every enabled kind's resource, served or not: the controller listens to all of them,
        # and a kind whose CRD appears later starts sending at once.
        self.job_resources: tuple[Resource, ...] = tuple(map(resource_of, self.adapters))
        # Kinds whose pods run as groups (StatefulSet, LeaderWorkerSet): watched (queued ones
        # only) for the Workloads they declare, once served.
        self.group_parents: tuple[TemplateParent, ...] = tuple(
            registry.group_parents() if group_parents is None else group_parents
        )
        self.parent_resources: tuple[Resource, ...] = tuple(
            map(resource_of_parent, self.group_parents)
        )
        self.served_jobs: list[Resource] = []
        self.served_parents: list[Resource] = []
        self.served_optional: list[Resource] = []  # of OPTIONAL, those served (and watched)
        # Nodes and pods, for physical fit: pods keep only their node, phase, checked
        # requests and owner.
        self.placement = placement
        self.node_resources: tuple[Resource, ...] = (NODES, PODS) if placement else ()
        self.watch_timeout = watch_timeout
        self.on_error = on_error
        self.informers: list[Informer] = []
        self._stop: threading.Event | None = None
        self._lock = threading.Lock()
        store = self.store
        for resource in CONFIG:
            store.register(resource, trim)
        store.register(WORKLOADS, trimmed_workload)
        for adapter, resource in zip(self.adapters, self.job_resources, strict=True):
            store.register(resource, self._job_transform(adapter))
        store.add_index(WORKLOADS, "owner", owner_index)
        store.add_index(WORKLOADS, CLAIM_TEMPLATES, template_keys)
        for resource in self.job_resources:
            store.add_index(resource, "group", group_index)
        for parent, resource in zip(self.group_parents, self.parent_resources, strict=True):
            store.register(resource, trim)
            store.add_index(resource, "group", parent_index(parent))
        for resource in OPTIONAL:
            store.register(resource, trim)
        store.add_index(PROVISIONING_REQUESTS, "owner", request_owners)
        if placement is not None:
            store.register(NODES, node_view)
            store.register(PODS, pod_transform(placement.inventory.is_checked))
            store.add_index(PODS, "topology-workload", topology_workload_index)
            placement.attach(store)

    def _job_transform(self, adapter: JobAdapter) -> Callable[[dict[str, Any]], Any]:
        def transform(obj: dict[str, Any]) -> Any:
            """A job keeps its whole template only while no Workload was made from it."""
            view = job_view(obj, keep_source=False, adapter=adapter)
            if view is None or view.queue_name is None or view.finished is not None:
                return view
            if self.store.get(WORKLOADS, workload_key(view)) is not None:
                return view
            return job_view(obj, keep_source=True, adapter=adapter)

        return transform

    @property
    def resources(self) -> tuple[Resource, ...]:
        """The kinds watched now."""
        return (
            *CONFIG,
            WORKLOADS,
            *self.served_jobs,
            *self.served_parents,
            *self.served_optional,
            *self.node_resources,
        )

    def serves(self, resource: Resource) -> bool:
        """Whether an optional kind is served, and watched."""
        return resource in self.served_optional

    def discover_optional(self) -> list[Resource]:
        """Which OPTIONAL kinds the API server serves now that were not watched yet; each
        found is watched from now on (once started)."""
        found = []
        for resource in OPTIONAL:
            if resource in self.served_optional or not self._served_now(resource):
                continue
            found.append(resource)
            # Tower's own CRD is always there; the autoscaler's and DRA are news worth a line.
            news = (PROVISIONING_REQUESTS, RESOURCE_CLAIM_TEMPLATES)
            level = logging.INFO if resource in news else logging.DEBUG
            log.log(level, "watching %s: the API server serves them", resource.qualified)
            self._take_up(resource, self.served_optional)
        return found

    def _served_now(self, resource: Resource) -> bool:
        served = self.client.served(resource.api_version)
        return served is not None and resource.plural in served

    def _take_up(self, resource: Resource, served: list[Resource]) -> None:
        """A kind found served: watched from now on (at once if the informers run)."""
        with self._lock:
            served.append(resource)
            if self._stop is not None:
                self._start(resource, self._stop)

    def missing_optional(self) -> list[Resource]:
        return [r for r in OPTIONAL if r not in self.served_optional]

    def _kinds(self) -> list[tuple[str, Resource, list[Resource]]]:
        """(integration, resource, the list it joins once served) of every enabled kind: the
        kinds of job, then the kinds whose pods run as groups."""
        jobs = zip(self.adapters, self.job_resources, strict=True)
        parents = zip(self.group_parents, self.parent_resources, strict=True)
        return [
            *((a.framework, r, self.served_jobs) for a, r in jobs),
            *((p.framework, r, self.served_parents) for p, r in parents),
        ]

    def discover_kinds(self) -> list[Resource]:
        """Which enabled kinds the API server serves now that were not watched yet; each
        found is watched from now on (once started). Said once per kind, at INFO."""
        found = []
        for framework, resource, served in self._kinds():
            if resource in served or not self._served_now(resource):
                continue
            found.append(resource)
            log.info(
                "managing %s (%s): the API server serves %s",
                resource.kind,
                framework,
                resource.qualified,
            )
            self._take_up(resource, served)
        return found

    def missing_kinds(self) -> list[str]:
        """The enabled integrations whose CRD is not served (yet)."""
        return [
            framework for framework, resource, served in self._kinds() if resource not in served
        ]

    def start(self, stop: threading.Event) -> None:
        with self._lock:
            self._stop = stop
            for resource in self.resources:
                self._start(resource, stop)

    def _start(self, resource: Resource, stop: threading.Event) -> None:
        is_job = resource in self.job_resources or resource in self.parent_resources
        informer = Informer(
            self.client,
            self.store,
            resource,
            stop=stop,
            label_selector=QUEUE_NAME_LABEL if is_job else None,
            timeout_seconds=self.watch_timeout,
            after=(self.store.synced(WORKLOADS),) if is_job else (),
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


def group_index(view: Any) -> list[str]:
    """Index the members of groups by their group's Workload key ("ns/name")."""
    group = getattr(view, "group", None)
    return [f"{view.namespace}/{group[0]}"] if group is not None else []


def parent_index(parent: TemplateParent) -> Callable[[Any], list[str]]:
    """Index a kind's objects (a StatefulSet) by the keys of the group Workloads they declare."""

    def index(obj: Any) -> list[str]:
        namespace = (obj.get("metadata") or {}).get("namespace")
        return [f"{namespace}/{name}" for name in parent.workload_names(obj)]

    return index


def request_owners(request: Any) -> list[str]:
    """Index ProvisioningRequests by the Workloads that own them ("ns/name")."""
    meta = request.get("metadata") if isinstance(request, dict) else None
    if not isinstance(meta, dict):
        return []
    return [
        f"{meta.get('namespace')}/{ref.get('name')}"
        for ref in meta.get("ownerReferences") or []
        if isinstance(ref, dict) and ref.get("kind") == "Workload"
    ]


def watch_for_kinds(cache: Cache, stop: threading.Event, every: float = 30.0) -> None:
    """Say in one INFO line which enabled kinds' CRDs are not installed, and look for them
    every `every` seconds until all are served or stopped: a CRD installed after Tower is
    taken up without a restart."""
    missing = cache.missing_kinds()
    if not missing and not cache.missing_optional():
        return
    if missing:
        log.info(
            "integrations enabled whose CRD is not installed, managed once it is: %s",
            ", ".join(missing),
        )

    def run() -> None:
        while (cache.missing_kinds() or cache.missing_optional()) and not stop.wait(every):
            try:
                cache.discover_kinds()
                cache.discover_optional()
            except KubeError as err:  # the next look tries again
                log.debug("looking for CRDs: %s", err)

    threading.Thread(target=run, daemon=True, name="kind-discovery").start()
