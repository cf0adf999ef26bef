"""What every reconciler is given: the client, the store, the core's state, the clock,
metrics, Events, settings and the work queues — built once, passed in, never global."""

from __future__ import annotations

import logging
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.core.admission.multikueue import MultiKueueSettings, runs_on_worker
from extender.core.admission.pods_ready import WaitForPodsReady
from extender.core.admission.retention import WorkloadRetention
from extender.core.config.kueue_config import LabelSelector, default_namespace_selector
from extender.core.config.resource_policy import ResourcePolicy
from extender.core.scheduling.admission_fair_sharing import AfsConfig
from extender.core.scheduling.cycle import ClusterState
from extender.core.scheduling.options import SchedulingOptions
from extender.kube.api.client import ApiError, KubeClient, KubeError
from extender.kube.api.events import Recorder
from extender.kube.api.metrics import Metrics
from extender.kube.api.placement import Placement
from extender.kube.api.resources import ADMISSION_CHECKS, WORKLOADS, Resource
from extender.kube.api.store import Store
from extender.kube.api.trim import JobView
from extender.kube.api.workqueue import WorkQueue
from extender.kube.api.writes import ADMIT, Done, WritePool

log = logging.getLogger("tower.controller")

Obj = dict[str, Any]
Ref = tuple[str, str]  # (plural, key): an object of some resource


DEFAULT_MANAGED_NAMESPACES = default_namespace_selector("tower-system")


@dataclass(frozen=True, slots=True)
class Settings:
    """What an admin may tune (flags of `python -m extender run`)."""

    fair_sharing: bool = False
    status_interval: float = 1.0  # at most one status write per queue per interval...
    status_max_age: float = 60.0  # ...and one at least this often even when the budget is busy
    pending_status_qps: float = 5.0  # QuotaReserved=False messages, with spare budget only
    watch_timeout: int = 300
    # Senders of the write pool: writes in flight together besides the loop's own (0: every
    # write is sent by the loop, one at a time).
    write_concurrency: int = 8
    # A start the webhook kept suspended is tried again after this, doubling up to the cap.
    start_refused_retry: float = 30.0
    start_refused_retry_cap: float = 300.0
    # Set on the pods of workloads placed on nodes (a second kube-scheduler with the extender).
    scheduler_name: str | None = None
    # The kinds of job managed, by Kueue's integration names (None: Kueue's default set).
    integrations: tuple[str, ...] | None = None
    # Kueue's waitForPodsReady, from the --config file (None: off, as without a file).
    wait_for_pods_ready: WaitForPodsReady | None = None
    # Kueue's admissionFairSharing, from the --config file (None: off).
    admission_fair_sharing: AfsConfig | None = None
    # Kueue's resources.excludeResourcePrefixes and transformations, from the --config file.
    resource_policy: ResourcePolicy = field(default_factory=ResourcePolicy)
    # Kueue's managedJobsNamespaceSelector: a job in another namespace is left alone, queue
    # label or not (Kueue's ManagedJobsNamespaceSelectorAlwaysRespected, GA in v0.19).
    managed_namespaces: LabelSelector = DEFAULT_MANAGED_NAMESPACES
    # Kueue's multiKueue section, from the --config file; and Tower's own namespace, where
    # the workers' kubeconfig Secrets are.
    multikueue: MultiKueueSettings = field(default_factory=MultiKueueSettings)
    namespace: str = "tower-system"
    # Every Kueue feature gate's value, by Kueue's names (core/config/feature_gates.py), as
    # the Configuration's featureGates and --feature-gates resolve them.
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    # fairSharing.preemptionStrategies and resources.quotaCheckStrategy under those gates.
    scheduling: SchedulingOptions = field(default_factory=SchedulingOptions)
    label_keys_to_copy: tuple[str, ...] = ()  # integrations.labelKeysToCopy
    # Annotation keys a job's Workload is made with (metrics.customLabels of kind Workload).
    annotations_to_copy: tuple[str, ...] = ()
    # Kueue's objectRetentionPolicies.workloads, from the --config file (unset: kept).
    workload_retention: WorkloadRetention = field(default_factory=WorkloadRetention)


@dataclass(slots=True)
class Queues:
    """The controller's work queues: reconcilers tell each other what to look at by adding
    keys here, never through shared flags. One wakeup event lets the loop sleep on all."""

    config: WorkQueue[Ref]
    workloads: WorkQueue[str]
    jobs: WorkQueue[Ref]
    creations: WorkQueue[Ref]  # jobs whose Workload must be created, by priority
    pending: WorkQueue[str]  # QuotaReserved=False reasons to write, with spare budget
    status: WorkQueue[str]  # "cq:NAME" / "lq:NS/NAME" whose status may have changed
    schedule: WorkQueue[str]  # CYCLE when the state changed: a scheduling cycle is due
    checks: WorkQueue[Ref]  # ("check", name) / ("workload", key): Tower's own check controller
    groups: WorkQueue[str]  # group Workload keys: a pod group's, a StatefulSet's
    ungate: WorkQueue[str]  # Workloads whose topology-placed pods may wait for their domain


CYCLE = "cycle"  # the one key of Queues.schedule


class Told:
    """A bounded memory of what was last told about each object (so a reason is told once)."""

    def __init__(self, size: int = 50_000) -> None:
        self.size = size
        self._seen: OrderedDict[str, str] = OrderedDict()

    def first(self, key: str, what: str) -> bool:
        """True if `what` was not the last thing told about `key` (and remember it)."""
        if self._seen.get(key) == what:
            self._seen.move_to_end(key)
            return False
        self._seen[key] = what
        self._seen.move_to_end(key)
        while len(self._seen) > self.size:
            self._seen.popitem(last=False)
        return True

    def forget(self, key: str) -> None:
        self._seen.pop(key, None)


@dataclass
class Context:
    """The controller's dependencies and shared bookkeeping (one per term as leader)."""

    client: KubeClient
    store: Store
    state: ClusterState
    queues: Queues
    settings: Settings
    metrics: Metrics
    clock: Callable[[], float] = time.time  # wall time, for timestamps written to the API
    monotonic: Callable[[], float] = time.monotonic  # for waits and rates
    recorder: Recorder | None = None
    username: str | None = None  # who this controller is to the API server (SelfSubjectReview)
    placement: Placement | None = None  # physical fit on nodes, when nodes and pods are watched
    job_resources: tuple[Resource, ...] = ()  # every enabled kind of job
    told: Told = field(default_factory=Told)
    writes: WritePool | None = None  # None: every write is sent on the loop's thread
    jitter: Callable[[], float] = random.random  # in [0, 1), for backoffs

    # ----- writes -----------------------------------------------------------------------

    def write(
        self, resource: Resource, verb: str, call: Callable[[], Obj], key: str | None = None
    ) -> Obj:
        """Run one write now, on this thread, counting it; failures are counted by HTTP
        status and re-raised. With the object's `key`, it goes after the writes to that
        object already submitted (and their answers are taken in first)."""
        if key is not None and self.writes is not None:
            result: Obj = self.writes.run(
                (resource.plural, key), lambda: self._counted(resource, verb, call)
            )
            return result
        return self._counted(resource, verb, call)

    def submit(
        self,
        resource: Resource,
        verb: str,
        key: str,
        call: Callable[[], Obj],
        done: Done,
        *,
        priority: int = ADMIT,
    ) -> None:
        """Send one write in the pool, after the writes to the same object: `done(answer,
        None)` or `done(None, error)` runs on the loop's thread once it is answered."""
        if self.writes is None:
            try:
                answer = self._counted(resource, verb, call)
            except KubeError as err:
                done(None, err)
                return
            done(answer, None)
            return
        self.writes.submit(
            (resource.plural, key),
            lambda: self._counted(resource, verb, call),
            done,
            priority=priority,
        )

    def spare(self, keep: float) -> bool:
        """Take a token of the budget only if more than `keep` would remain after the writes
        already waiting in the pool took theirs (writes that can wait: status, reasons)."""
        queued = self.writes.queued if self.writes is not None else 0
        return self.client.budget.spare(keep + queued)

    def busy(self, plural: str, key: str) -> bool:
        """Whether a write to this object is on its way (its reconcile waits for the answer)."""
        return self.writes is not None and self.writes.busy((plural, key))

    def retry_after_failure(
        self, queue: WorkQueue[Any], key: Any, err: BaseException, what: str
    ) -> None:
        """A write sent in the pool failed: its reconcile is retried with backoff, counted
        and logged (a non-API error is a bug, raised for the pool to log with its traceback)."""
        if not isinstance(err, KubeError):
            raise err
        delay = queue.retry(key, err.retry_after or 0.0)
        self.metrics.reconcile_errors.labels("jobs", "api").inc()
        log.warning("%s: %s (retrying in %.1fs)", what, err, delay)

    def after_writes(self, plural: str, key: str, then: Callable[[], None]) -> None:
        """Run `then` once the writes to this object on their way are answered (now if none)."""
        if self.writes is None:
            then()
        else:
            self.writes.when_idle((plural, key), then)

    def _counted(self, resource: Resource, verb: str, call: Callable[[], Obj]) -> Obj:
        try:
            result = call()
        except ApiError as err:
            self.metrics.write_failures.labels(resource.plural, str(err.status)).inc()
            raise
        except KubeError as err:
            self.metrics.write_failures.labels(resource.plural, err.code).inc()
            raise
        self.metrics.api_writes.labels(verb, resource.plural).inc()
        return result

    def refresh(self, resource: Resource, key: str) -> Any:
        """Read one object again (after a conflict) into the store; None if it is gone."""
        namespace, name = key.split("/", 1) if resource.namespaced else (None, key)
        try:
            fresh = self.client.get(resource, name, namespace)
        except ApiError as err:
            if err.not_found:
                self.store.forget(resource, key)
                return None
            raise
        fresh.setdefault("kind", resource.kind)
        fresh.setdefault("apiVersion", resource.api_version)
        return self.store.record(resource, fresh)

    # ----- what changed ----------------------------------------------------------------

    def touch(self, namespace: str, queue_name: str, cluster_queue: str | None = None) -> None:
        """A workload of this LocalQueue (and ClusterQueue) changed: their status may have,
        and a scheduling cycle is due."""
        lq_key = f"{namespace}/{queue_name}"
        if cluster_queue is None:
            lq = self.state.local_queue(lq_key)
            cluster_queue = lq.cluster_queue if lq is not None else None
        self.touch_queues(local_queues=(lq_key,), cluster_queues=(cluster_queue,))
        self.reschedule()

    def touch_queues(
        self, *, local_queues: Iterable[str] = (), cluster_queues: Iterable[str | None] = ()
    ) -> None:
        """These queues' status may have changed (written at the next status round)."""
        status = self.queues.status
        for key in local_queues:
            status.add(f"lq:{key}")
        for name in cluster_queues:
            if name is not None:
                status.add(f"cq:{name}")

    def reschedule(self) -> None:
        """The state changed: a scheduling cycle is due."""
        self.queues.schedule.add(CYCLE)

    # ----- telling ---------------------------------------------------------------------

    def event(self, obj: Obj, kind: str, reason: str, message: str) -> None:
        if self.recorder is not None:
            self.recorder.record(obj, kind, reason, message)

    def story(self, wl_key: str, kind: str, reason: str, message: str) -> None:
        """An Event on the Workload and on its Job, so `kubectl describe job` tells it too."""
        workload = self.store.get(WORKLOADS, wl_key)
        if workload is None:
            return
        self.event(workload, kind, reason, message)
        job = self.job_of(workload)
        if job is not None:
            self.event(job.as_object(), kind, reason, message)

    # ----- relations -------------------------------------------------------------------

    def runs_on_worker(self, workload: Obj) -> bool:
        """Whether MultiKueue runs this Workload on a worker: a kind without a managedBy (a
        pod) stays gated here, as Kueue's composable jobs do."""

        def controller_of(check: str) -> Any:
            spec = (self.store.get(ADMISSION_CHECKS, check) or {}).get("spec") or {}
            return spec.get("controllerName")

        return runs_on_worker(workload, controller_of)

    def manages_namespace(self, namespace: str) -> bool:
        """Whether jobs of this namespace are Tower's (managedJobsNamespaceSelector)."""
        return self.settings.managed_namespaces.matches(self.state.namespace_labels(namespace))

    def owner_of(self, workload: Obj) -> tuple[Resource, str, str] | None:
        """(resource, job key, uid) of the job of a managed kind that controls a Workload."""
        meta = workload.get("metadata") or {}
        for owner in meta.get("ownerReferences") or []:
            if not owner.get("controller"):
                continue
            resource = self._by_kind.get(owner.get("kind"))
            if resource is not None:
                return resource, f"{meta.get('namespace')}/{owner.get('name')}", owner.get("uid")
        return None

    def __post_init__(self) -> None:
        # owner_of runs on every Workload event: the kinds are looked up, not rebuilt.
        self._by_kind: dict[str, Resource] = {r.kind: r for r in self.job_resources}

    def job_resource_of_kind(self, kind: str) -> Resource | None:
        """The enabled kind of job with this kind name, if any."""
        return self._by_kind.get(kind)

    def job_of(self, workload: Obj) -> JobView | None:
        """The job of a Workload as the store has it (None if none, or another with its name)."""
        owner = self.owner_of(workload)
        if owner is None:
            return None
        resource, key, uid = owner
        job = self.store.get(resource, key)
        if job is None or (uid and job.uid and job.uid != uid):
            return None
        assert isinstance(job, JobView)
        return job
