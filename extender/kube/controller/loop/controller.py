"""The controller for one term as leader: the core's state rebuilt from the cache, the
reconcilers, and the loop that runs them.

Watches only enqueue keys (watches.py); reconcilers tell each other what to look
at by enqueueing keys too (context.Queues). The hot writes (a Workload created, admitted, its
job started) are sent in a bounded pool of senders (api/writes.py) and their answers taken
in on the loop's thread; the others are written by the loop itself, after any write to the
same object still on its way. The loop, on one thread, in order:
1. the answers of writes sent in the pool, then configuration keys, applied in one batch;
2. Workload keys (each mirrored into the core), then job keys (each job created a Workload
   for, finished, started or stopped by the generic job reconciler); a key whose object has
   a write on its way waits for the answer;
3. scheduling cycles while one is due: the core decides on the assumed state, the
   admissions are sent, then each eviction is written after taking in what happened;
4. Workloads created for new jobs, highest priority first, as fast as the pool sends them;
5. pending reasons and queue status, with spare budget only;
then it sleeps until a key is due or an answer comes. A reconcile that fails is retried with
backoff; the loop itself never ends on an error. It ends when stopped, or at once when the
fence says this replica may no longer write: the term's state is then dropped (and the writes
not yet sent with it), and the next term rebuilds it from the cache (the Workloads' status is
the record).
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from extender.core.jobframework.slices import GATE as ELASTIC_GATE
from extender.core.scheduling.cycle import ClusterState
from extender.core.scheduling.scan_progress import GATE as SCAN_PROGRESS_GATE
from extender.core.scheduling.visibility import PendingPositions
from extender.kube.api.cache import Cache
from extender.kube.api.client import KubeClient, KubeError, NotLeaderError
from extender.kube.api.events import Recorder
from extender.kube.api.lease import Fence, Unfenced
from extender.kube.api.metrics import Metrics
from extender.kube.api.resources import (
    ADMISSION_CHECKS,
    CONFIG,
    MULTIKUEUE_CLUSTERS,
    MULTIKUEUE_CONFIGS,
    PROVISIONING_REQUESTS,
    WORKLOADS,
)
from extender.kube.api.trim import workload_key
from extender.kube.api.workqueue import WorkQueue, wait
from extender.kube.api.writes import WritePool
from extender.kube.controller.admission import AdmissionWriter
from extender.kube.controller.config import ConfigReconciler
from extender.kube.controller.context import Context, Queues, Ref, Settings
from extender.kube.controller.job_start import JobStarter
from extender.kube.controller.jobs import JobReconciler
from extender.kube.controller.loop.cycle_writes import CycleWriter
from extender.kube.controller.loop.keys import reconcile_key
from extender.kube.controller.loop.watches import Watches
from extender.kube.controller.multikueue import MultiKueueController
from extender.kube.controller.multikueue.workers import rest_client_factory
from extender.kube.controller.pending import PendingReasons
from extender.kube.controller.pod_groups.reconciler import GroupReconciler
from extender.kube.controller.pods_ready import PodsReadyWatch
from extender.kube.controller.provisioning import ProvisioningController
from extender.kube.controller.queue_status import QueueStatusReconciler
from extender.kube.controller.recording import FinishedLedger
from extender.kube.controller.scheduling import MAX_CYCLES, Scheduler
from extender.kube.controller.topology.ungater import TopologyUngater
from extender.kube.controller.workloads import WorkloadReconciler

log = logging.getLogger("tower.controller")

IDLE = 0.5  # the longest the loop sleeps with nothing due
GC_EVERY = 5.0  # seconds between collections of the young generations, when idle
FULL_GC_EVERY = 60  # ... and every this many of those, a full one (about every 5 minutes)
# Creations waiting in the pool, per sender, before new ones wait in their queue instead (by
# priority): the pool's queue stays short, and a higher-priority job created later goes first.
CREATIONS_PER_SENDER = 4
INLINE_CREATE_BATCH = 10  # without the pool: Workloads created per turn, between cycles


class Controller:
    """Owns the core's state for one term; `run()` is the loop. What a watch enqueues
    (watches.py), how one key is reconciled (keys.py) and how a cycle's decisions are
    written (cycle_writes.py) are its collaborators'; this class keeps the order of it all."""

    def __init__(
        self,
        client: KubeClient,
        cache: Cache,
        *,
        settings: Settings | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        metrics: Metrics | None = None,
        recorder: Recorder | None = None,
        username: str | None = None,
        collect: Callable[[int], object] = gc.collect,
    ) -> None:
        settings = settings or Settings()
        self.cache = cache
        self.monotonic = monotonic
        # The leader runs with automatic garbage collection off (extender/gc_tuning.py): the
        # loop collects when it has nothing due, the young generations every few seconds,
        # everything now and then, so reference cycles never pile up.
        self.collect = collect
        self._collected_at = monotonic()
        self._idle_collections = 0
        self.wakeup = threading.Event()
        self.ctx = ctx = Context(
            client=client,
            store=cache.store,
            state=ClusterState(fair_sharing=settings.fair_sharing, scheduling=settings.scheduling),
            queues=_queues(monotonic, self.wakeup),
            settings=settings,
            metrics=metrics or Metrics(),
            clock=clock,
            monotonic=monotonic,
            recorder=recorder,
            job_resources=cache.job_resources,
            username=username,
            placement=cache.placement,
        )
        ctx.metrics.read_objects_from(cache.store)  # metrics.customLabels' values
        wait = settings.wait_for_pods_ready
        ctx.state.block_admission = wait is not None and wait.block_admission
        ctx.state.configure_fair_sharing(settings.admission_fair_sharing)
        # Kueue's ElasticJobsViaWorkloadSlices: off, a slice's annotation is not read.
        ctx.state.scheduler.workload_slices = settings.feature_gates.get(ELASTIC_GATE, True)
        # Kueue's FlavorFungibilityPreserveScanProgress (scheduling/scan_progress.py).
        ctx.state.scheduler.scan.preserve = settings.feature_gates.get(SCAN_PROGRESS_GATE, True)
        if cache.placement is not None:
            cache.placement.new_term(ctx.state)
        self.admission = AdmissionWriter(ctx)
        self.pending = PendingReasons(ctx)
        self.starter = JobStarter(ctx, admitted_at=self.admission.take_admitted_at)
        ready = PodsReadyWatch(ctx, self.admission)
        finished = FinishedLedger()  # the workloads' reconciler counts, the status rounds read
        self.workloads = WorkloadReconciler(
            ctx,
            self.admission,
            self.pending,
            on_dropped=self.starter.forget,
            ready=ready,
            finished=finished,
        )
        self.jobs = JobReconciler(ctx, self.starter, ready)
        self.groups = GroupReconciler.of_cache(ctx, self.starter, cache, ready)
        self.ungater = TopologyUngater(ctx)
        self.queue_status = QueueStatusReconciler(ctx, finished)
        self.config = ConfigReconciler(
            ctx, on_queue_deleted=self.queue_status.forget, mark_pending=self.pending.mark
        )
        self.scheduler = Scheduler(ctx, monotonic=monotonic)
        self.provisioning = ProvisioningController(
            ctx, served=lambda: cache.serves(PROVISIONING_REQUESTS)
        )
        self._provisioning_served: bool | None = None  # None: not looked at this term
        self.multikueue = _multikueue(ctx, cache, client)
        self.admission.on_written = self.scheduler.written
        self.admission.on_refused = self.scheduler.refused
        self.admission.on_failed = self.scheduler.failed
        self.cycles = CycleWriter(
            ctx, self.admission, self.pending, self.scheduler, take_in=self.take_in
        )
        self.watches = Watches(
            ctx,
            jobs=self.jobs,
            groups=self.groups,
            ungater=self.ungater,
            provisioning=self.provisioning,
            multikueue=self.multikueue,
        )
        self._creations_held = False  # the pool has enough creations queued
        self.ready = threading.Event()
        # The queues in the visibility API's order, read by its server's threads (built once
        # the state is, dropped when the term ends).
        self.positions: PendingPositions | None = None

    @property
    def state(self) -> ClusterState:
        return self.ctx.state

    @property
    def metrics(self) -> Metrics:
        return self.ctx.metrics

    # ----- the term --------------------------------------------------------------------

    def run(self, stop: threading.Event, fence: Fence | None = None) -> None:
        """Rebuild from the cache once it is synced, then reconcile until stopped or until
        the fence no longer holds."""
        fence = fence or Unfenced()
        try:
            if not self.cache.wait_synced(stop):
                return
            self.start()
            self.ready.set()
            log.info(
                "caches synced: %d workloads, %d admitted",
                self.state.workload_count(),
                self.state.admitted_count(),
            )
            while not stop.is_set() and fence.holds():
                self.step()
        except NotLeaderError:
            log.error("the lease was lost: stopped writing; this replica stands by")
        finally:
            self.ready.clear()
            self.positions = None
            self.watches.unsubscribe()
            self.multikueue.stop()
            self.stop_writes()
            self.metrics.end_of_term()  # a standby reports no queue's gauges

    def stop_writes(self) -> None:
        """The term is over: writes not yet sent are abandoned, never sent."""
        pool = self.ctx.writes
        if pool is not None:
            abandoned = pool.stop()
            if abandoned:
                log.info("%d writes not yet sent were abandoned", abandoned)

    def start(self) -> None:
        """Listen to the cache, and rebuild the state from it (the cache is synced); the
        write pool's senders start."""
        size = self.ctx.settings.write_concurrency
        if size > 0 and self.ctx.writes is None:
            self.ctx.writes = WritePool(
                size, wakeup=self.wakeup, observer=self.metrics.write_observer()
            )
        self.watches.subscribe()
        self.rebuild()
        # Only swapping the sequences in or picking them up holds the lock (visibility.py).
        self.positions = self.state.queues.keep_positions(threading.Lock())
        self.multikueue.start()

    def rebuild(self) -> None:
        """The core's state from the cache: configuration, then every Workload (an admitted
        one holds its quota again) before the first cycle; then the Jobs."""
        ctx = self.ctx
        store = ctx.store
        refs = [(r.plural, key) for r in CONFIG for key in store.keys(r)]
        self.config.reconcile_batch(refs, rebuild=True)
        for key in store.keys(WORKLOADS):
            reconcile_key(ctx, ctx.queues.workloads, "workloads", self.workloads.reconcile, key)
        for resource in self.cache.job_resources:
            for key, view in store.items(resource):
                if view.group is not None:
                    ctx.queues.groups.add(workload_key(view))
                elif view.source is not None:
                    ctx.queues.creations.add((resource.plural, key), self.jobs.priority(view))
                elif self.jobs.needs_attention(view):  # most jobs of a cluster are done
                    ctx.queues.jobs.add((resource.plural, key))
        self.groups.rebuild()
        self.ungater.rebuild()
        ctx.reschedule()

    def turn(self) -> None:
        """One turn of the loop's work (see the module's docstring), without waiting."""
        self.take_in()
        self.admission.follow_placement()
        self.schedule()
        self._create_workloads()
        self.pending.flush()
        self.queue_status.sample_fair_sharing()
        self.state.queues.publish_fair_usage()  # for the visibility API's order
        self.queue_status.run(self.monotonic())

    def step(self) -> None:
        """One turn, then sleep until something is due."""
        ctx = self.ctx
        try:
            self.turn()
        except NotLeaderError:
            raise
        except KubeError as err:
            log.warning("%s", err)
            ctx.metrics.reconcile_errors.labels("loop", "api").inc()
        except Exception:  # a bug must not end the controller; it is logged and retried
            log.exception("unexpected error in the controller loop")
            ctx.metrics.reconcile_errors.labels("loop", "unexpected").inc()
            time.sleep(0.1)
        queues = ctx.queues
        watched: list[WorkQueue[Any]] = [
            queues.config,
            queues.workloads,
            queues.jobs,
            queues.checks,
            queues.groups,
            queues.ungate,
        ]
        if not self._creations_held:  # else an answer from the pool wakes the loop
            watched.append(queues.creations)
        timeout = min(IDLE, ctx.settings.status_interval, self._scheduler_due())
        if ctx.writes is not None and ctx.writes.has_answers():
            timeout = 0.0
        if not any(q.next_due() == 0 for q in watched) and timeout > 0:
            self._collect_if_due()
        wait(self.wakeup, watched, timeout)

    def _collect_if_due(self) -> None:
        now = self.monotonic()
        if now - self._collected_at < GC_EVERY:
            return
        self._collected_at = now
        self._idle_collections += 1
        full = self._idle_collections % FULL_GC_EVERY == 0
        self.collect(2 if full else 1)

    def _scheduler_due(self) -> float:
        due = self.scheduler.due_in()
        return IDLE if due is None else due

    def take_in(self) -> None:
        """Apply what the pool's answers and the watches brought: configuration, Workloads,
        and Jobs whose Workload exists (a finished Job frees its quota). Creating Workloads
        waits for step 4."""
        if self.ctx.writes is not None:
            self.ctx.writes.complete()
        queues = self.ctx.queues
        refs = []
        while (ref := queues.config.pop()) is not None:
            refs.append(ref)
        if refs:
            self.config.reconcile_batch(refs)
        while (key := queues.workloads.pop()) is not None:
            reconcile_key(self.ctx, queues.workloads, "workloads", self.workloads.reconcile, key)
        while (ref := queues.jobs.pop()) is not None:
            reconcile_key(self.ctx, queues.jobs, "jobs", self.jobs.reconcile, ref)
        while (key := queues.groups.pop()) is not None:
            reconcile_key(self.ctx, queues.groups, "groups", self.groups.reconcile, key)
        while (key := queues.ungate.pop()) is not None:
            reconcile_key(self.ctx, queues.ungate, "ungate", self.ungater.reconcile, key)
        served = self.cache.serves(PROVISIONING_REQUESTS)
        if served != self._provisioning_served:  # its CRD came (or this term began)
            self._provisioning_served = served
            for name in self.ctx.store.keys(ADMISSION_CHECKS):
                queues.checks.add(("check", name))
        check_controllers = _each(self.provisioning.reconcile, self.multikueue.reconcile)
        while (ref := queues.checks.pop()) is not None:
            reconcile_key(self.ctx, queues.checks, "checks", check_controllers, ref)

    def schedule(self) -> None:
        """Cycles while one is due: each cycle's decisions written, and what happened
        meanwhile taken in before the next (finished workloads free quota)."""
        for _ in range(MAX_CYCLES):
            if not self.scheduler.take_due():
                return
            result = self.scheduler.decide()
            written = self.cycles.write(result)
            self.take_in()
            if not written:
                return
            if result.progressed:
                self.ctx.reschedule()

    def _create_workloads(self) -> None:
        """Workloads for new jobs, highest priority first: sent in the pool while it has
        room for them (without the pool, a few per turn, so they share the loop with the
        admissions of jobs already queued)."""
        queues = self.ctx.queues
        pool = self.ctx.writes
        self._creations_held = False
        self.jobs.created = 0
        while True:
            if pool is None:
                if self.jobs.created >= INLINE_CREATE_BATCH:
                    return
            elif pool.queued >= CREATIONS_PER_SENDER * pool.size:
                self._creations_held = True
                return
            ref = queues.creations.pop()
            if ref is None:
                return
            reconcile_key(self.ctx, queues.creations, "jobs", self.jobs.reconcile, ref)


__all__ = ["Controller", "Settings"]


def _multikueue(ctx: Context, cache: Cache, client: KubeClient) -> MultiKueueController:
    """The MultiKueue check controller; its workers' writes are fenced as the manager's."""
    return MultiKueueController(
        ctx,
        ctx.settings.multikueue,
        ctx.settings.namespace,
        served=lambda: cache.serves(MULTIKUEUE_CLUSTERS) and cache.serves(MULTIKUEUE_CONFIGS),
        client_factory=rest_client_factory(getattr(client, "fence", None)),
        parents=dict(zip(cache.parent_resources, cache.group_parents, strict=True)),
    )


def _queues(monotonic: Callable[[], float], wakeup: threading.Event) -> Queues:
    """The term's work queues; a key added to any wakes the loop."""

    def queue() -> WorkQueue[Any]:
        return WorkQueue(monotonic, wakeup=wakeup)

    return Queues(
        config=queue(),
        workloads=queue(),
        jobs=queue(),
        creations=queue(),
        pending=queue(),
        status=queue(),
        schedule=queue(),
        checks=queue(),
        groups=queue(),
        ungate=queue(),
    )


def _each(*reconcilers: Callable[[Ref], float | None]) -> Callable[[Ref], float | None]:
    """Reconcilers that share a queue, each acting only on its own keys (Tower's admission
    check controllers): the soonest requeue any asks for."""

    def reconcile(ref: Ref) -> float | None:
        waits = [w for w in (r(ref) for r in reconcilers) if w is not None]
        return min(waits) if waits else None

    return reconcile
