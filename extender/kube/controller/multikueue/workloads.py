"""A MultiKueue Workload: finished, evicted or admitted as its workers answer, else dispatched."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from extender.core.admission import checks
from extender.core.admission import multikueue as policy
from extender.core.admission.multikueue import MultiKueueSettings
from extender.core.jobframework.adapter import as_mapping
from extender.core.jobframework.parent import TemplateParent
from extender.kube.api import objects as o
from extender.kube.api.resources import WORKLOADS, Resource
from extender.kube.controller.context import Context
from extender.kube.controller.jobs import finish_workload
from extender.kube.controller.multikueue.copies import WorkerCopies
from extender.kube.controller.multikueue.dispatch import WorkloadDispatcher
from extender.kube.controller.multikueue.runs import component_turn, remote_run, stopped_here
from extender.kube.controller.multikueue.topology import placed_on_worker
from extender.kube.controller.multikueue.workers import WorkerClusters
from extender.kube.controller.workload_status import write_status

log = logging.getLogger("tower.multikueue")

Obj = dict[str, Any]


class MultiKueueWorkloads:
    """The Workloads that hold quota with a MultiKueue check, for one term: each one's
    workers' answers are read (finished, evicted, admitted, lost) and brought back to it and
    its job, and one admitted nowhere yet is handed to the dispatcher."""

    def __init__(
        self,
        ctx: Context,
        settings: MultiKueueSettings,
        clusters: WorkerClusters,
        copies: WorkerCopies,
        dispatcher: WorkloadDispatcher,
        parents: Mapping[Resource, TemplateParent],
    ) -> None:
        self.ctx = ctx
        self.settings = settings
        self.clusters = clusters
        self.copies = copies
        self.dispatcher = dispatcher
        self.parents = parents  # the kinds that declare group Workloads
        # Workload -> its job (or each pod of its group) -> the worker's resourceVersion copied
        self._synced: dict[str, dict[str, str]] = {}

    def running(self, key: str) -> bool:
        """Whether the Workload's job status is being brought back from a worker."""
        return key in self._synced

    def on_workers(self) -> list[str]:
        """The Workloads dispatched or running: a worker coming or going concerns them."""
        return self.dispatcher.dispatched() + list(self._synced)

    def gone(self, key: str) -> None:
        """Deleted, finished, or no longer holding quota: forgotten, its copies removed."""
        self.dispatcher.forget(key)
        self._synced.pop(key, None)
        self.copies.remove_everywhere(key, keep=None)

    def released(self, key: str, obj: Obj) -> None:
        """Holding no quota (evicted, or not admitted yet): forgotten, its copies removed,
        and its jobs here no longer count the worker's pods."""
        run = remote_run(self.ctx, self.parents, key, obj)
        if run is not None:
            stopped_here(self.ctx, run)
        self.gone(key)

    def reconcile(
        self,
        key: str,
        obj: Obj,
        states: list[checks.CheckState],
        mine: checks.CheckState,
        why: str | None,
        clusters: tuple[str, ...],
    ) -> float | None:
        """A Workload holding quota whose check `mine` is not Rejected; `clusters` are its
        MultiKueueConfig's, `why` says why that config cannot be used (None: it can)."""
        ctx = self.ctx
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
        self._carry_priority(key, obj, remotes)
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
            run.mirror(self.copies, self._synced.setdefault(key, {}), done, key, final=True)
            reason, message = policy.finished_as(remote)
            finish_workload(ctx, key, obj, reason, message)
            return None
        # 2. evicted on its worker after it was admitted there: dispatched afresh. Once it is
        #    evicted here too, the worker's job status is copied once more (Kueue's), so
        #    that the job here stops counting the worker's pods and its quota can go back.
        evicted = policy.earliest(speaking, "Evicted")
        if evicted is not None and o.is_true(obj, o.EVICTED):
            synced = self._synced.setdefault(key, {})
            deferred = run.mirror(self.copies, synced, evicted, key, final=False)
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
                    self.copies.remove(cluster, key)
            synced = self._synced.setdefault(key, {})
            deferred = run.mirror(self.copies, synced, winner, key, final=False)
            # Ready once the job is there, as Kueue's (the job is made in the background);
            # its group's other Workloads then follow it there (Kueue's components).
            made = run.made(self.clusters, winner)
            if (
                made
                and mine.state not in (checks.RETRY, checks.REJECTED)
                and self._admitted_on(key, obj, states, mine, winner, remotes.get(winner))
            ):
                namespace = key.split("/", 1)[0]
                for name in run.components:
                    self.ctx.queues.checks.add(("workload", f"{namespace}/{name}"))
            self.dispatcher.admitted(key)
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
        dispatched = self.dispatcher.dispatch(key, obj, clusters, connected, remotes)
        if dispatched.retry is not None:
            return self._set_state(key, obj, states, mine, checks.RETRY, dispatched.retry)
        return dispatched.wait

    def _carry_priority(self, key: str, obj: Obj, remotes: Mapping[str, Obj | None]) -> None:
        """A priority changed here (its job's priority-class label) reaches every copy, in
        place: Kueue updates a remote Workload whose priority changed instead of replacing it."""
        wanted = policy.priority_of(obj)
        for cluster, remote in remotes.items():
            if remote is not None and policy.priority_of(remote) != wanted:
                self.copies.patch(cluster, key, WORKLOADS, key, {"spec": dict(wanted)})

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
        remote: Obj | None,
    ) -> bool:
        """Ready, admitted on `cluster`, with the delayed topology requests its worker placed
        Ready too (Kueue's one write); True when this made it Ready."""
        message = policy.admitted_on(cluster)
        status = as_mapping(obj.get("status"))
        already = mine.state == checks.READY and status.get("clusterName") == cluster
        placed = placed_on_worker(obj, remote)
        if already and placed is None:
            return False
        new = (
            mine
            if already
            else replace(
                mine, state=checks.READY, message=message, last_transition=self.ctx.clock()
            )
        )
        patch: Obj = {
            "status": {
                "admissionChecks": o.checks_status([new if s is mine else s for s in states]),
                "clusterName": cluster,
                "nominatedClusterNames": None,
            }
        }
        if placed is not None:
            patch["status"]["admission"] = placed
        if write_status(self.ctx, key, o.conditional(patch, obj), "multikueue-admitted"):
            if already:
                self.ctx.queues.workloads.add(key)
                return False
            admission = o.admission_of(obj)
            cq = admission.cluster_queue if admission is not None else ""
            self.ctx.metrics.admitted_on_worker(cq, cluster)
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
