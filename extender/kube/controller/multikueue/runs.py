"""What runs a MultiKueue Workload on a worker, and how it is copied there and back.

A Workload runs on a worker as one of three things. A job of a kind with a managedBy (a Job,
an MPIJob ...) is made there from the manager's, and the manager's takes its status. A plain
pod group's pods (or a single pod) are each copied, and each manager's pod takes its worker
pod's status, the manager's left gated. The object that declares a group (a StatefulSet, a
LeaderWorkerSet) is copied once, and nothing comes back (its own controller writes its status
on the manager, as Kueue leaves it). A LeaderWorkerSet has a Workload per group: they all go
to the worker its first one went to, as Kueue's component Workloads do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.core.admission import multikueue as policy
from extender.core.jobframework.adapter import as_mapping, workload_name
from extender.core.jobframework.parent import TemplateParent
from extender.kube.api import objects as o
from extender.kube.api.client import JSON_PATCH
from extender.kube.api.resources import WORKLOADS, Resource
from extender.kube.api.trim import JobView
from extender.kube.controller.context import Context
from extender.kube.controller.multikueue.copies import WorkerCopies
from extender.kube.controller.multikueue.workers import WorkerClusters, job_adapter

Obj = dict[str, Any]


@dataclass(frozen=True)
class Declaring:
    """The object that declares a group Workload, as the manager's store has it."""

    parent: TemplateParent
    resource: Resource
    key: str  # namespace/name
    obj: Obj


@dataclass(frozen=True)
class RemoteRun:
    """What runs one Workload on a worker: jobs (a job, or each pod of a plain group), or
    the object that declares its group."""

    jobs: tuple[JobView, ...] = ()
    declaring: Declaring | None = None
    # The other Workloads of the same object (a LeaderWorkerSet's groups): their names in
    # the order of their index, this one's included.
    components: tuple[str, ...] = field(default=())

    def managed_problem(self) -> str | None:
        """Kueue's refusal of a job whose managedBy is not MultiKueue's (None: it is, or the
        kind has none)."""
        if not self.jobs:
            return None
        job = self.jobs[0]
        adapter = job.adapter
        if adapter.own_controller is None or job.managed_by == policy.CONTROLLER:
            return None
        return policy.not_managed(job.managed_by, adapter.managed_by_field)

    def mirror(
        self, copies: WorkerCopies, synced: dict[str, str], cluster: str, key: str, final: bool
    ) -> bool:
        """Made on the worker, or brought back from it; True when a copy back waits."""
        if self.declaring is not None:
            if not final:
                copy_declaring(copies, cluster, key, self.declaring)
            return False
        deferred = False
        for job in self.jobs:
            deferred |= mirror_job(copies, synced, cluster, key, job, final)
        return deferred

    def made(self, clusters: WorkerClusters, cluster: str) -> bool:
        if self.declaring is not None:
            d = self.declaring
            return clusters.remote(cluster, d.resource, d.key) is not None
        return all(clusters.remote(cluster, j.resource, j.key) is not None for j in self.jobs)


def remote_run(
    ctx: Context, parents: Mapping[Resource, TemplateParent], key: str, obj: Obj
) -> RemoteRun | None:
    """What runs this Workload on a worker; None for a kind MultiKueue cannot run there."""
    if not o.is_group_workload(obj):
        job = ctx.job_of(obj)
        if job is None or not job.adapter.runs_on_workers:
            return None
        return RemoteRun(jobs=(job,))
    store = ctx.store
    for resource, parent in parents.items():
        for parent_key in store.by_index(resource, "group", key):
            found = store.get(resource, parent_key)
            if not isinstance(found, dict) or not parent.runs_on_workers:
                return None
            names = parent.workload_names(found)
            return RemoteRun(
                declaring=Declaring(parent, resource, parent_key, found),
                components=names if len(names) > 1 else (),
            )
    if o.group_owner_kind(obj):
        return None  # its object is gone (or of a kind not watched)
    pods = next((r for r in ctx.job_resources if r.kind == "Pod"), None)
    if pods is None:
        return None
    views = (store.get(pods, k) for k in store.by_index(pods, "group", key))
    members = sorted((v for v in views if isinstance(v, JobView)), key=lambda v: v.name)
    return RemoteRun(jobs=tuple(members)) if members else None


def component_turn(ctx: Context, key: str, run: RemoteRun) -> policy.Turn:
    """Whether one of several Workloads of one object may be dispatched now (Kueue's
    component Workloads, a LeaderWorkerSet's groups), from its siblings in the store."""
    if not run.components:
        return policy.Turn()
    namespace, name = key.split("/", 1)
    where: dict[str, str | None] = {}
    for sibling in run.components:
        found = ctx.store.get(WORKLOADS, f"{namespace}/{sibling}")
        if found is not None:
            cluster = as_mapping(as_mapping(found).get("status")).get("clusterName")
            where[sibling] = str(cluster) if cluster else None
    return policy.component_turn(name, run.components, where)


def copy_declaring(copies: WorkerCopies, cluster: str, key: str, d: Declaring) -> None:
    """The declaring object made on the worker (once, for all its Workloads), from the
    manager's read whole; with Kueue's markers and the manager's uid."""
    clusters = copies.clusters
    if clusters.remote(cluster, d.resource, d.key) is not None:
        return
    labels, annotations = policy.job_markers(clusters.settings.origin, key.split("/", 1)[1])
    if d.parent.workload_names(d.obj)[1:]:
        annotations = {}  # several Workloads: none of them is its prebuilt one (Kueue's LWS)
    namespace, name = d.key.split("/", 1)

    def body() -> Obj:
        local = copies.ctx.client.get(d.resource, name, namespace)
        return d.parent.remote_copy(local, labels, annotations)

    copies.create(cluster, key, d.resource, body)


def spec_sync_handlers(
    ctx: Context, running: Callable[[str], bool]
) -> list[tuple[Resource, Callable[[str, Any, Any], None]]]:
    """For the kinds whose spec changes reach the worker's copy (a RayService's Serve
    config; Kueue's local job watcher): a change wakes its Workload, if it runs on a worker
    (`running`)."""

    def on_job(key: str, old: Any, new: Any) -> None:
        if not isinstance(new, JobView) or not new.adapter.worker_synced_fields:
            return
        name = workload_name(new.adapter.kind, new.adapter.group, new.name, new.uid)
        wl_key = f"{new.namespace}/{name}"
        if running(wl_key):
            ctx.queues.checks.add(("workload", wl_key))

    return [
        (resource, on_job)
        for resource in ctx.job_resources
        if (adapter := job_adapter(resource)) is not None and adapter.worker_synced_fields
    ]


# A Job's status counts of pods that run (batch/v1 JobStatus).
_STOPPED = {"status": dict.fromkeys(("active", "ready", "terminating"), 0)}


def stopped_here(ctx: Context, run: RemoteRun) -> None:
    """The Jobs of a Workload evicted here, its quota given back and its copies on the worker
    removed: they no longer count the worker's pods. Kueue holds the quota until the
    worker's stopped Job's status is copied (active 0); Tower gives it back at once (a lost
    worker never answers), and says here what that copy would say."""
    for job in run.jobs:
        if not job.active or job.managed_by != policy.CONTROLLER:
            continue
        if (job.resource.group, job.resource.kind) != ("batch", "Job"):
            continue
        ctx.write(job.resource, "patch-status", _stop_counts(ctx, job), job.key)


def _stop_counts(ctx: Context, job: JobView) -> Callable[[], Obj]:
    return lambda: ctx.client.patch(
        job.resource, job.name, _STOPPED, job.namespace, subresource="status"
    )


def mirror_job(
    copies: WorkerCopies,
    synced: dict[str, str],
    cluster: str,
    key: str,
    job: JobView,
    final: bool,
) -> bool:
    """The job made on the worker that admitted its Workload (from the manager's job, read
    whole), or its status copied back to the manager's job, once per version of the
    worker's; True when the copy waits for the manager's job to start. `synced` remembers
    the version copied per job of one Workload."""
    ctx = copies.ctx
    clusters = copies.clusters
    adapter = job.adapter
    resource = job.resource
    remote = clusters.remote(cluster, resource, job.key)
    if final:
        # The last copy, before the manager's Workload finishes (nothing is copied after):
        # read from the worker's API server, since the watch of its jobs may lag behind the
        # watch of its Workloads that told of the end.
        remote = clusters.read(cluster, resource, job.key)
    origin = clusters.settings.origin
    if remote is None:
        if final:
            return False
        labels, annotations = policy.job_markers(origin, key.split("/", 1)[1])

        def body() -> Obj:
            local = ctx.client.get(resource, job.name, job.namespace)
            return adapter.remote_copy(local, labels, annotations)

        copies.create(cluster, key, resource, body)
        return False
    meta = as_mapping(remote.get("metadata"))
    if as_mapping(meta.get("labels")).get(policy.ORIGIN_LABEL) != origin:
        return False  # not Tower's: never touched
    carried = None if final else adapter.remote_spec_patch(job.as_object(), remote)
    if carried is not None:
        copies.patch(cluster, key, resource, job.key, carried)
    version = str(meta.get("resourceVersion"))
    if synced.get(job.key) == version:
        return False
    wanted = adapter.status_from_worker(job.as_object(), remote)
    if wanted is None:
        return True
    # The whole status replaced, not merged: a field the worker's job no longer has (its
    # `active` once it finished) must go here too (kube-apiserver refuses a finished Job
    # with active pods).
    whole = [{"op": "add", "path": "/status", "value": wanted}]
    ctx.write(
        resource,
        "patch-status",
        lambda: ctx.client.patch(
            resource, job.name, whole, job.namespace, subresource="status", content_type=JSON_PATCH
        ),
        job.key,
    )
    synced[job.key] = version
    return False
