"""The topology ungater: each pod of a topology-placed podSet is given its domain.

`reconcile(key)` takes an admitted Workload whose podSets carry topology assignments, reads
its pods as the store has them now, and lets each gated pod through with its domain's
labels as its nodeSelector (core/tas/ungate.py chooses the domain, by rank or in order), one
conditional patch a pod. A pod waits behind the gate while it still carries another scheduling
gate (its domain is chosen when it can be scheduled), and while its domain is a host recorded
in status.unhealthyNodes or a Node that is not Ready (it could not run there, and would be
failed and made again). So pods stay within their domains without the scheduler extender, as
with Kueue's own ungater.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from extender.core.api.topology import HOSTNAME, topology_request
from extender.core.jobframework.slices import SLICE_NAME
from extender.core.jobframework.topology import TOPOLOGY_GATE
from extender.core.tas.ungate import PodOnDomains, domains_for_gated, rank_offsets
from extender.kube.api import objects as o
from extender.kube.api.client import ApiError
from extender.kube.api.placement import NodeView, PodView
from extender.kube.api.resources import NODES, PODS, WORKLOADS, Resource
from extender.kube.controller import recording
from extender.kube.controller.context import Context
from extender.kube.controller.topology.failed_nodes import hosts_of, unhealthy_nodes

log = logging.getLogger("tower.ungater")

Obj = dict[str, Any]


class TopologyUngater:
    """Lets gated pods of topology-placed Workloads through, each to its domain."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def handlers(self) -> list[tuple[Resource, Callable[[str, Any, Any], None]]]:
        """An admitted Workload with topology assignments, and each of its pods, enqueue it."""

        def on_workload(key: str, old: Any, new: Any) -> None:
            if isinstance(new, dict) and _placed(new):
                self.ctx.queues.ungate.add(key)

        def on_pod(key: str, old: Any, new: Any) -> None:
            view = new if new is not None else old
            if isinstance(view, PodView) and view.topology is not None and view.topology.gated:
                self.ctx.queues.ungate.add(view.topology.workload)

        def on_node(key: str, old: Any, new: Any) -> None:
            # Pods held for a host that was not Ready go once it is (or wait for its
            # replacement once it is recorded: a Workload event then).
            if _ready(old) != _ready(new):
                for placed in self._placed_on(key):
                    self.ctx.queues.ungate.add(placed)

        if self.ctx.placement is None:  # nodes and pods are not watched: nothing is placed
            return []
        return [(WORKLOADS, on_workload), (PODS, on_pod), (NODES, on_node)]

    def _placed_on(self, host: str) -> list[str]:
        """The placed Workloads whose topology assignment names this host."""
        out = []
        for key, obj in self.ctx.store.items(WORKLOADS):
            if isinstance(obj, dict) and _placed(obj):
                admission = o.admission_of(obj)
                if admission is not None and host in hosts_of(admission):
                    out.append(key)
        return out

    def rebuild(self) -> None:
        """At the start of a term: every admitted Workload that placed pods on domains."""
        if self.ctx.placement is None:
            return
        for key, obj in self.ctx.store.items(WORKLOADS):
            if isinstance(obj, dict) and _placed(obj):
                self.ctx.queues.ungate.add(key)

    def reconcile(self, key: str) -> None:
        store = self.ctx.store
        workload = store.get(WORKLOADS, key)
        if not isinstance(workload, dict) or not _placed(workload):
            # A running elastic Job's pods keep the name of the slice it started under; the
            # slice that replaced it places them now (Kueue lists them by slice name).
            successor = self._successor(key, workload)
            if successor is not None:
                self.reconcile(successor)
            return
        admission = o.admission_of(workload)
        if admission is None:
            return
        requests = {
            str(ps.get("name") or "main"): topology_request(ps.get("topologyRequest"))
            for ps in (workload.get("spec") or {}).get("podSets") or ()
            if isinstance(ps, dict)
        }
        origin = _slice_origin(key, workload)
        names = [key] if origin in (None, key) else [key, origin]
        views = [
            store.get(PODS, k)
            for name in names
            for k in store.by_index(PODS, "topology-workload", name)
        ]
        # A host recorded as failed is still in the assignment until its replacement is
        # written: a pod let through to it could never run there.
        unhealthy = set(unhealthy_nodes(workload))
        offsets = rank_offsets(
            [
                (psa.name, psa.count, r.group if (r := requests.get(psa.name)) else None)
                for psa in admission.pod_set_assignments
            ]
        )
        for psa in admission.pod_set_assignments:
            if psa.topology is None:
                continue
            pods = {
                v.key: v
                for v in views
                if isinstance(v, PodView)
                and v.topology is not None
                and v.topology.pod_set == psa.name
            }
            ordered = sorted(pods.values(), key=lambda v: (v.topology.created, v.key))  # type: ignore[union-attr]
            # Its pods' pod-index-offset (Kueue reads the first pod's: a podSet's pods share
            # their template's); one that is not a number leaves the ranks unread.
            extra = ordered[0].topology.index_offset if ordered else 0  # type: ignore[union-attr]
            chosen = domains_for_gated(
                psa.topology,
                [
                    PodOnDomains(v.key, t.gated, t.labels, t.node_selector)
                    for v in ordered
                    if (t := v.topology) is not None
                ],
                requests.get(psa.name) if extra is not None else None,
                psa.count,
                offsets.get(psa.name, 0) + (extra or 0),
            )
            for pod_key, selector in chosen.items():
                view = pods[pod_key]
                if any(g != TOPOLOGY_GATE for g in view.topology.gates):  # type: ignore[union-attr]
                    continue  # its domain is chosen once nothing else holds it
                host = selector.get(HOSTNAME)
                if host is not None and (host in unhealthy or not self._host_ready(host)):
                    continue  # it waits for its host, or for the host's replacement
                if self._let_through(view, selector):
                    recording.gate_removed(
                        self.ctx, workload, TOPOLOGY_GATE, is_group=o.is_group_workload(workload)
                    )

    def _host_ready(self, host: str) -> bool:
        """False when the host's Node says it is not Ready (one not seen, or with no Ready
        condition, is left to the node controller's judgement)."""
        view = self.ctx.store.get(NODES, host)
        return not isinstance(view, NodeView) or view.ready in (None, "True")

    def _successor(self, key: str, workload: Any) -> str | None:
        """The placed slice that carries on a finished (or gone) slice's name, if any."""
        if isinstance(workload, dict) and not o.is_true(workload, o.FINISHED):
            return None  # not admitted yet, or not placed: nothing replaced it
        namespace = key.split("/", 1)[0]
        origin = _slice_origin(key, workload) if isinstance(workload, dict) else key
        for other, obj in self.ctx.store.items(WORKLOADS):
            if (
                other != key
                and other.startswith(f"{namespace}/")
                and isinstance(obj, dict)
                and _slice_origin(other, obj) == origin
                and _placed(obj)
            ):
                return other
        return None

    def _let_through(self, view: PodView, selector: dict[str, str]) -> bool:
        """One conditional patch: the topology gate off, the domain's labels required. False
        when the pod changed or went meanwhile."""
        topology = view.topology
        assert topology is not None
        namespace, name = view.key.split("/", 1)
        others = [{"name": g} for g in topology.gates if g != TOPOLOGY_GATE]
        patch: Obj = {
            "metadata": {"resourceVersion": view.resource_version},
            "spec": {"schedulingGates": others or None, "nodeSelector": selector},
        }
        ctx = self.ctx
        try:
            answer = ctx.write(
                PODS, "patch", lambda: ctx.client.patch(PODS, name, patch, namespace), view.key
            )
        except ApiError as err:
            if err.conflict or err.not_found:
                return False  # it changed or went: its next event enqueues its Workload again
            raise
        ctx.store.record(PODS, answer)
        return True


def _ready(view: Any) -> bool | None:
    """A Node's readiness as the ungater weighs it (None: no such Node)."""
    return view.ready in (None, "True") if isinstance(view, NodeView) else None


def _slice_origin(key: str, workload: Obj) -> str | None:
    """The key of the first slice of an elastic Job's Workload (its workload-slice-name)."""
    origin = ((workload.get("metadata") or {}).get("annotations") or {}).get(SLICE_NAME)
    if not isinstance(origin, str) or not origin:
        return None
    return f"{key.split('/', 1)[0]}/{origin}"


def _placed(workload: Obj) -> bool:
    """Admitted, with a topology assignment for some podSet."""
    if not o.is_true(workload, o.ADMITTED) or o.is_true(workload, o.FINISHED):
        return False
    admission = o.admission_of(workload)
    return admission is not None and o.topology_placed(admission)
