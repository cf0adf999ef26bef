"""Kueue's queue manager: the pending workloads, each in its ClusterQueue's queue or parked.

A pending workload is routed through its LocalQueue to its ClusterQueue's queue; one that
cannot be (no LocalQueue, no ClusterQueue, a field Tower does not act on, an admission gate
another controller holds) is parked with the reason, and routed again when the configuration
changes. A head that cannot fit is set aside as inadmissible until quota is given back in its
cohort tree, so a cycle looks only at heads that might fit.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from extender.core.api.admission_gates import ADMISSION_GATED, GATE_CLEARED_MESSAGE, gated_message
from extender.core.api.models import ClusterQueue, Workload
from extender.core.scheduling.admission_fair_sharing import UsageLedger
from extender.core.scheduling.cache import Cache
from extender.core.scheduling.concurrent import variant_view
from extender.core.scheduling.queues import ClassMemo, ClusterQueueQueue
from extender.core.scheduling.quota import QuotaNode
from extender.core.scheduling.reasons import INADMISSIBLE, PENDING, PendingStatus
from extender.core.scheduling.visibility import Guard, PendingPositions

Head = tuple[ClusterQueue, QuotaNode, ClusterQueueQueue, Workload, ClassMemo]


class QueueManager:
    """The pending workloads, their ClusterQueue queues, and why each one waits."""

    def __init__(self, cache: Cache) -> None:
        self._cache = cache
        # Every workload not deleted, pending or admitted, in the order first seen: reports
        # of what waits keep that order however often a workload was admitted and evicted.
        self.workloads: dict[str, Workload] = {}
        self._queues: dict[str, ClusterQueueQueue] = {}
        self._queue_of: dict[str, str] = {}
        # Per quota tree, the queues holding workloads set aside as inadmissible: quota given
        # back in a tree requeues only these, so a release costs what was set aside, not the
        # number of ClusterQueues in the cohort.
        self._set_aside: dict[QuotaNode, set[ClusterQueueQueue]] = {}
        self._parked: dict[str, PendingStatus] = {}
        # Workloads backing off until their requeueAt, with why: queued but never a head.
        self._held: dict[str, str] = {}
        # Why each head the last cycles tried was not admitted.
        self._status: dict[str, PendingStatus] = {}
        # The active ClusterQueues with their quota node and queue, in the order heads are taken.
        self._schedulable: list[tuple[ClusterQueue, QuotaNode, ClusterQueueQueue]] = []
        # Admission fair sharing (Kueue's Configuration asks for it): each LocalQueue's usage.
        self.ledger: UsageLedger | None = None
        # Each queue in Kueue's visibility order, once someone asks (`keep_positions`).
        self.positions: PendingPositions | None = None

    def lq_usage(self, lq_key: str) -> float:
        """A LocalQueue's admission fair sharing usage (its weight from its spec)."""
        assert self.ledger is not None
        lq = self._cache.local_queues.get(lq_key)
        return self.ledger.usage(lq_key, lq.fair_weight if lq is not None else 1.0)

    # ----- ClusterQueues and LocalQueues --------------------------------------------

    def update_cluster_queue(self, cq: ClusterQueue) -> None:
        """A ClusterQueue was created or updated: a new queueing strategy means a new queue,
        holding what the old one held."""
        queue = self._queues.get(cq.name)
        if queue is None or queue.strategy is not cq.queueing_strategy:
            fresh = ClusterQueueQueue(cq.queueing_strategy)
            for workload in queue.workloads() if queue else ():
                if queue is not None and queue.is_held(workload.key):
                    fresh.hold(workload)
                else:
                    fresh.push(workload)
            self._queues[cq.name] = fresh

    def delete_cluster_queue(self, name: str) -> None:
        """A ClusterQueue was deleted: its pending workloads wait for it to come back."""
        queue = self._queues.pop(name, None)
        for workload in queue.workloads() if queue else ():
            self._queue_of.pop(workload.key, None)
        if self.positions is not None:
            self.positions.drop(name)

    def delete_local_queue(self, key: str) -> None:
        """A LocalQueue was deleted: its pending workloads leave their ClusterQueue's queue."""
        for wkey, cq_name in list(self._queue_of.items()):
            workload = self.workloads[wkey]
            if f"{workload.namespace}/{workload.queue_name}" == key:
                self._queues[cq_name].remove(wkey)
                del self._queue_of[wkey]
                if self.positions is not None:
                    self.positions.remove(wkey)

    def refresh(self) -> None:
        """The cache was rebuilt: which queues are schedulable, and every workload that had
        nowhere to wait is routed again."""
        cache = self._cache
        inactive, cluster_queues = cache.inactive, cache.cluster_queues
        nodes = cache.tree.cluster_queues
        self._schedulable = [
            (cluster_queues[name], nodes[name], queue)
            for name, queue in self._queues.items()
            if name not in inactive
        ]
        for name, queue in self._queues.items():
            cq = cluster_queues.get(name)
            fair = self.ledger is not None and cq is not None and cq.admission_fair_sharing
            queue.fair_usage = self.lq_usage if fair else None
        if self.positions is not None:
            self._publish_queues(self.positions)
        for key in list(self._parked):
            self.route(self.workloads[key])
        admitted = cache.admitted
        for workload in self.workloads.values():
            key = workload.key
            if key not in admitted and key not in self._parked and key not in self._queue_of:
                self.route(workload)
        self.requeue_all()

    # ----- workloads ------------------------------------------------------------------

    def add(self, workload: Workload) -> tuple[str, ClassMemo] | None:
        """A new pending workload, or a new version of one: queued in place of the old. If
        its equivalence class was made for it: its ClusterQueue's name and the class's memo."""
        self._held.pop(workload.key, None)
        self.unqueue(workload.key)
        self.workloads[workload.key] = workload
        return self.route(workload)

    def back_off(self, workload: Workload, message: str) -> None:
        """A workload evicted and requeued with a backoff (Kueue's requeueState.requeueAt): it
        waits in its ClusterQueue, counted as inadmissible as Kueue counts it, and is never a
        head until `add` queues it again; `message` says until when."""
        self._held[workload.key] = message
        self.unqueue(workload.key)
        self.workloads[workload.key] = workload
        self.route(workload)

    def admitted(self, workload: Workload) -> None:
        """A workload holds quota now: it waits in no queue."""
        key = workload.key
        self._held.pop(key, None)
        self.unqueue(key)
        self.workloads[key] = workload
        self._status.pop(key, None)

    def delete(self, key: str) -> None:
        """A workload is gone."""
        self._held.pop(key, None)
        self.unqueue(key)
        self._status.pop(key, None)
        self.workloads.pop(key, None)

    def route(self, workload: Workload) -> tuple[str, ClassMemo] | None:
        """Queue a pending workload in its ClusterQueue's queue, or park it with why not (as
        `add` answers)."""
        key = workload.key
        self._parked.pop(key, None)
        if workload.admission_gated_by:
            # Not in any queue: another controller holds it, and the heads behind it go on.
            self._parked[key] = PendingStatus(
                ADMISSION_GATED, gated_message(workload.admission_gated_by)
            )
            return None
        if workload.inadmissible:
            self._park(key, workload.inadmissible)
            return None
        if workload.unacted:
            self._park(
                key,
                f"{workload.owner_kind or 'the Workload'} sets {', '.join(workload.unacted)}, "
                "which Tower does not act on; it waits while set (docs/kueue-fields.md)",
            )
            return None
        lq = self._cache.local_queues.get(f"{workload.namespace}/{workload.queue_name}")
        if lq is None:
            self._park(
                key,
                f"LocalQueue {workload.queue_name} does not exist in namespace "
                f"{workload.namespace}",
            )
            return None
        queue = self._queues.get(lq.cluster_queue)
        if queue is None:
            self._park(
                key,
                f"LocalQueue {lq.key} points at ClusterQueue {lq.cluster_queue}, "
                "which does not exist",
            )
            return None
        if key in self._held:
            queue.hold(workload)
            made = None
        else:
            made = queue.push(workload)
        self._queue_of[key] = lq.cluster_queue
        if self.positions is not None:
            self.positions.add(lq.cluster_queue, workload)
        return None if made is None else (lq.cluster_queue, made)

    def gate_cleared(self, key: str) -> None:
        """A workload's admission gates were taken off: until a cycle tries it, it says so
        (Kueue's message), rather than that it waits for its turn."""
        if key in self._queue_of and key not in self._status:
            self._status[key] = PendingStatus(PENDING, GATE_CLEARED_MESSAGE)

    def _park(self, key: str, message: str) -> None:
        self._parked[key] = PendingStatus(INADMISSIBLE, message)

    def unqueue(self, key: str) -> None:
        """Take a workload out of its queue (or off the parked list)."""
        self._parked.pop(key, None)
        cq_name = self._queue_of.pop(key, None)
        if cq_name is not None:
            queue = self._queues.get(cq_name)  # one lookup: every admission comes here
            if queue is not None:
                queue.remove(key)
            if self.positions is not None:
                self.positions.remove(key)

    # ----- Kueue's visibility API ----------------------------------------------------

    def keep_positions(self, guard: Guard | None = None) -> PendingPositions:
        """From now on, keep every queue in the order Kueue's visibility API lists it (the
        controller, for the API; `kubectl tower`), read from other threads under `guard`."""
        positions = PendingPositions(guard)
        for name, queue in self._queues.items():
            positions.load(name, queue.workloads())
        self._publish_queues(positions)
        self.positions = positions
        self.publish_fair_usage()
        return positions

    def _publish_queues(self, positions: PendingPositions) -> None:
        local_queues = self._cache.local_queues
        positions.configure(self._queues, {k: lq.cluster_queue for k, lq in local_queues.items()})
        for name, queue in self._queues.items():
            if queue.fair_usage is None:
                positions.set_usage(name, None)

    def publish_fair_usage(self) -> None:
        """Each LocalQueue's admission fair sharing usage as it is now, for the order of the
        visibility API's answers (the controller calls it once per turn of its loop)."""
        positions = self.positions
        if positions is None or self.ledger is None:
            return
        for name, queue in self._queues.items():
            usage = queue.fair_usage
            if usage is not None:
                positions.set_usage(name, {lq: usage(lq) for lq in positions.local_queues_in(name)})

    # ----- what a cycle takes and gives back -----------------------------------------

    def heads(self) -> list[Head]:
        """One workload per active ClusterQueue: the next its queue offers."""
        heads: list[Head] = []
        for cq, node, queue in self._schedulable:
            offered = queue.offer()
            if offered is not None:
                workload, memo = offered
                if workload.allowed_flavors:  # a concurrent-admission variant
                    cq = variant_view(cq, workload)
                heads.append((cq, node, queue, workload, memo))
        return heads

    def record(self, pending: Iterable[tuple[Workload, PendingStatus]]) -> None:
        """Why the heads a cycle tried stay pending."""
        status = self._status
        for workload, why in pending:
            status[workload.key] = why

    def set_aside(
        self,
        node: QuotaNode,
        queue: ClusterQueueQueue,
        workload: Workload,
        *,
        even_strict: bool = False,
    ) -> bool:
        """Set a head that cannot fit aside (BestEffortFIFO, or any queue when `even_strict`);
        whether its queue moved."""
        if not queue.mark_inadmissible(workload, even_strict=even_strict):
            return False
        root = node.root()
        aside = self._set_aside.get(root)
        if aside is None:
            aside = self._set_aside[root] = set()
        aside.add(queue)
        return True

    def requeue_cohort(self, node: QuotaNode) -> None:
        """Quota was given back in this node's tree: what its queues set aside may fit now."""
        for queue in self._set_aside.pop(node.root(), ()):
            queue.requeue_inadmissible()

    def requeue_inadmissible(self, cq_names: Iterable[str]) -> bool:
        """Something an admission check waits on changed (nodes freed room): the workloads
        these ClusterQueues set aside are tried again. Whether any queue was found."""
        found = False
        for name in cq_names:
            queue = self._queues.get(name)
            if queue is not None:
                queue.requeue_inadmissible()
                found = True
        return found

    def requeue_all(self) -> None:
        """Everything set aside is tried again."""
        for queue in self._queues.values():
            queue.requeue_inadmissible()
        self._set_aside.clear()

    # ----- questions ------------------------------------------------------------------

    def pending_workload(self, key: str) -> Workload | None:
        """A workload that waits (queued or parked), by key."""
        workload = self.workloads.get(key)
        return None if workload is None or key in self._cache.admitted else workload

    def pending(self) -> Iterator[tuple[Workload, PendingStatus]]:
        """Every pending workload with why it waits."""
        admitted = self._cache.admitted
        for key, workload in self.workloads.items():
            if key not in admitted:
                yield workload, self.pending_status(key)

    def pending_status(self, key: str) -> PendingStatus:
        """Why one pending workload is waiting, in words a person understands."""
        if key in self._parked:
            return self._parked[key]
        if key in self._held:
            return PendingStatus(PENDING, self._held[key])
        cq_name = self._queue_of.get(key)
        inactive = self._cache.inactive
        if cq_name is not None and cq_name in inactive:
            return inactive[cq_name]
        status = self._status.get(key)
        if status is not None:
            return status
        return PendingStatus(PENDING, f"waiting in ClusterQueue {cq_name} for its turn")

    def pending_in(self, cq_name: str) -> tuple[int, int]:
        """(active, inadmissible) pending workloads of one ClusterQueue."""
        queue = self._queues.get(cq_name)
        return queue.counts() if queue else (0, 0)

    def pending_workloads_in(self, cq_name: str) -> Iterator[Workload]:
        """The workloads queued in one ClusterQueue (parked ones are in none)."""
        queue = self._queues.get(cq_name)
        return queue.workloads() if queue else iter(())

    def queued_in(self, key: str) -> str | None:
        """The ClusterQueue whose queue holds a pending workload (None: parked, or none)."""
        return self._queue_of.get(key)

    def is_backing_off(self, key: str) -> bool:
        """Whether a pending workload waits out a requeue backoff (`back_off`)."""
        return key in self._held

    def queue_is_inadmissible(self, cq_name: str, key: str) -> bool:
        """Whether a queued workload was set aside until quota is given back."""
        queue = self._queues.get(cq_name)
        return queue is not None and queue.is_inadmissible(key)

    def class_head(self, key: str) -> str | None:
        """The workload a cycle tries for this one's whole equivalence class (the same shape,
        priority and namespace): its reason is this one's."""
        cq_name = self._queue_of.get(key)
        queue = self._queues.get(cq_name) if cq_name is not None else None
        return queue.class_head(key) if queue is not None else None
