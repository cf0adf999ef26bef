"""The controller: watch, decide with the core, write admissions, evictions and status.

One thread owns the state: watch events arrive on a queue, are applied to the core's
ClusterState, scheduling cycles run on it, and the decisions are written — an admission is
assumed first, then written (Workload status, then one Job patch), and a failed write rolls
the assumption back. The Workload's status is the durable record: after a restart the state
is rebuilt from it before the first cycle, so nothing is admitted twice.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from extender.core import parse
from extender.core.cycle import (
    INADMISSIBLE,
    Admit,
    ClusterState,
    CycleResult,
    Evict,
    PendingStatus,
)
from extender.core.jobs import (
    JOB_GROUP,
    JOBSET_GROUP,
    resolve_priority,
    workload_for,
    workload_name,
)
from extender.core.models import (
    Admission,
    PriorityClass,
    ResourceFlavor,
    WorkloadPriorityClass,
)
from extender.core.models import Workload as WorkloadModel
from extender.core.parse import ManifestError
from extender.core.quantity import MILLI_RESOURCES
from extender.core.workloads import creation_seconds
from extender.core.workloads import workload as parse_workload
from extender.kube import objects as o
from extender.kube.client import ApiError, KubeClient, RequestBudget
from extender.kube.events import Recorder
from extender.kube.informer import Informer
from extender.kube.metrics import Metrics
from extender.kube.resources import (
    CLUSTER_QUEUES,
    COHORTS,
    JOBS,
    JOBSETS,
    LOCAL_QUEUES,
    NAMESPACES,
    PRIORITY_CLASSES,
    RESOURCE_FLAVORS,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
    Resource,
    object_key,
)
from extender.kube.status import (
    cluster_queue_status,
    cluster_queue_usage,
    local_queue_status,
    queue_counts,
)

log = logging.getLogger("tower.controller")

Obj = dict[str, Any]

CONFIG = (
    RESOURCE_FLAVORS,
    CLUSTER_QUEUES,
    COHORTS,
    LOCAL_QUEUES,
    WORKLOAD_PRIORITY_CLASSES,
    PRIORITY_CLASSES,
    NAMESPACES,
)

# Kinds whose listing is applied in one ClusterState.configure call: (argument, parser).
_BATCHED: dict[str, tuple[str, Callable[[Obj], Any]]] = {
    RESOURCE_FLAVORS.plural: ("flavors", parse.resource_flavor),
    CLUSTER_QUEUES.plural: ("cluster_queues", parse.cluster_queue),
    COHORTS.plural: ("cohorts", parse.cohort),
    LOCAL_QUEUES.plural: ("local_queues", parse.local_queue),
    NAMESPACES.plural: ("namespaces", parse.namespace),
}

# Cycles at one instant stop once nothing moves (the simulator uses the same bound).
MAX_CYCLES = 1000


@dataclass(frozen=True, slots=True)
class Settings:
    """What an admin may tune (flags of `python -m extender run`)."""

    fair_sharing: bool = False
    status_interval: float = 1.0  # at most one status write per queue per interval...
    status_max_age: float = 60.0  # ...and one at least this often even when the budget is busy
    pending_status_qps: float = 5.0  # QuotaReserved=False messages, with spare budget only
    resync_period: float = 10.0  # repair after failed writes (see Controller._resync)
    watch_timeout: int = 300
    create_batch: int = 10  # Workloads created per loop turn, between scheduling rounds


@dataclass(slots=True)
class _Eviction:
    reason: str
    message: str


class Controller:
    """Owns the ClusterState; `run()` is the loop a leader runs until `stop` is set."""

    def __init__(
        self,
        client: KubeClient,
        *,
        settings: Settings | None = None,
        clock: Callable[[], float] = time.time,
        metrics: Metrics | None = None,
        recorder: Recorder | None = None,
    ) -> None:
        self.client = client
        settings = settings or Settings()
        self.settings = settings
        self.clock = clock
        self.metrics = metrics or Metrics()
        self.recorder = recorder
        self.state = ClusterState(fair_sharing=settings.fair_sharing)
        self.cache: dict[str, dict[str, Obj]] = {}
        self.events: queue.Queue[tuple[Resource, str, Any]] = queue.Queue()
        self.informers: list[Informer] = []
        self.ready = threading.Event()
        self.job_resources: list[Resource] = [JOBS]
        self.wpcs: dict[str, WorkloadPriorityClass] = {}
        self.pcs: dict[str, PriorityClass] = {}
        self.job_of: dict[str, tuple[Resource, str]] = {}  # workload key -> its Job's key
        self.evicting: dict[str, _Eviction] = {}
        self._pending_dirty: dict[str, PendingStatus] = {}
        self._pending_written: dict[str, PendingStatus] = {}
        self._pending_told: dict[str, str] = {}  # the reason last told in an Event
        self._pending_budget = RequestBudget(settings.pending_status_qps, 10, clock=time.monotonic)
        self._status_written: dict[str, tuple[Obj, float]] = {}
        self._status_share = RequestBudget(
            max(0.2, client.budget.qps * 0.01), 5, clock=time.monotonic
        )
        self._last_status = 0.0
        self._last_resync = time.monotonic()
        self._dirty = False
        self._creating: set[str] = set()
        self._failed_config: set[str] = set()
        self._write_failures = 0
        self._handlers = self._config_handlers()
        self._to_create: dict[str, tuple[Resource, str]] = {}
        self._create_order: list[tuple[int, int, str]] = []
        self._seq = itertools.count()

    # ----- watching ---------------------------------------------------------------------

    def sink(self, resource: Resource, kind: str, payload: Any) -> None:
        self.events.put((resource, kind, payload))

    def _watch(self, resource: Resource, stop: threading.Event) -> Informer:
        informer = Informer(
            self.client,
            resource,
            self.sink,
            stop=stop,
            timeout_seconds=self.settings.watch_timeout,
        )
        self.informers.append(informer)
        informer.start()
        return informer

    def rebuild(self, stop: threading.Event) -> bool:
        """Start the watches in order and apply each kind once synced: configuration, then
        Workloads (admitted ones hold quota again), then Jobs. False if stopped first."""
        if self.client.discover(JOBSETS.api_version):
            self.job_resources.append(JOBSETS)
            log.info("JobSet CRD found: JobSets are managed")
        for phase in (CONFIG, (WORKLOADS,), tuple(self.job_resources)):
            started = [self._watch(resource, stop) for resource in phase]
            while not all(i.synced.is_set() for i in started):
                if stop.wait(0.02):
                    return False
            self._drain(0)
        self._collect_orphans()
        return True

    def _collect_orphans(self) -> None:
        """Workloads whose Job is gone hold no quota: delete them (Kueue's finalizer does)."""
        watched = {r.plural for r in self.job_resources}
        for key, (resource, job_key) in list(self.job_of.items()):
            plural = resource.plural
            if plural in watched and job_key not in self.cache.get(plural, {}):
                self._delete_workload(key)

    def _delete_workload(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        try:
            self._write(WORKLOADS, "delete", lambda: self.client.delete(WORKLOADS, name, namespace))
        except ApiError as err:
            if not err.not_found:
                log.warning("Workload %s not deleted: %s", key, err)
                return
        self._apply(
            WORKLOADS,
            "DELETED",
            self.cache.get("workloads", {}).get(key)
            or {"metadata": {"namespace": namespace, "name": name}},
        )

    # ----- the loop -----------------------------------------------------------------------

    def run(self, stop: threading.Event, *, lost: threading.Event | None = None) -> None:
        """Wait for the caches, rebuild, then decide and write until stopped."""
        if not self.rebuild(stop):
            return
        self.ready.set()
        log.info(
            "caches synced: %d workloads, %d admitted",
            len(self.state.workloads),
            len(self.state.admitted),
        )
        while not stop.is_set() and not (lost is not None and lost.is_set()):
            self.step(0.05)

    def step(self, wait: float) -> None:
        """Apply what arrived, run cycles while anything moves, write, refresh status."""
        self._drain(wait if not self._dirty else 0)
        if self._dirty:
            self._dirty = False
            self._schedule()
        self._create_workloads(self.settings.create_batch)
        self._flush_pending()
        self._write_queue_status()
        if time.monotonic() - self._last_resync > self.settings.resync_period:
            self._last_resync = time.monotonic()
            self._resync()

    def _drain(self, wait: float) -> None:
        try:
            first = self.events.get(timeout=wait) if wait > 0 else self.events.get_nowait()
        except queue.Empty:
            return
        self._apply(*first)
        while True:
            try:
                item = self.events.get_nowait()
            except queue.Empty:
                return
            self._apply(*item)

    def _schedule(self) -> None:
        for _ in range(MAX_CYCLES):
            started = time.perf_counter()
            result = self.state.schedule(self.clock())
            elapsed = time.perf_counter() - started
            outcome = "success" if result.admitted else "inadmissible"
            if result.heads:
                self.metrics.attempt_duration.labels(outcome).observe(elapsed)
                self.metrics.attempts_total.labels(outcome).inc()
            failures = self._write_failures
            self._write_decisions(result)
            # Writes wait on the budget; take in what happened meanwhile (finished workloads
            # free quota) so the next cycle does not preempt for quota that is already free.
            self._drain(0)
            if not result.progressed or self._write_failures != failures:
                # After a refused write, take in the watch events before deciding again.
                self._dirty = self._dirty or self._write_failures != failures
                return

    # ----- events -> state ----------------------------------------------------------------

    def _apply(self, resource: Resource, kind: str, payload: Any) -> None:
        cache = self.cache.setdefault(resource.plural, {})
        if kind == "SYNC":
            seen = {object_key(obj): obj for obj in payload}
            for key in [k for k in cache if k not in seen]:
                self._apply(resource, "DELETED", cache[key])
            for obj in payload:
                obj.setdefault("kind", resource.kind)
                obj.setdefault("apiVersion", resource.api_version)
            if resource.plural in _BATCHED:
                self._configure_all(resource, payload)
                return
            for obj in payload:
                self._apply(resource, "MODIFIED" if object_key(obj) in cache else "ADDED", obj)
            return
        meta = payload.get("metadata") if isinstance(payload, dict) else None
        if (
            not isinstance(meta, dict)
            or not isinstance(meta.get("name"), str)
            or (resource.namespaced and not isinstance(meta.get("namespace"), str))
        ):
            log.warning("%s event without a name or namespace ignored", resource.kind)
            return
        key = object_key(payload)
        if kind == "DELETED":
            cache.pop(key, None)
        else:
            newer = _rv(cache[key]) if key in cache else None
            version = _rv(payload)
            if newer is not None and version is not None and version < newer:
                # Our own write already returned a later version (which includes this one,
                # since every status write is conditional on the version it was based on).
                return
            cache[key] = payload
        self._dirty = True
        try:
            if resource in CONFIG:
                self._config(resource, kind, key, payload)
                self._remark_inadmissible()
            elif resource is WORKLOADS:
                self._workload(kind, key, payload)
            else:
                self._job(resource, kind, key, payload)
        except ApiError as err:
            log.warning("%s %s: %s", resource.kind, key, err)

    def _config_handlers(self) -> dict[str, tuple[Callable[[Obj], None], Callable[[str], object]]]:
        """(apply, delete) per configuration resource."""
        state = self.state

        def forget_status(prefix: str, delete: Callable[[str], None]) -> Callable[[str], None]:
            def run(key: str) -> None:
                delete(key)
                self._status_written.pop(f"{prefix}:{key}", None)

            return run

        def set_wpc(obj: Obj) -> None:
            self.wpcs[object_key(obj)] = parse.workload_priority_class(obj)

        def set_pc(obj: Obj) -> None:
            self.pcs[object_key(obj)] = parse.priority_class(obj)

        return {
            RESOURCE_FLAVORS.plural: (
                lambda obj: state.apply_flavor(parse.resource_flavor(obj)),
                state.delete_flavor,
            ),
            CLUSTER_QUEUES.plural: (
                lambda obj: state.apply_cluster_queue(parse.cluster_queue(obj)),
                forget_status("cq", state.delete_cluster_queue),
            ),
            COHORTS.plural: (
                lambda obj: state.apply_cohort(parse.cohort(obj)),
                state.delete_cohort,
            ),
            LOCAL_QUEUES.plural: (
                lambda obj: state.apply_local_queue(parse.local_queue(obj)),
                forget_status("lq", state.delete_local_queue),
            ),
            WORKLOAD_PRIORITY_CLASSES.plural: (set_wpc, lambda key: self.wpcs.pop(key, None)),
            PRIORITY_CLASSES.plural: (set_pc, lambda key: self.pcs.pop(key, None)),
            # A deleted namespace takes its workloads with it; its labels no longer matter.
            NAMESPACES.plural: (
                lambda obj: state.apply_namespace(parse.namespace(obj)),
                lambda key: None,
            ),
        }

    def _configure_all(self, resource: Resource, objs: list[Obj]) -> None:
        """A listed kind in one step: the quota tree is rebuilt once, not once per object
        (1,000 ClusterQueues sync in a fraction of a second instead of seconds)."""
        argument, parser = _BATCHED[resource.plural]
        cache = self.cache[resource.plural]
        models = []
        for obj in objs:
            key = object_key(obj)
            cache[key] = obj
            try:
                models.append(parser(obj))
                self._failed_config.discard(f"{resource.plural}/{key}")
            except ManifestError as err:
                log.warning("%s %s ignored: %s: %s", resource.kind, key, err.path, err.message)
        self.state.configure(**{argument: models})
        self._remark_inadmissible()
        self._dirty = True

    def _config(self, resource: Resource, kind: str, key: str, obj: Obj) -> None:
        apply, delete = self._handlers[resource.plural]
        try:
            if kind == "DELETED":
                delete(key)
            else:
                apply(obj)
            self._failed_config.discard(f"{resource.plural}/{key}")
        except ManifestError as err:
            ident = f"{resource.plural}/{key}"
            if ident not in self._failed_config:
                self._failed_config.add(ident)
                log.warning("%s %s ignored: %s: %s", resource.kind, key, err.path, err.message)

    def _workload(self, kind: str, key: str, obj: Obj) -> None:
        state = self.state
        if kind == "DELETED":
            state.delete_workload(key)
            self._creating.discard(key)
            self.evicting.pop(key, None)
            self.job_of.pop(key, None)
            self._forget_pending(key)
            return
        try:
            model = parse_workload(obj)
        except ManifestError as err:
            log.warning("Workload %s ignored: %s: %s", key, err.path, err.message)
            return
        owned = False
        for owner in obj["metadata"].get("ownerReferences") or []:
            if owner.get("controller") and owner.get("kind") in ("Job", "JobSet"):
                owner_resource = JOBS if owner["kind"] == "Job" else JOBSETS
                self.job_of[key] = (owner_resource, f"{model.namespace}/{owner.get('name')}")
                owned = True
        labels = obj["metadata"].get("labels") or {}
        if not owned and labels.get(o.JOB_UID_LABEL) and not o.is_true(obj, o.FINISHED):
            # Made for a Job that was deleted with propagation Orphan: nothing will run it.
            state.finish(key)
            self._write_status(
                key,
                o.finish_patch(
                    obj, "OwnerNotFound", "The Job of this Workload was deleted", self.clock()
                ),
                "finish",
            )
            return
        if (obj.get("spec") or {}).get("active") is False and not o.is_true(obj, o.FINISHED):
            # Deactivated (spec.active: false): an admitted one is evicted and its Job
            # stopped, as Kueue does; a pending one simply leaves the queue.
            holder = state.admitted.get(key)
            if holder is not None and key not in self.evicting:
                if not holder.evicting:
                    holder.evicting = True
                    self._evict(Evict(model, "Deactivated", None, "The workload is deactivated"))
                return
            if holder is None:
                state.delete_workload(key)
                self._forget_pending(key)
            return
        if o.is_true(obj, o.FINISHED):
            if key in state.workloads or key in state.admitted:
                state.finish(key)
            self.evicting.pop(key, None)
            self._forget_pending(key)
            return
        admission = o.admission_of(obj) if o.is_true(obj, o.QUOTA_RESERVED) else None
        if admission is not None:
            if key not in state.admitted:
                if admission.cluster_queue not in state.tree.cluster_queues:
                    log.warning(
                        "Workload %s holds quota in unknown ClusterQueue %s",
                        key,
                        admission.cluster_queue,
                    )
                    return
                state.assume(model, admission, self.clock())
            self._forget_pending(key)
            if o.is_true(obj, o.EVICTED) and key not in self.evicting:
                # An eviction written before a restart: finish it.
                reason = str((o.condition(obj, o.EVICTED) or {}).get("reason", "Preempted"))
                state.admitted[key].evicting = True
                self.evicting[key] = _Eviction(reason, f"Evicted: {reason}")
                self._continue_eviction(key)
            return
        if key in state.admitted:
            state.release(key)
        if state.workloads.get(key) != model:
            state.add_workload(model)
            self._mark_if_inadmissible(key)

    def _job(self, resource: Resource, kind: str, key: str, job: Obj) -> None:
        if kind == "DELETED":
            # Quota is released now, not when the garbage collector gets to the Workload
            # (and a Job deleted with propagation Orphan leaves its Workload behind).
            wl_key = self._workload_key(resource, job)
            if self.job_of.get(wl_key) == (resource, key):
                self._delete_workload(wl_key)
            return
        if o.job_queue_name(job) is None:
            return
        meta = job["metadata"]
        for owner in meta.get("ownerReferences") or []:
            if owner.get("controller") and owner.get("kind") == "JobSet":
                return  # the JobSet is queued, not its child Jobs
        wl_key = self._workload_key(resource, job)
        self.job_of[wl_key] = (resource, key)
        workload_obj = self.cache.get("workloads", {}).get(wl_key)
        finished, reason, message = o.is_finished(job)
        if finished:
            if workload_obj is not None and not o.is_true(workload_obj, o.FINISHED):
                self.state.finish(wl_key)
                self._write_status(
                    wl_key, o.finish_patch(workload_obj, reason, message, self.clock()), "finish"
                )
                self._story(wl_key, "Normal", "Finished", f"Workload finished: {message}")
            return
        if workload_obj is None and wl_key not in self._to_create:
            # Created from the loop in small batches, so that a thousand new Jobs do not hold
            # back the admission of workloads already queued (they share one budget).
            self._to_create[wl_key] = (resource, key)
            heapq.heappush(self._create_order, (-self._priority_of(job), next(self._seq), wl_key))
        admitted = wl_key in self.state.admitted
        holder = self.state.admitted.get(wl_key)
        if not o.is_suspended(job):
            if not admitted:
                # Backstop: a queued Job runs without an admission (webhook down or bypassed).
                log.info("Job %s runs without an admission: suspending it", key)
                self._stop_job(resource, job, workload_obj)
                self._event(
                    job,
                    "Warning",
                    "Suspended",
                    "Suspended by Tower: the Job was not admitted by its queue yet",
                )
            return
        if wl_key in self.evicting:
            if not o.is_active(job):
                self._requeue(wl_key)
            return
        if (
            admitted
            and holder is not None
            and not holder.evicting
            and workload_obj is not None
            and o.admission_of(workload_obj) is not None
        ):
            # (An event older than our own start patch never gets here: _apply drops events
            # older than the cached answer of our write.)
            self._start_job(resource, job, holder.admission, holder.workload)

    @staticmethod
    def _workload_key(resource: Resource, job: Obj) -> str:
        meta = job["metadata"]
        group = JOBSET_GROUP if resource is JOBSETS else JOB_GROUP
        name = workload_name(resource.kind, group, meta["name"], meta.get("uid", ""))
        return f"{meta['namespace']}/{name}"

    # ----- writes --------------------------------------------------------------------------

    def _priority_of(self, job: Obj) -> int:
        try:
            labels = (job.get("metadata") or {}).get("labels") or {}
            pod = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
            return resolve_priority(labels, pod.get("priorityClassName"), self.wpcs, self.pcs)[0]
        except (ManifestError, AttributeError):
            return 0

    def _create_workloads(self, limit: int) -> None:
        """Create the waiting Workloads, highest priority first (so urgent Jobs queue first)."""
        created = 0
        while self._create_order and created < limit:
            _, _, wl_key = heapq.heappop(self._create_order)
            entry = self._to_create.pop(wl_key, None)
            if entry is None:
                continue
            created += 1
            resource, job_key = entry
            job = self.cache.get(resource.plural, {}).get(job_key)
            if job is None or wl_key in self.cache.get("workloads", {}):
                continue
            if o.is_finished(job)[0]:
                continue
            self._create_workload(resource, wl_key, job)

    def _create_workload(self, resource: Resource, wl_key: str, job: Obj) -> None:
        if wl_key in self._creating:
            return
        meta = job["metadata"]
        try:
            model = workload_for(
                job,
                uid=str(meta.get("uid", "")),
                creation_time=creation_seconds(meta.get("creationTimestamp")),
                workload_priority_classes=self.wpcs,
                priority_classes=self.pcs,
            )
        except ManifestError as err:
            log.warning(
                "%s %s/%s cannot be queued: %s: %s",
                resource.kind,
                meta.get("namespace"),
                meta.get("name"),
                err.path,
                err.message,
            )
            self._event(job, "Warning", "InvalidSpec", f"{err.path}: {err.message}")
            return
        body = o.workload_manifest(job, model)
        try:
            created = self._write(
                WORKLOADS, "create", lambda: self.client.create(WORKLOADS, body, model.namespace)
            )
        except ApiError as err:
            if err.already_exists:
                self._creating.add(wl_key)  # its watch event is on the way
            return
        self._creating.add(wl_key)
        created.setdefault("kind", WORKLOADS.kind)
        self._apply(WORKLOADS, "ADDED", created)
        self._event(job, "Normal", "CreatedWorkload", f"Created Workload: {wl_key}")

    def _write(self, resource: Resource, verb: str, call: Callable[[], Obj]) -> Obj:
        try:
            result = call()
        except ApiError as err:
            self._write_failures += 1
            self.metrics.write_failures.labels(resource.plural, str(err.status)).inc()
            raise
        self.metrics.api_writes.labels(verb, resource.plural).inc()
        return result

    def _write_status(
        self, wl_key: str, patch: Obj, purpose: str, *, paced: bool = True
    ) -> Obj | None:
        """A Workload status patch, conditional on the cached version (merge patches replace
        whole condition lists, so a blind write could drop someone else's condition)."""
        namespace, name = wl_key.split("/", 1)
        cached = self.cache.get("workloads", {}).get(wl_key)
        if cached is not None:
            patch = {
                **patch,
                "metadata": {"resourceVersion": cached["metadata"]["resourceVersion"]},
            }
        try:
            updated = self._write(
                WORKLOADS,
                f"status-{purpose}",
                lambda: self.client.patch(
                    WORKLOADS, name, patch, namespace, subresource="status", paced=paced
                ),
            )
        except ApiError as err:
            log.info("Workload %s status not written: %s", wl_key, err)
            if err.conflict:
                self._refresh(WORKLOADS, wl_key)
            return None
        updated.setdefault("kind", WORKLOADS.kind)
        self.cache.setdefault("workloads", {})[wl_key] = updated
        return updated

    def _refresh(self, resource: Resource, key: str) -> None:
        """Read one object again after a conflict, instead of waiting for its watch event."""
        namespace, name = key.split("/", 1) if resource.namespaced else (None, key)
        try:
            fresh = self.client.get(resource, name, namespace)
        except ApiError as err:
            if err.not_found:
                gone = self.cache.get(resource.plural, {}).get(key)
                if gone is not None:
                    self._apply(resource, "DELETED", gone)
            return
        fresh.setdefault("kind", resource.kind)
        self._apply(resource, "MODIFIED", fresh)

    def _write_decisions(self, result: CycleResult) -> None:
        for decision in result.admitted:
            self._admit(decision)
        budget = self.client.budget
        for eviction in result.evicted:
            # An eviction waits for its turn in the budget behind the cycle's other writes.
            # Take in what happened meanwhile: a victim that finished, a preemptor that went
            # away or a queue that was resumed costs no write (and no 409 Conflict).
            budget.acquire()
            self._drain(0)
            if not self.state.still_needed(eviction):
                budget.give_back()
                self.state.keep(eviction.workload.key)
                self.metrics.evictions_dropped.inc()
                continue
            self._evict(eviction, paced=False)
        for workload, status in result.pending:
            self._mark_pending(workload.key, status)

    def _admit(self, decision: Admit) -> None:
        key = decision.workload.key
        obj = self.cache.get("workloads", {}).get(key)
        now = self.clock()
        if obj is None:
            self.state.forget(key)
            return
        updated = self._write_status(key, o.admit_patch(obj, decision.admission, now), "admit")
        if updated is None:
            self.state.forget(key)  # the write failed: the workload is pending again
            return
        cq = decision.admission.cluster_queue
        log.info("admitted %s in ClusterQueue %s", key, cq)
        self.metrics.admitted_total.labels(cq).inc()
        created = creation_seconds((obj.get("metadata") or {}).get("creationTimestamp"))
        self.metrics.wait_time.labels(cq).observe(max(0.0, now - created))
        self._forget_pending(key)
        self._story(key, "Normal", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}")
        self._story(key, "Normal", "Admitted", f"Admitted by ClusterQueue {cq}")
        job_ref = self.job_of.get(key)
        if job_ref is None:
            return
        resource, job = self._job_obj(job_ref)
        if job is not None and o.is_suspended(job):
            self._start_job(resource, job, decision.admission, decision.workload)

    def _job_obj(self, ref: tuple[Resource, str]) -> tuple[Resource, Obj | None]:
        resource, key = ref
        return resource, self.cache.get(resource.plural, {}).get(key)

    def _start_job(
        self, resource: Resource, job: Obj, admission: Admission, workload: WorkloadModel
    ) -> None:
        meta = job["metadata"]
        patch = o.start_patch(job, admission, self.state.flavors, workload.queue_name)
        try:
            updated = self._write(
                resource,
                "patch",
                lambda: self.client.patch(resource, meta["name"], patch, meta["namespace"]),
            )
        except ApiError as err:
            # The Workload stays admitted; the resync starts the Job later.
            log.warning(
                "%s %s/%s not started: %s", resource.kind, meta["namespace"], meta["name"], err
            )
            return
        key = f"{meta['namespace']}/{meta['name']}"
        self.cache.setdefault(resource.plural, {})[key] = updated
        self._event(
            updated, "Normal", "Started", f"Admitted by clusterQueue {admission.cluster_queue}"
        )

    def _evict(self, eviction: Evict, *, paced: bool = True) -> None:
        key = eviction.workload.key
        obj = self.cache.get("workloads", {}).get(key)
        holder = self.state.admitted.get(key)
        if obj is None or holder is None:
            return
        now = self.clock()
        patch = o.evict_patch(
            obj, eviction.reason, eviction.preemption_reason, eviction.message, now
        )
        job_ref = self.job_of.get(key)
        if job_ref is None:
            # A Workload no Job owns has nothing to stop: evict and requeue in one write.
            requeue = o.requeue_patch(
                {"status": patch["status"]}, eviction.reason, eviction.message, now
            )
            patch["status"] = requeue["status"]
        updated = self._write_status(key, patch, "evict", paced=paced)
        if updated is None:
            holder.evicting = False
            return
        cq = holder.admission.cluster_queue
        log.info("evicted %s from ClusterQueue %s: %s", key, cq, eviction.message)
        self.metrics.evicted_total.labels(cq, eviction.reason).inc()
        if eviction.preemption_reason:
            self.metrics.preempted_total.labels(cq, eviction.preemption_reason).inc()
        self._story(key, "Normal", eviction.reason, eviction.message)
        if job_ref is None:
            self.state.release(key)
            return
        self.evicting[key] = _Eviction(eviction.reason, eviction.message)
        self._continue_eviction(key)

    def _continue_eviction(self, key: str) -> None:
        """Stop the Job (suspend, clear startTime, restore its template), then requeue."""
        job_ref = self.job_of.get(key)
        workload_obj = self.cache.get("workloads", {}).get(key)
        if job_ref is None:
            self._requeue(key)
            return
        resource, job = self._job_obj(job_ref)
        if job is None:
            return  # the Job is gone: the Workload follows by garbage collection
        job = self._stop_job(resource, job, workload_obj)
        if job is not None and not o.is_active(job):
            self._requeue(key)

    def _stop_job(self, resource: Resource, job: Obj, workload_obj: Obj | None) -> Obj | None:
        meta = job["metadata"]
        name, namespace = meta["name"], meta["namespace"]
        key = f"{namespace}/{name}"
        try:
            if not o.is_suspended(job):
                job = self._write(
                    resource,
                    "patch",
                    lambda: self.client.patch(
                        resource, name, {"spec": {"suspend": True}}, namespace
                    ),
                )
            if (job.get("status") or {}).get("startTime"):
                job = self._write(
                    resource,
                    "patch-status",
                    lambda: self.client.patch(
                        resource,
                        name,
                        {"status": {"startTime": None}},
                        namespace,
                        subresource="status",
                    ),
                )
            if workload_obj is not None:
                restore = o.restore_patch(job, workload_obj)
                if (
                    restore["spec"].get("template")
                    or resource is JOBSETS
                    or (meta.get("annotations") or {}).get(o.CLUSTER_QUEUE_ANNOTATION)
                ):
                    job = self._write(
                        resource,
                        "patch",
                        lambda: self.client.patch(resource, name, restore, namespace),
                    )
        except ApiError as err:
            log.warning("%s %s not stopped yet: %s", resource.kind, key, err)
            return None
        job.setdefault("kind", resource.kind)
        self.cache.setdefault(resource.plural, {})[key] = job
        return job

    def _requeue(self, key: str) -> None:
        eviction = self.evicting.get(key)
        obj = self.cache.get("workloads", {}).get(key)
        if eviction is None or obj is None:
            return
        updated = self._write_status(
            key, o.requeue_patch(obj, eviction.reason, eviction.message, self.clock()), "requeue"
        )
        if updated is None:
            return
        del self.evicting[key]
        if (updated.get("spec") or {}).get("active") is False:
            self.state.delete_workload(key)  # deactivated: not queued again
        else:
            self.state.release(key)
        self._dirty = True

    def _resync(self) -> None:
        """Periodic repair: Jobs without a Workload, admitted Workloads whose Job is still
        suspended, stuck evictions (each after a write that failed)."""
        workloads = self.cache.get("workloads", {})
        for resource in self.job_resources:
            for key, job in list(self.cache.get(resource.plural, {}).items()):
                if o.job_queue_name(job) is None or o.is_finished(job)[0]:
                    continue
                if self._workload_key(resource, job) not in workloads:
                    self._job(resource, "MODIFIED", key, job)
        for key in list(self.evicting):
            self._continue_eviction(key)
        for key, holder in list(self.state.admitted.items()):
            if holder.evicting:
                continue
            job_ref = self.job_of.get(key)
            if job_ref is None:
                continue
            resource, owner = self._job_obj(job_ref)
            if owner is not None and o.is_suspended(owner) and not o.is_finished(owner)[0]:
                self._start_job(resource, owner, holder.admission, holder.workload)

    # ----- status, rate-limited ------------------------------------------------------------

    def _remark_inadmissible(self) -> None:
        for workload, status in self.state.pending():
            if status.reason == INADMISSIBLE:
                self._mark_pending(workload.key, status)

    def _mark_if_inadmissible(self, key: str) -> None:
        """Workloads that never become a head (no LocalQueue, inactive ClusterQueue) are
        told why here; heads are told by the cycle."""
        status = self.state.pending_status(key)
        if status.reason == INADMISSIBLE:
            self._mark_pending(key, status)

    def _mark_pending(self, key: str, status: PendingStatus) -> None:
        if self._pending_told.get(key) != status.reason:
            # Events have their own budget: told at once even when the status write waits.
            self._pending_told[key] = status.reason
            self._story(key, "Normal", "Pending", status.message)
        if self._pending_written.get(key) != status:
            self._pending_dirty[key] = status
        else:
            self._pending_dirty.pop(key, None)

    def _forget_pending(self, key: str) -> None:
        self._pending_told.pop(key, None)
        self._pending_dirty.pop(key, None)
        self._pending_written.pop(key, None)

    def _flush_pending(self) -> None:
        """QuotaReserved=False messages: only with spare budget, so admissions never wait."""
        budget = self.client.budget
        while self._pending_dirty:
            if not self._pending_budget.spare(0) or not budget.spare(
                min(budget.qps, budget.burst / 2)
            ):
                return
            key, status = next(iter(self._pending_dirty.items()))
            del self._pending_dirty[key]
            obj = self.cache.get("workloads", {}).get(key)
            if obj is None or key in self.state.admitted:
                continue
            current = o.condition(obj, o.QUOTA_RESERVED)
            if current and (current.get("reason"), current.get("message")) == (
                status.reason,
                status.message,
            ):
                self._pending_written[key] = status
                continue
            if self._write_status(
                key,
                o.pending_patch(obj, status.reason, status.message, self.clock()),
                "pending",
                paced=False,
            ):
                self._pending_written[key] = status

    def _write_queue_status(self) -> None:
        """ClusterQueue and LocalQueue status: when changed, at most once per interval."""
        now = time.monotonic()
        if now - self._last_status < self.settings.status_interval:
            return
        self._last_status = now
        state = self.state
        counts = queue_counts(state)
        wanted: list[tuple[str, Resource, str, Obj]] = []
        for name in state.cluster_queues:
            used, held = cluster_queue_usage(state, name)
            status = cluster_queue_status(state, name, counts.pending_cq[name], used, held)
            wanted.append((f"cq:{name}", CLUSTER_QUEUES, name, status))
            active, inadmissible = state.pending_in(name)
            self.metrics.pending.labels(name, "active").set(active)
            self.metrics.pending.labels(name, "inadmissible").set(inadmissible)
            self.metrics.reserving.labels(name).set(status["reservingWorkloads"])
            self.metrics.admitted_active.labels(name).set(status["admittedWorkloads"])
            for (flavor, resource_name), quota in state.cluster_queues[name].quotas.items():
                scale = 1000 if resource_name in MILLI_RESOURCES else 1
                labels = (name, flavor, resource_name)
                self.metrics.resource_usage.labels(*labels).set(
                    used.get((flavor, resource_name), 0) / scale
                )
                self.metrics.nominal_quota.labels(*labels).set(quota.nominal / scale)
        for key in state.local_queues:
            status = local_queue_status(
                state,
                key,
                counts.pending_lq[key],
                counts.admitted_lq[key],
                counts.usage_lq.get(key) or Counter(),
            )
            wanted.append((f"lq:{key}", LOCAL_QUEUES, key, status))
        budget = self.client.budget
        for ident, resource, key, status in wanted:
            previous = self._status_written.get(ident)
            if previous is None:
                obj = self.cache.get(resource.plural, {}).get(key)
                current = (obj or {}).get("status") or {}
                if _same_status(current, status):
                    self._status_written[ident] = (status, now)
                    continue
            elif _same_status(previous[0], status):
                continue
            stale = previous is None or now - previous[1] > self.settings.status_max_age
            # Uncontended: a second of budget (at most half the burst) stays in reserve. Contended:
            # only a stale status is written, within a 1% share of the budget.
            uncontended = budget.spare(min(budget.qps, budget.burst / 2))
            if not uncontended and not (stale and self._status_share.spare(0)):
                continue
            namespace, name = key.split("/", 1) if resource.namespaced else (None, key)
            body = {
                "status": _with_transition_times(
                    status, self.cache.get(resource.plural, {}).get(key), self.clock()
                )
            }
            try:
                self._write(
                    resource,
                    "patch-status",
                    partial(
                        self.client.patch,
                        resource,
                        name,
                        body,
                        namespace,
                        subresource="status",
                        paced=not uncontended,
                    ),
                )
            except ApiError as err:
                log.debug("%s %s status not written: %s", resource.kind, key, err)
                continue
            self._status_written[ident] = (status, now)

    def _event(self, obj: Obj, kind: str, reason: str, message: str) -> None:
        if self.recorder is not None:
            self.recorder.record(obj, kind, reason, message)

    def _story(self, wl_key: str, kind: str, reason: str, message: str) -> None:
        """An Event on the Workload and on its Job, so `kubectl describe job` tells it too."""
        workload_obj = self.cache.get("workloads", {}).get(wl_key)
        if workload_obj is not None:
            self._event(workload_obj, kind, reason, message)
        ref = self.job_of.get(wl_key)
        if ref is not None:
            _, job = self._job_obj(ref)
            if job is not None:
                self._event(job, kind, reason, message)


def _rv(obj: Obj) -> int | None:
    """resourceVersion as a number (etcd's revision) when it is one; None otherwise."""
    try:
        return int(str((obj.get("metadata") or {}).get("resourceVersion")))
    except (TypeError, ValueError):
        return None


def _same_status(current: Obj, wanted: Obj) -> bool:
    for key, value in wanted.items():
        if key == "conditions":
            have = {
                (c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
                for c in current.get("conditions") or []
            }
            if any((c["type"], c["status"], c["reason"], c["message"]) not in have for c in value):
                return False
        elif current.get(key) != value:
            return False
    return True


def _with_transition_times(status: Obj, obj: Obj | None, now: float) -> Obj:
    out = dict(status)
    old = {c.get("type"): c for c in ((obj or {}).get("status") or {}).get("conditions") or []}
    conditions = []
    for entry in status.get("conditions") or []:
        previous = old.get(entry["type"])
        stamp = (
            previous.get("lastTransitionTime")
            if previous and previous.get("status") == entry["status"]
            else None
        )
        conditions.append({**entry, "lastTransitionTime": stamp or o.rfc3339(now)})
    out["conditions"] = conditions
    return out


__all__ = ["Controller", "ResourceFlavor", "Settings"]
