"""Elastic jobs in the controller: a job's Workload slices kept, followed, its pods let through.

The job reconciler hands an elastic job (core/jobframework/slices.py: a Job, RayJob or
RayCluster annotated `kueue.x-k8s.io/elastic-job: "true"`, gate on) to `ElasticJobs.follow`,
which does what Kueue's EnsureWorkloadSlices does, level-based from the store:
- its not-finished slices are sorted out; a slice replaced by an admitted one, or out of sync
  with its job, is finished with Kueue's reason (the replaced one's quota already went to its
  replacement in the core, in the cycle that admitted it);
- its counts, compared with the slice it follows: a first slice is made; a slice without
  quota, or a scale-down, is updated in place (a scale-down gives its quota back at once);
  a scale-up of an admitted slice makes a new slice that names the one it replaces;
- the job then follows the slice whose admission runs its pods (started, stopped, finished
  by the job reconciler as any job), and the pods beyond what that slice grants stay behind
  the `kueue.x-k8s.io/elastic-job` scheduling gate (Kueue's elastic job ungater).

An elastic RayJob or RayService carries Kueue's annotations of the RayCluster KubeRay made for
it (its podSets' counts, the cluster's generation), and that generation names its slices; one
that autoscales (core/jobframework/ray.py) is scaled through that cluster, its counts read
from it. A change of that cluster enqueues the job (its view names its parent); where
RayClusters are not watched, the job is looked at every POD_WAIT instead.
"""

from __future__ import annotations

import logging
from typing import Any

from extender.core.api.parse import ManifestError
from extender.core.jobframework import match, ray
from extender.core.jobframework import slices as policy
from extender.core.jobframework.jobs import workload_for
from extender.core.jobframework.workloads import creation_seconds
from extender.kube.api import objects as o
from extender.kube.api.client import ApiError
from extender.kube.api.resources import PODS, WORKLOADS, Resource
from extender.kube.api.trim import JobView
from extender.kube.controller.context import Context
from extender.kube.controller.workload_status import patch_status, record, write_workload

log = logging.getLogger("tower.slices")

Obj = dict[str, Any]
POD_WAIT = 2.0  # seconds between looks at an elastic job whose admitted pods are not all there

# How each elastic kind's pods are found (the labels their controllers put on them).
_POD_SELECTORS = {
    "batch/job": lambda job: f"batch.kubernetes.io/controller-uid={job.uid}",
    "ray.io/raycluster": lambda job: f"ray.io/cluster={job.name}",
    "ray.io/rayjob": lambda job: (
        f"ray.io/originated-from-crd=RayJob,ray.io/originated-from-cr-name={job.name}"
    ),
    "ray.io/rayservice": lambda job: (
        f"ray.io/originated-from-crd=RayService,ray.io/originated-from-cr-name={job.name}"
    ),
}
RAY_CLUSTERS = Resource("ray.io", "v1", "rayclusters", "RayCluster", True)


class _Live:
    """A job as the API server has it now, with its counts (from its cluster, for a Ray job
    that follows one)."""

    def __init__(self, obj: Obj, counts: policy.Counts | None) -> None:
        self.obj = obj
        self.counts = counts


class ElasticJobs:
    """The slices of elastic jobs, for the job reconciler."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def applies(self, job: JobView) -> bool:
        """An elastic job, as Kueue tells one: its kind may be, it asks, the gate is on."""
        if job.prebuilt is not None or job.adapter.framework not in policy.FRAMEWORKS:
            return False
        asked = dict(job.annotations).get(policy.ELASTIC_JOB) == "true"
        return asked and self.ctx.settings.feature_gates.get(policy.GATE, True)

    def follow(self, job: JobView) -> tuple[str, Obj | None, bool] | float | None:
        """The slice the job follows now (key, object) and whether its counts are a slice's
        business (False: its podSets changed otherwise, and it is handled as any job); or
        the seconds until it is looked at again, or None, when a slice was just written."""
        ctx = self.ctx
        owned = ctx.store.by_index(WORKLOADS, "owner", f"{job.kind}/{job.key}")
        objects: dict[str, Obj] = {}
        for key in owned:
            obj = ctx.store.get(WORKLOADS, key)
            gone = not isinstance(obj, dict) or (obj.get("metadata") or {}).get("deletionTimestamp")
            if not gone and isinstance(obj, dict) and not policy.finished(obj):
                objects[key] = obj
        chain = policy.chain([policy.slice_of(w) for w in objects.values()], job.uid)
        for stale, reason, message in chain.finish:
            self._finish(stale.key, objects[stale.key], reason, message)
        followed = chain.active or chain.selected
        if job.finished is not None:
            return (followed.key, objects[followed.key], False) if followed else None
        live = self._live(job) if job.adapter.framework in ray.CLUSTER_FOLLOWERS else None
        if chain.selected is None:
            self._create(job, None, live)
            return None
        selected = objects[chain.selected.key]
        by_cluster = live is not None and live.counts is not None
        if not by_cluster and (
            job.shape_key is None or job.shape_key in match.workload_keys(selected)
        ):
            return self._following(job, followed.key if followed else chain.selected.key, objects)
        counts = self._counts(job, selected, live)
        if counts is None:  # its podSets are others now: stopped and queued as any job
            assert followed is not None
            return followed.key, objects[followed.key], False
        decision = policy.decide(counts, chain.selected)
        if decision == policy.UPDATE:
            self._update(job, chain.selected, selected, dict(counts))
        elif decision == policy.SCALE_UP:
            self._create(job, chain.selected, live)
        return self._following(job, followed.key if followed else chain.selected.key, objects)

    def _following(
        self, job: JobView, key: str, objects: dict[str, Obj]
    ) -> tuple[str, Obj | None, bool]:
        return key, self.ctx.store.get(WORKLOADS, key) or objects.get(key), True

    def _counts(self, job: JobView, selected: Obj, live: _Live | None) -> policy.Counts | None:
        """The job's podSet counts as the API server has it now (the cache keeps only their
        key; a Ray job that follows its cluster, the cluster's); None when its podSets differ
        from the slice's otherwise than in counts."""
        namespace, name = job.key.split("/", 1)
        try:
            fresh = live.obj if live else self.ctx.client.get(job.resource, name, namespace)
            templates = job.adapter.pod_sets(fresh)
        except (ApiError, ManifestError):
            return None
        shapes = match.job_shapes(templates)
        declared = match.workload_shapes(selected)
        if [s.name for s in shapes] != [s.name for s in declared] or any(
            now.resources != was.resources for now, was in zip(shapes, declared, strict=True)
        ):
            return None
        if live is not None and live.counts is not None:
            return live.counts
        return tuple((s.name, s.count) for s in shapes)

    def _live(self, job: JobView) -> _Live | None:
        """An elastic RayJob or RayService as it is now, with Kueue's annotations of its
        cluster written on it (its podSets' counts, the cluster's generation); with the
        cluster's counts if it autoscales (None: it is gone, or its cluster names a group it
        does not have)."""
        ctx = self.ctx
        namespace, name = job.key.split("/", 1)
        framework = job.adapter.framework
        cluster: Obj = {}
        try:
            fresh = ctx.client.get(job.resource, name, namespace)
            counts = tuple((p.name, p.count) for p in job.adapter.pod_sets(fresh))
            cluster_name = ray.its_cluster(framework, fresh)
            if cluster_name:
                try:
                    cluster = ctx.client.get(RAY_CLUSTERS, cluster_name, namespace)
                except ApiError as err:
                    if not err.not_found:
                        raise
            follows = ray.follows_its_cluster(framework, fresh)
            if follows and cluster:
                counts = tuple(ray.cluster_counts(counts, cluster, f"{job.kind} {job.key}"))
        except ManifestError as err:
            if ctx.told.first(f"invalid:{job.uid}", err.message):
                ctx.event(job.as_object(), "Warning", "InvalidSpec", f"{err.path}: {err.message}")
            return None
        except ApiError as err:
            if err.not_found:
                return None
            raise
        generation = (cluster.get("metadata") or {}).get("generation")
        wanted = {
            ray.REPLICA_SIZES: ray.replica_sizes(counts),
            ray.CLUSTER_GENERATION: str(generation) if isinstance(generation, int) else "",
        }
        meta = fresh.setdefault("metadata", {})
        annotations = meta.get("annotations") or {}
        if any(annotations.get(k) != v for k, v in wanted.items()):
            patch = {"metadata": {"annotations": wanted,
                                  "resourceVersion": meta.get("resourceVersion")}}  # fmt: skip
            try:
                fresh = ctx.write(
                    job.resource, "patch",
                    lambda: ctx.client.patch(job.resource, name, patch, namespace), job.key,
                )  # fmt: skip
            except ApiError as err:
                if err.conflict or err.not_found:
                    return None  # it moved meanwhile: looked at again
                raise
        return _Live(fresh, counts if follows else None)

    def _update(self, job: JobView, chosen: policy.Slice, obj: Obj, counts: dict[str, int]) -> None:
        """A slice without quota follows its job's counts; an admitted one scaled down holds
        only the new counts' quota from now on (Kueue's ApplyPodSetCounts)."""
        ctx = self.ctx
        pod_sets = policy.with_counts((obj.get("spec") or {}).get("podSets") or [], counts)
        written = write_workload(
            ctx, chosen.key, o.conditional({"spec": {"podSets": pod_sets}}, obj), "patch-podsets"
        )
        if written is None:
            return  # it moved meanwhile: looked at again
        ctx.queues.workloads.add(chosen.key)
        what = ", ".join(f"{n}: {c}" for n, c in counts.items())
        if chosen.holds_quota:  # its reconcile counts the quota of the new counts
            message = f"Scaled down in place to {what}: the quota of the pods let go is free"
        else:
            message = f"Updated not matching Workload for suspended job: {chosen.key}"
        log.info("%s %s: slice %s: %s", job.kind, job.key, chosen.key, message)
        ctx.event(job.as_object(), "Normal", "UpdatedWorkload", message)

    def _create(
        self, job: JobView, replaces: policy.Slice | None, live: _Live | None = None
    ) -> None:
        """A slice for the job as it is now: its first, or the scale-up of `replaces`, named
        as Kueue names slices (with the job's generation) and annotated as Kueue does."""
        ctx = self.ctx
        namespace, name = job.key.split("/", 1)
        fresh = live.obj if live else ctx.client.get(job.resource, name, namespace)
        fresh.setdefault("kind", job.kind)
        fresh.setdefault("apiVersion", job.adapter.api_version)
        meta = fresh.get("metadata") or {}
        try:
            model = workload_for(
                fresh,
                adapter=job.adapter,
                uid=job.uid,
                creation_time=creation_seconds(meta.get("creationTimestamp")),
                workload_priority_classes=ctx.state.workload_priority_classes(),
                priority_classes=ctx.state.priority_classes(),
            )
        except ManifestError as err:
            if ctx.told.first(f"invalid:{job.uid}", err.message):
                ctx.event(job.as_object(), "Warning", "InvalidSpec", f"{err.path}: {err.message}")
            return
        body = o.workload_manifest(fresh, model)
        generation: int | str = meta.get("generation") or 1
        if live is not None:  # a Ray job: named with its cluster's generation too
            generation = ray.name_extra(fresh)
        if live is not None and live.counts is not None:  # its cluster's counts
            spec = body["spec"]
            spec["podSets"] = policy.with_counts(spec["podSets"], dict(live.counts))
        slice_name = policy.slice_name(job.kind, job.adapter.group, name, job.uid, generation)
        body["metadata"]["name"] = slice_name
        annotations = body["metadata"].setdefault("annotations", {})
        annotations[policy.ELASTIC_JOB] = "true"
        annotations[policy.SLICE_NAME] = replaces.origin if replaces else slice_name
        if replaces is not None:
            annotations[policy.REPLACEMENT_FOR] = replaces.key
        key = f"{namespace}/{slice_name}"
        try:
            created = ctx.write(
                WORKLOADS, "create", lambda: ctx.client.create(WORKLOADS, body, namespace), key
            )
        except ApiError as err:
            if err.already_exists:
                ctx.refresh(WORKLOADS, key)
                ctx.queues.workloads.add(key)
                return
            raise
        record(ctx, created)
        ctx.queues.workloads.add(key)
        if replaces is None:
            message = f"Created Workload: {key}"
        else:
            message = (
                f"Created Workload: {key}, a slice that replaces {replaces.key} once admitted "
                f"(scaled up: {', '.join(f'{n}: {c}' for n, c in model_counts(body))})"
            )
        log.info("%s %s: %s", job.kind, job.key, message)
        ctx.event(job.as_object(), "Normal", "CreatedWorkload", message)

    def _finish(self, key: str, obj: Obj, reason: str, message: str) -> None:
        """A slice replaced or out of sync: Finished with Kueue's reason; the core forgets it
        (a replaced slice's quota is its replacement's already)."""
        ctx = self.ctx
        patch = o.conditional(o.finish_patch(obj, reason, message, ctx.clock()), obj)
        try:
            answer = patch_status(ctx, key, patch, "finish")
        except ApiError as err:
            if err.conflict:
                ctx.refresh(WORKLOADS, key)
                ctx.queues.workloads.add(key)
                return
            if err.not_found:
                return
            raise
        if answer is None:
            return
        ctx.state.scheduler.slices.settled(key)
        ctx.queues.workloads.add(key)
        ctx.story(key, "Normal", reason, message)
        admission = o.admission_of(obj)
        if reason == policy.REPLACED and admission is not None:
            ctx.metrics.slice_replaced(admission.cluster_queue)  # Kueue's replaced slices

    def ungate(self, job: JobView, workload: Obj) -> float | None:
        """Its pods behind the elastic gate let through, as many per podSet as its admitted
        slice counts (Kueue's ungater); the seconds until it is looked at again while pods
        it was granted are still to come."""
        if not o.is_true(workload, o.ADMITTED) or o.is_true(workload, o.EVICTED):
            return None
        selector = _POD_SELECTORS.get(job.adapter.framework)
        if selector is None:
            return None
        ctx = self.ctx
        pods = ctx.client.list(PODS, job.namespace, label_selector=selector(job))[0]
        running = [p for p in pods if _running(p)]
        granted = dict(policy.counts_of(workload))
        rows = [
            (
                str(p["metadata"]["name"]),
                str(((p["metadata"].get("labels") or {}).get(o.PODSET_LABEL)) or "main"),
                policy.gated(p),
            )
            for p in running
        ]
        by_name = {str(p["metadata"]["name"]): p for p in running}
        for name in policy.to_let_through(rows, granted):
            self._let_through(by_name[name])
        if len(running) < sum(granted.values()):
            return POD_WAIT  # its controller has not made them all yet
        if job.adapter.framework in ray.CLUSTER_FOLLOWERS and not self._clusters_watched():
            return POD_WAIT  # its cluster may scale with no word to the job
        return None

    def _clusters_watched(self) -> bool:
        """RayClusters are watched (their integration is on): a change of a job's cluster
        enqueues the job (loop/watches.py), so nothing needs looking at on a clock."""
        return self.ctx.job_resource_of_kind(RAY_CLUSTERS.kind) is not None

    def _let_through(self, pod: Obj) -> None:
        """One conditional patch: the elastic gate off, the pod's other gates kept."""
        ctx = self.ctx
        meta = pod["metadata"]
        name, namespace = str(meta["name"]), str(meta.get("namespace") or "")
        gates = (pod.get("spec") or {}).get("schedulingGates") or []
        others = [g for g in gates if (g or {}).get("name") != policy.SCHEDULING_GATE]
        patch = {
            "metadata": {"resourceVersion": meta.get("resourceVersion")},
            "spec": {"schedulingGates": others or None},
        }
        try:
            ctx.write(
                PODS,
                "patch",
                lambda: ctx.client.patch(PODS, name, patch, namespace),
                f"{namespace}/{name}",
            )
        except ApiError as err:
            if err.conflict or err.not_found:
                return  # it changed or went: the job's next look takes it as it is
            raise


def _running(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")


def model_counts(workload: Obj) -> policy.Counts:
    return policy.counts_of(workload)
