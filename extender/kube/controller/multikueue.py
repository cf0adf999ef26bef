"""Tower's `kueue.x-k8s.io/multikueue` admission check: Workloads dispatched to worker clusters.

Keys on the checks queue: ("cluster", name) for a MultiKueueCluster (its connection and
Active condition), ("check", name) for an AdmissionCheck of this controller (its Active
condition), ("workload", key) for a Workload with such a check, and ("gc", "") for the
collection of copies whose Workload is gone. Each worker is reached with its own client,
made from a kubeconfig in a Secret of Tower's namespace (or a path); the copies Tower made
there (the origin label) are watched into a store of their own, so a worker's answer is read
from memory and its change wakes the Workload up. The policy is
extender/core/admission/multikueue.py.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from extender.core.admission import checks
from extender.core.admission import multikueue as policy
from extender.core.admission.checks import check_states
from extender.core.admission.multikueue import MultiKueueSettings
from extender.core.config.kueue_config import ALL_AT_ONCE
from extender.core.jobframework.adapter import as_mapping
from extender.core.jobframework.parent import TemplateParent
from extender.kube.api import objects as o
from extender.kube.api.resources import (
    ADMISSION_CHECKS,
    MULTIKUEUE_CLUSTERS,
    MULTIKUEUE_CONFIGS,
    WORKLOADS,
    Resource,
)
from extender.kube.controller.active import set_active
from extender.kube.controller.context import Context, Ref
from extender.kube.controller.jobs import finish_workload
from extender.kube.controller.multikueue_runs import component_turn, remote_run, spec_sync_handlers
from extender.kube.controller.multikueue_workers import ClientFactory, WorkerClusters
from extender.kube.controller.workload_status import write_status

log = logging.getLogger("tower.multikueue")

Obj = dict[str, Any]


class MultiKueueController:
    """The MultiKueue admission check, for one term."""

    def __init__(
        self,
        ctx: Context,
        settings: MultiKueueSettings,
        namespace: str,
        served: Callable[[], bool],
        client_factory: ClientFactory,
        parents: Mapping[Resource, TemplateParent] | None = None,
    ) -> None:
        self.ctx = ctx
        self.settings = settings
        self.parents = dict(parents or {})  # the kinds that declare group Workloads
        self.served = served  # whether MultiKueueClusters and Configs are served (watched)
        self.clusters = WorkerClusters(
            ctx, settings, namespace, client_factory, self._wake_dispatched, self.parents
        )
        self._rounds: dict[str, float] = {}  # Workload -> when its incremental round began
        self._dispatched: dict[str, float] = {}  # Workload -> when it was first dispatched
        # Workload -> its job (or each pod of its group) -> the worker's resourceVersion copied
        self._synced: dict[str, dict[str, str]] = {}
        self._gc_started = False

    # ----- what to look at ---------------------------------------------------------------

    def ours(self, check: str) -> bool:
        spec = as_mapping(as_mapping(self.ctx.store.get(ADMISSION_CHECKS, check)).get("spec"))
        return spec.get("controllerName") == policy.CONTROLLER

    def _config_of(self, check: str) -> tuple[str | None, Obj | None]:
        """(why not, the MultiKueueConfig) of a check of ours."""
        spec = as_mapping(as_mapping(self.ctx.store.get(ADMISSION_CHECKS, check)).get("spec"))
        configs = {k: v for k, v in self.ctx.store.items(MULTIKUEUE_CONFIGS)}
        params = as_mapping(spec.get("parameters"))
        why = policy.config_error(params, configs)
        if why is not None:
            return why, None
        return None, configs[str(params.get("name"))]

    def handlers(self) -> list[tuple[Resource, Callable[[str, Any, Any], None]]]:
        queue = self.ctx.queues.checks

        def on_check(key: str, old: Any, new: Any) -> None:
            queue.add(("check", key))
            for wl_key, obj in self.ctx.store.items(WORKLOADS):
                if isinstance(obj, dict) and key in {c.name for c in check_states(obj)}:
                    queue.add(("workload", wl_key))

        def on_config(key: str, old: Any, new: Any) -> None:
            for name, obj in self.ctx.store.items(ADMISSION_CHECKS):
                params = as_mapping(as_mapping(as_mapping(obj).get("spec")).get("parameters"))
                if params.get("name") == key and self.ours(name):
                    on_check(name, None, None)

        def on_cluster(key: str, old: Any, new: Any) -> None:
            queue.add(("cluster", key))
            for name, config in self.ctx.store.items(MULTIKUEUE_CONFIGS):
                if key in policy.config_clusters(as_mapping(config)):
                    on_config(name, None, None)

        return [
            (ADMISSION_CHECKS, on_check),
            (MULTIKUEUE_CONFIGS, on_config),
            (MULTIKUEUE_CLUSTERS, on_cluster),
            *spec_sync_handlers(self.ctx, lambda key: key in self._synced),
        ]

    def workload_changed(self, key: str, old: Any, new: Any) -> None:
        """A Workload with checks is looked at (one without costs nothing); a deleted one
        too, so its copies go."""
        for obj in (old, new):
            if isinstance(obj, dict) and (obj.get("status") or {}).get("admissionChecks"):
                self.ctx.queues.checks.add(("workload", key))
                return

    def start(self) -> None:
        """The term begins: every MultiKueueCluster is connected, and collection scheduled."""
        for name, _ in self.ctx.store.items(MULTIKUEUE_CLUSTERS):
            self.ctx.queues.checks.add(("cluster", name))
        if self.settings.gc_interval > 0 and not self._gc_started:
            self._gc_started = True
            self.ctx.queues.checks.add_after(("gc", ""), self.settings.gc_interval)

    def stop(self) -> None:
        """The term is over: the workers' watches stop."""
        self.clusters.stop()

    def _wake_dispatched(self) -> None:
        """A worker came or went: the Workloads dispatched or running look again."""
        for key in list(self._dispatched) + list(self._synced):
            self.ctx.queues.checks.add(("workload", key))

    # ----- reconcile ---------------------------------------------------------------------

    def reconcile(self, ref: Ref) -> float | None:
        kind, key = ref
        if not self.served():
            return None
        if kind == "cluster":
            return self.clusters.reconcile(key)
        if kind == "check":
            self._check(key)
            return None
        if kind == "workload":
            return self._workload(key)
        if kind == "gc":
            self.clusters.collect()
            return self.settings.gc_interval
        return None

    # ----- the AdmissionCheck's Active condition -----------------------------------------

    def _check(self, name: str) -> None:
        ctx = self.ctx
        obj = ctx.store.get(ADMISSION_CHECKS, name)
        if obj is None or not self.ours(name):
            return
        why, config = self._config_of(name)
        clusters: list[tuple[str, bool | None]] = []
        for cluster in policy.config_clusters(config or {}):
            mkc = ctx.store.get(MULTIKUEUE_CLUSTERS, cluster)
            active = o.condition(mkc, "Active") if mkc is not None else None
            clusters.append(
                (cluster, None if mkc is None else bool(active and active.get("status") == "True"))
            )
        want = policy.check_active(why, clusters)
        set_active(ctx, ADMISSION_CHECKS, name, obj, want.status, want.reason, want.message)

    # ----- a Workload --------------------------------------------------------------------

    def _workload(self, key: str) -> float | None:
        ctx = self.ctx
        obj = ctx.store.get(WORKLOADS, key)
        if not isinstance(obj, dict) or (obj.get("metadata") or {}).get("deletionTimestamp"):
            self._forget(key)
            self.clusters.remove_everywhere(key, keep=None)
            return None
        states = check_states(obj)
        mine = next((s for s in states if self.ours(s.name)), None)
        if mine is None or mine.state == checks.REJECTED:
            return None
        why, config = self._config_of(mine.name)
        clusters = policy.config_clusters(config or {})
        if o.is_true(obj, o.FINISHED) or not o.is_true(obj, o.QUOTA_RESERVED):
            self._forget(key)
            self.clusters.remove_everywhere(key, keep=None)
            return None
        run = remote_run(ctx, self.parents, key, obj)
        if run is None:
            owner = ctx.owner_of(obj)
            kind = owner[0].kind if owner else o.group_owner_kind(obj)
            what = f' for owner kind "{kind}"' if kind else ""
            return self._set_state(
                key,
                obj,
                states,
                mine,
                checks.REJECTED,
                policy.previously(f"No multikueue adapter found{what}", mine.state),
            )
        problem = run.managed_problem()
        if problem is not None:
            return self._set_state(
                key, obj, states, mine, checks.REJECTED, policy.previously(problem, mine.state)
            )
        connected = [c for c in clusters if self.clusters.connected(c)]
        remotes = {c: self.clusters.remote(c, WORKLOADS, key) for c in connected}
        status = as_mapping(obj.get("status"))
        # Once a worker admitted it (clusterName), only that worker's copy speaks for it: a
        # copy elsewhere (on a worker that was lost, and is back) is stale, and removed.
        chosen = status.get("clusterName")
        speaking = {chosen: remotes.get(chosen)} if chosen else remotes
        # 1. a copy finished on its worker: the manager's Workload finishes as it did
        done = policy.earliest(speaking, "Finished")
        if done is not None:
            remote = remotes[done]
            assert remote is not None
            run.mirror(self.clusters, self._synced.setdefault(key, {}), done, key, final=True)
            reason, message = policy.finished_as(remote)
            finish_workload(ctx, key, obj, reason, message)
            return None
        # 2. evicted on its worker after it was admitted there: dispatched afresh. Once it is
        #    evicted here too, the worker's job status is copied once more (Kueue's), so
        #    that the job here stops counting the worker's pods and its quota can go back.
        evicted = policy.earliest(speaking, "Evicted")
        if evicted is not None and o.is_true(obj, o.EVICTED):
            synced = self._synced.setdefault(key, {})
            deferred = run.mirror(self.clusters, synced, evicted, key, final=False)
            return policy.SYNC_DEFERRED_RETRY if deferred else None
        if evicted is not None and mine.state == checks.READY:
            message = policy.evicted_on(evicted) + '. Previously: "Ready"'
            ctx.story(key, "Normal", "MultiKueue", message)
            return self._set_state(key, obj, states, mine, checks.RETRY, message)
        # 3. the first worker that admitted it wins
        winner = policy.earliest(speaking, "Admitted")
        if winner is None and mine.state == checks.READY:
            return self._admitting_remote_gone(key, obj, states, mine, status)
        if winner is not None:
            for cluster in connected:
                if cluster != winner and remotes.get(cluster) is not None:
                    self.clusters.remove(cluster, key)
            synced = self._synced.setdefault(key, {})
            deferred = run.mirror(self.clusters, synced, winner, key, final=False)
            # Ready once the job is there, as Kueue's (the job is made in the background);
            # its group's other Workloads then follow it there (Kueue's components).
            made = run.made(self.clusters, winner)
            if (
                made
                and mine.state not in (checks.RETRY, checks.REJECTED)
                and self._admitted_on(key, obj, states, mine, winner)
            ):
                namespace = key.split("/", 1)[0]
                for name in run.components:
                    self.ctx.queues.checks.add(("workload", f"{namespace}/{name}"))
            self._dispatched.pop(key, None)
            return policy.SYNC_DEFERRED_RETRY if deferred else self.settings.worker_lost_timeout
        # 4. not admitted anywhere yet: nominate, and copy it to the nominated workers
        if mine.state != checks.PENDING or status.get("clusterName"):
            return None
        if any(s.state != checks.READY for s in states if s is not mine):
            return None  # Kueue dispatches once every other check is Ready
        if why is not None:
            return None
        turn = component_turn(ctx, key, run)
        if turn.waits is not None:
            log.debug("Workload %s is not dispatched yet: %s", key, turn.waits)
            return turn.retry
        if turn.follow is not None:  # its group's other Workloads went there: so does it
            clusters = (turn.follow,)
            connected = [c for c in connected if c == turn.follow]
        return self._dispatch(key, obj, states, mine, clusters, connected, remotes)

    def _dispatch(
        self,
        key: str,
        obj: Obj,
        states: list[checks.CheckState],
        mine: checks.CheckState,
        clusters: tuple[str, ...],
        connected: list[str],
        remotes: dict[str, Obj | None],
    ) -> float | None:
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
                return None
        first = self._dispatched.setdefault(key, now)
        copy = _copy_of(ctx, key, self.settings.origin)
        for cluster in connected:
            if cluster in nominated and remotes.get(cluster) is None:
                self.clusters.create(cluster, key, WORKLOADS, copy)
            elif cluster not in nominated and remotes.get(cluster) is not None:
                self.clusters.remove(cluster, key)
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
            self._dispatched.pop(key, None)
            self._rounds.pop(key, None)
            return self._set_state(key, obj, states, mine, checks.RETRY, message)
        waits = [timeout - (now - first)] if timeout > 0 else []
        if self.settings.dispatcher != ALL_AT_ONCE and key in self._rounds:
            waits.append(self.settings.incremental_round - (now - self._rounds[key]))
        return max(0.5, min(waits)) if waits else None

    def _admitting_remote_gone(
        self,
        key: str,
        obj: Obj,
        states: list[checks.CheckState],
        mine: checks.CheckState,
        status: Any,
    ) -> float | None:
        """Ready, and no worker shows it admitted: its worker is unreachable (it waits
        workerLostTimeout for it), or its copy is gone (dispatched afresh)."""
        cluster = status.get("clusterName")
        worker = self.clusters.workers.get(cluster) if cluster else None
        if cluster and not self.clusters.connected(cluster):
            lost = worker.lost_since if worker is not None else None
            now = self.ctx.clock()
            if lost is None:
                lost = now
                if worker is not None:
                    worker.lost_since = lost
            left = self.settings.worker_lost_timeout - (now - lost)
            if left > 0:
                return left
            message = "Admitting remote lost"
        elif not cluster:
            message = (
                "Admission check is Ready but no admitting cluster is recorded; this is "
                "unexpected, please report it"
            )
        else:
            message = "Admitting remote no longer exists"
        return self._set_state(
            key, obj, states, mine, checks.RETRY, policy.previously(message, mine.state)
        )

    def _admitted_on(
        self,
        key: str,
        obj: Obj,
        states: list[checks.CheckState],
        mine: checks.CheckState,
        cluster: str,
    ) -> bool:
        """Ready, admitted on `cluster`; True when this wrote it."""
        message = policy.admitted_on(cluster)
        status = as_mapping(obj.get("status"))
        if mine.state == checks.READY and status.get("clusterName") == cluster:
            return False
        new = replace(mine, state=checks.READY, message=message, last_transition=self.ctx.clock())
        patch = {
            "status": {
                "admissionChecks": o.checks_status([new if s is mine else s for s in states]),
                "clusterName": cluster,
                "nominatedClusterNames": None,
            }
        }
        if write_status(self.ctx, key, o.conditional(patch, obj), "multikueue-admitted"):
            self.ctx.story(key, "Normal", "MultiKueue", message)
            self.ctx.queues.workloads.add(key)
            return True
        return False

    def _set_state(
        self,
        key: str,
        obj: Obj,
        states: list[checks.CheckState],
        mine: checks.CheckState,
        state: str,
        message: str,
    ) -> float | None:
        """The check's state written (None: nothing to wait for, it is looked at again on
        its next change)."""
        if mine.state == state and mine.message == message:
            return None
        new = replace(mine, state=state, message=message[:32768], last_transition=self.ctx.clock())
        patch = {
            "status": {
                "admissionChecks": o.checks_status([new if s is mine else s for s in states])
            }
        }
        if write_status(self.ctx, key, o.conditional(patch, obj), "admission-checks"):
            self.ctx.story(
                key,
                "Normal",
                "AdmissionCheckUpdated",
                f"Admission check {mine.name} updated state from {mine.state} to {state} "
                f"with message: {message}",
            )
            self.ctx.queues.workloads.add(key)
        return None

    # ----- the job on the winning worker --------------------------------------------------

    def _forget(self, key: str) -> None:
        self._rounds.pop(key, None)
        self._dispatched.pop(key, None)
        self._synced.pop(key, None)


def _copy_of(ctx: Context, key: str, origin: str) -> Callable[[], Obj]:
    """The copy of a Workload for a worker, read whole from the API server once, when the
    first worker's copy is made (not on the loop's thread)."""
    namespace, name = key.split("/", 1)
    made: list[Obj] = []
    lock = threading.Lock()

    def copy() -> Obj:
        with lock:
            if not made:
                made.append(
                    policy.remote_workload(ctx.client.get(WORKLOADS, name, namespace), origin)
                )
            return made[0]

    return copy
