"""Kueue's MultiKueueManagerQuotaAutomation: a manager ClusterQueue's quota kept as its workers'.

Keys ("quota", ClusterQueue) on the checks queue, for a ClusterQueue with a MultiKueue check:
its MultiKueueConfig, its LocalQueues, the workers' queues (watched on each worker while the
gate is on) and the workers' connections decide its nominal quota and its condition
`MultiKueueManagerQuotaAutomation` (extender/core/admission/multikueue_quota.py). A
ClusterQueue that has no such check loses the condition. Off with the gate, as in Kueue.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from extender.core.admission import multikueue as policy
from extender.core.admission import multikueue_quota as quota
from extender.core.api.quantity import QuantityError, parse_quantity
from extender.core.jobframework.adapter import as_mapping, as_sequence
from extender.kube.api import objects as o
from extender.kube.api.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    MULTIKUEUE_CLUSTERS,
    MULTIKUEUE_CONFIGS,
    Resource,
)
from extender.kube.controller.context import Context
from extender.kube.controller.multikueue.workers import WorkerClusters

Obj = dict[str, Any]
QUEUES = (CLUSTER_QUEUES, LOCAL_QUEUES)  # what is watched on each worker with the gate on
UNSYNCED_RETRY = 0.5  # a worker's queues not listed yet: looked at again after this


def enabled(ctx: Context) -> bool:
    return bool(ctx.settings.feature_gates.get(quota.GATE, False))


class QuotaAutomation:
    """The manager ClusterQueues of MultiKueue checks, their quota summed from the workers."""

    def __init__(self, ctx: Context, clusters: WorkerClusters) -> None:
        self.ctx = ctx
        self.clusters = clusters

    def _check_of(self, cq: Mapping[str, Any]) -> tuple[str, Obj] | None:
        """The ClusterQueue's MultiKueue AdmissionCheck (its strategy's, as Kueue reads it)."""
        strategy = as_mapping(as_mapping(cq.get("spec")).get("admissionChecksStrategy"))
        for rule in as_sequence(strategy.get("admissionChecks")):
            name = str(as_mapping(rule).get("name") or "")
            check = as_mapping(self.ctx.store.get(ADMISSION_CHECKS, name))
            if as_mapping(check.get("spec")).get("controllerName") == policy.CONTROLLER:
                return name, dict(check)
        return None

    def _config_of(self, check: Obj) -> Obj | None:
        params = as_mapping(as_mapping(check.get("spec")).get("parameters"))
        found = self.ctx.store.get(MULTIKUEUE_CONFIGS, str(params.get("name") or ""))
        return dict(found) if isinstance(found, dict) else None

    def wake(self, worker: str | None = None) -> None:
        """Every ClusterQueue of a MultiKueue check looks again (those whose config names
        `worker`, when given)."""
        if not enabled(self.ctx):
            return
        for name, cq in self.ctx.store.items(CLUSTER_QUEUES):
            found = self._check_of(as_mapping(cq))
            if found is None:
                continue
            if worker is not None:
                config = self._config_of(found[1])
                if config is None or worker not in policy.config_clusters(config):
                    continue
            self.ctx.queues.checks.add(("quota", name))

    def handlers(self) -> list[tuple[Resource, Callable[[str, Any, Any], None]]]:
        if not enabled(self.ctx):
            return []
        queue = self.ctx.queues.checks

        def on_cluster_queue(key: str, old: Any, new: Any) -> None:
            # Its spec changed (Kueue's generation filter): a status write is not looked at.
            if old is None or new is None or _generation(old) != _generation(new):
                queue.add(("quota", key))

        def on_local_queue(key: str, old: Any, new: Any) -> None:
            if old is None or new is None:
                cq = as_mapping(as_mapping(new or old).get("spec")).get("clusterQueue")
                if cq:
                    queue.add(("quota", str(cq)))

        def on_other(key: str, old: Any, new: Any) -> None:
            self.wake()

        return [
            (CLUSTER_QUEUES, on_cluster_queue),
            (LOCAL_QUEUES, on_local_queue),
            (ADMISSION_CHECKS, on_other),
            (MULTIKUEUE_CONFIGS, on_other),
            (MULTIKUEUE_CLUSTERS, on_other),
        ]

    def reconcile(self, name: str) -> float | None:
        ctx = self.ctx
        if not enabled(ctx):
            return None
        cq = ctx.store.get(CLUSTER_QUEUES, name)
        if not isinstance(cq, dict):
            return None
        found = self._check_of(cq)
        if found is None:
            self._condition(name, cq, None)
            return None
        config = self._config_of(found[1])
        workers = []
        if config is not None and quota.requested(config):
            for cluster in policy.config_clusters(config):
                store = self.clusters.queues_of(cluster)
                if store is None:
                    continue  # not connected: not counted, as Kueue
                if not all(store.synced(r).is_set() for r in QUEUES):
                    return UNSYNCED_RETRY
                workers.append(
                    quota.WorkerQueues(
                        [v for _, v in store.items(LOCAL_QUEUES)],
                        [v for _, v in store.items(CLUSTER_QUEUES)],
                    )
                )
        local = [
            (namespace, lq_name)
            for key, lq in ctx.store.items(LOCAL_QUEUES)
            if as_mapping(as_mapping(lq).get("spec")).get("clusterQueue") == name
            for namespace, lq_name in [key.split("/", 1)]
        ]
        wanted = quota.automate(cq, config, local, workers)
        if wanted.resources is not None:
            cq = self._write_quotas(name, cq, wanted.resources)
        self._condition(name, cq, wanted)
        return None

    def _write_quotas(self, name: str, cq: Obj, resources: tuple[tuple[str, str], ...]) -> Obj:
        """The one flavor's resources set to the sums (a 409 is retried on the next look)."""
        spec = as_mapping(cq.get("spec"))
        groups = copy.deepcopy(list(as_sequence(spec.get("resourceGroups"))))
        flavor = groups[0]["flavors"][0]
        new = [{"name": r, "nominalQuota": q} for r, q in resources]
        if _same_quotas(flavor.get("resources") or [], new):
            return cq
        flavor["resources"] = new
        patch = o.conditional({"spec": {"resourceGroups": groups}}, cq)
        answer = self.ctx.write(
            CLUSTER_QUEUES, "patch", lambda: self.ctx.client.patch(CLUSTER_QUEUES, name, patch)
        )
        self.ctx.store.record(CLUSTER_QUEUES, answer)
        return answer

    def _condition(self, name: str, cq: Obj, wanted: quota.QuotaAutomation | None) -> None:
        """The condition set as wanted, or removed (None); written only when it changes."""
        current = o.condition(cq, quota.GATE)
        if wanted is None:
            if current is None:
                return
            conditions = [
                c
                for c in as_sequence(as_mapping(cq.get("status")).get("conditions"))
                if as_mapping(c).get("type") != quota.GATE
            ]
        else:
            said = (wanted.status, wanted.reason, wanted.message)
            if (
                current is not None
                and (
                    current.get("status"),
                    current.get("reason"),
                    current.get("message"),
                )
                == said
            ):
                return
            conditions = o.with_conditions(cq, self.ctx.clock(), (quota.GATE, *said))
            generation = as_mapping(cq.get("metadata")).get("generation")
            for entry in conditions:
                if entry.get("type") == quota.GATE and generation is not None:
                    entry["observedGeneration"] = generation
        patch = o.conditional({"status": {"conditions": conditions}}, cq)
        answer = self.ctx.write(
            CLUSTER_QUEUES,
            "status-quota-automation",
            lambda: self.ctx.client.patch(CLUSTER_QUEUES, name, patch, subresource="status"),
        )
        self.ctx.store.record(CLUSTER_QUEUES, answer)


def _generation(obj: Any) -> Any:
    return as_mapping(as_mapping(obj).get("metadata")).get("generation")


def _same_quotas(have: Any, want: list[dict[str, str]]) -> bool:
    """The same resources, in order, with the same quantities (however spelled), and no
    limits beside them (Kueue's update leaves none)."""
    if any(set(as_mapping(h)) - {"name", "nominalQuota"} for h in have):
        return False
    pairs = [(as_mapping(h).get("name"), as_mapping(h).get("nominalQuota")) for h in have]
    if [p[0] for p in pairs] != [w["name"] for w in want]:
        return False
    try:
        return all(
            parse_quantity(str(h)) == parse_quantity(w["nominalQuota"])
            for (_, h), w in zip(pairs, want, strict=True)
        )
    except QuantityError:
        return False
