"""Tower's `kueue.x-k8s.io/multikueue` admission check: Workloads dispatched to worker clusters.

Keys on the checks queue: ("cluster", name) for a MultiKueueCluster (its connection and
Active condition), ("check", name) for an AdmissionCheck of this controller (its Active
condition), ("workload", key) for a Workload with such a check, ("quota", name) for a
ClusterQueue whose quota is summed from its workers' (quotas.py, Kueue's
MultiKueueManagerQuotaAutomation), and ("gc", "") for the collection of copies whose
Workload is gone. Each worker is reached with its own client, made from a kubeconfig in a
Secret of Tower's namespace (or a path); the copies Tower made there (the origin label) are
watched into a store of their own, so a worker's answer is read from memory and its change
wakes the Workload up. The collaborators: the workers'
connections (workers.py), Tower's writes there (copies.py), a Workload's course
(workloads.py) and its dispatch (dispatch.py). The policy is
extender/core/admission/multikueue.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from extender.core.admission import checks
from extender.core.admission import multikueue as policy
from extender.core.admission.checks import check_states
from extender.core.admission.multikueue import MultiKueueSettings
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
from extender.kube.controller.multikueue import quotas
from extender.kube.controller.multikueue.copies import WorkerCopies
from extender.kube.controller.multikueue.dispatch import WorkloadDispatcher
from extender.kube.controller.multikueue.runs import spec_sync_handlers
from extender.kube.controller.multikueue.workers import ClientFactory, WorkerClusters
from extender.kube.controller.multikueue.workloads import MultiKueueWorkloads

Obj = dict[str, Any]


class MultiKueueController:
    """The MultiKueue admission check, for one term: routes the events of AdmissionChecks,
    MultiKueueConfigs, MultiKueueClusters and Workloads to its keys, keeps each AdmissionCheck's
    Active condition, and hands a Workload that holds quota with the check to its course."""

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
            ctx,
            settings,
            namespace,
            client_factory,
            self._wake_dispatched,
            self.parents,
            on_queues=self._wake_quotas if quotas.enabled(ctx) else None,
        )
        self.quotas = quotas.QuotaAutomation(ctx, self.clusters)
        self.copies = WorkerCopies(ctx, self.clusters)
        self.workloads = MultiKueueWorkloads(
            ctx,
            settings,
            self.clusters,
            self.copies,
            WorkloadDispatcher(ctx, settings, self.copies),
            self.parents,
        )
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
            *spec_sync_handlers(self.ctx, self.workloads.running),
            *self.quotas.handlers(),
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
        self.quotas.wake()
        if self.settings.gc_interval > 0 and not self._gc_started:
            self._gc_started = True
            self.ctx.queues.checks.add_after(("gc", ""), self.settings.gc_interval)

    def stop(self) -> None:
        """The term is over: the writes to workers and their watches stop."""
        self.copies.stop()
        self.clusters.stop()

    def _wake_dispatched(self) -> None:
        """A worker came or went: the Workloads dispatched or running look again."""
        for key in self.workloads.on_workers():
            self.ctx.queues.checks.add(("workload", key))
        self.quotas.wake()

    def _wake_quotas(self, worker: str) -> None:
        """A worker's queues changed: the quotas summed from them look again."""
        self.quotas.wake(worker)

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
        if kind == "quota":
            return self.quotas.reconcile(key)
        if kind == "gc":
            self.copies.collect()
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
        """Which check is this controller's and which MultiKueueConfig it names are known
        here; the rest is the Workload's course (gone, finished or holding no quota: it is
        forgotten and its copies go)."""
        obj = self.ctx.store.get(WORKLOADS, key)
        if not isinstance(obj, dict) or (obj.get("metadata") or {}).get("deletionTimestamp"):
            self.workloads.gone(key)
            return None
        states = check_states(obj)
        mine = next((s for s in states if self.ours(s.name)), None)
        if mine is None or mine.state == checks.REJECTED:
            return None
        why, config = self._config_of(mine.name)
        clusters = policy.config_clusters(config or {})
        if o.is_true(obj, o.FINISHED):
            self.workloads.gone(key)
            return None
        if not o.is_true(obj, o.QUOTA_RESERVED):
            self.workloads.released(key, obj)
            return None
        return self.workloads.reconcile(key, obj, states, mine, why, clusters)
