"""A MultiKueue Workload dispatched: worker clusters nominated, its copy made on each of them."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from extender.core.admission import multikueue as policy
from extender.core.admission import multikueue_preemption as gating
from extender.core.admission.multikueue import MultiKueueSettings
from extender.core.config.kueue_config import ALL_AT_ONCE
from extender.core.jobframework.adapter import as_mapping
from extender.kube.api import objects as o
from extender.kube.api.resources import WORKLOADS
from extender.kube.controller.context import Context
from extender.kube.controller.multikueue.copies import WorkerCopies
from extender.kube.controller.workload_status import write_status

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Dispatched:
    """What one look at a Workload admitted on no worker yet came to."""

    wait: float | None = None  # when to look again (None: at its next change)
    retry: str | None = None  # no worker admitted it in time: the check's Retry message


class WorkloadDispatcher:
    """Nominates worker clusters for a Workload as the configured dispatcher does (AllAtOnce,
    or Incremental in rounds), keeps its copy on the nominated ones only, and gives up after
    the admission timeout; it remembers, per Workload, when it was first dispatched and when
    its round began."""

    def __init__(self, ctx: Context, settings: MultiKueueSettings, copies: WorkerCopies) -> None:
        self.ctx = ctx
        self.settings = settings
        self.copies = copies
        self._rounds: dict[str, float] = {}  # Workload -> when its incremental round began
        self._dispatched: dict[str, float] = {}  # Workload -> when it was first dispatched
        # Kueue's MultiKueueOrchestratedPreemption: copies gated, one worker preempts at a time
        self.gated = ctx.settings.feature_gates.get(gating.GATE, False)

    def dispatched(self) -> list[str]:
        """The Workloads copied to workers and admitted on none yet."""
        return list(self._dispatched)

    def admitted(self, key: str) -> None:
        """Admitted on a worker: its admission timeout runs no more."""
        self._dispatched.pop(key, None)

    def forget(self, key: str) -> None:
        self._rounds.pop(key, None)
        self._dispatched.pop(key, None)

    def dispatch(
        self,
        key: str,
        obj: Obj,
        clusters: tuple[str, ...],
        connected: list[str],
        remotes: dict[str, Obj | None],
    ) -> Dispatched:
        ctx = self.ctx
        now = ctx.clock()
        nominated = tuple(as_mapping(obj.get("status")).get("nominatedClusterNames") or ())
        change = policy.nominate(
            self.settings.dispatcher,
            clusters,
            connected,
            nominated,
            self._rounds.get(key),
            now,
            self.settings.incremental_step,
            self.settings.incremental_round,
        )
        if change is not None:
            nominated, started = change
            if started is not None:
                self._rounds[key] = started
            patch = {"status": {"nominatedClusterNames": list(nominated) or None}}
            if write_status(ctx, key, o.conditional(patch, obj), "multikueue-nominate") is None:
                return Dispatched()
        first = self._dispatched.setdefault(key, now)
        copy = _copy_of(ctx, key, self.settings.origin, self.gated)
        admission = o.admission_of(obj)
        cq = admission.cluster_queue if admission is not None else ""
        for cluster in connected:
            if cluster in nominated and remotes.get(cluster) is None:
                made = _dispatched(ctx, cq, cluster)
                self.copies.create(cluster, key, WORKLOADS, copy, made)
            elif cluster not in nominated and remotes.get(cluster) is not None:
                self.copies.remove(cluster, key)
        opening = self._open_gate(key, connected, remotes, now) if self.gated else None
        timeout = self.settings.admission_timeout
        if timeout > 0 and now - first >= timeout and nominated:
            answers = "; ".join(
                f"{c}: {policy.pending_reason(remotes.get(c)) if c in connected else 'unreachable'}"
                for c in nominated
            )
            message = (
                f"no worker cluster admitted the workload within {timeout:.0f}s ({answers}): "
                "its quota here is given back and it is dispatched again"
            )
            self.forget(key)
            return Dispatched(retry=message)
        waits = [timeout - (now - first)] if timeout > 0 else []
        if opening is not None:
            waits.append(opening)
        if self.settings.dispatcher != ALL_AT_ONCE and key in self._rounds:
            waits.append(self.settings.incremental_round - (now - self._rounds[key]))
        return Dispatched(wait=max(0.5, min(waits)) if waits else None)

    def _open_gate(
        self, key: str, connected: list[str], remotes: dict[str, Obj | None], now: float
    ) -> float | None:
        """Opens the preemption gate of the copy that first asked to preempt, unless another
        was opened less than five minutes ago; returns when to look again."""
        cluster, wait = gating.worker_to_ungate({c: remotes.get(c) for c in connected}, now)
        remote = remotes.get(cluster) if cluster is not None else None
        if cluster is not None and remote is not None:
            patch = gating.open_gate_patch(remote, o.rfc3339(now))
            self.copies.patch(cluster, key, WORKLOADS, key, patch, subresource="status")
        return wait


def _dispatched(ctx: Context, cq: str, cluster: str) -> Callable[[], None]:
    """Kueue's multikueue_workloads_dispatched_total, once the copy is made on the worker."""
    return lambda: ctx.metrics.dispatched(cq, cluster)


def _copy_of(ctx: Context, key: str, origin: str, gated: bool) -> Callable[[], Obj]:
    """The copy of a Workload for a worker, read whole from the API server once, when the
    first worker's copy is made (not on the loop's thread); `gated`: with MultiKueue's
    closed preemption gate."""
    namespace, name = key.split("/", 1)
    made: list[Obj] = []
    lock = threading.Lock()

    def copy() -> Obj:
        with lock:
            if not made:
                remote = policy.remote_workload(ctx.client.get(WORKLOADS, name, namespace), origin)
                made.append(gating.gated_copy(remote) if gated else remote)
            return made[0]

    return copy
