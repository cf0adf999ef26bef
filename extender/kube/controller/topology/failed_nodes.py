"""The hosts of an admitted TAS Workload judged from the watch caches, as Kueue's node controller.

For each host of its topology assignment: the Node (from the store), whether a pod of the
Workload still runs there (from the pods index of topology-placed pods), and the tolerations of
the podSets placed there; core/tas/node_failure.py judges. Also which of its pods wait, let
through to a host no kubelet of theirs will run them on (Kueue fails these).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.core.admission.checks import check_states, with_placement_updates
from extender.core.api.labels import Toleration
from extender.core.api.models import Admission, Workload
from extender.core.api.topology import HOSTNAME
from extender.core.tas.node_failure import (
    NodeFailureGates,
    NodeState,
    Recorded,
    Verdict,
    WaitingPod,
    judge,
    late_pods,
    recorded,
)
from extender.kube.api.placement import NodeView, PodView
from extender.kube.api.resources import NODES, PODS
from extender.kube.controller.context import Context

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Judged:
    """One Workload's hosts judged: their verdicts, what status.unhealthyNodes holds and should
    hold, and the pods to fail."""

    verdicts: Mapping[str, Verdict]
    current: tuple[str, ...]  # status.unhealthyNodes as written
    outcome: Recorded
    late: tuple[str, ...]  # keys of pods to fail

    def recheck_at(self) -> float | None:
        """The soonest time a verdict asks to be made again (the fixed NotReady delay)."""
        times = [v.recheck_at for v in self.verdicts.values() if v.recheck_at is not None]
        return min(times) if times else None


def unhealthy_nodes(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """The names in a Workload's status.unhealthyNodes."""
    status = obj.get("status")
    entries = status.get("unhealthyNodes") if isinstance(status, Mapping) else None
    return tuple(str(e["name"]) for e in entries or () if isinstance(e, Mapping) and e.get("name"))


def hosts_of(admission: Admission) -> list[str]:
    """The hosts a topology assignment names, in its order (only assignments down to hosts)."""
    out: dict[str, None] = {}
    for psa in admission.pod_set_assignments:
        topology = psa.topology
        if topology is not None and topology.levels[-1:] == (HOSTNAME,):
            for domain in topology.domains:
                out[domain.values[-1]] = None
    return list(out)


def owned_by_one_pod(obj: Mapping[str, Any]) -> bool:
    """Kueue's OwnedBySinglePod: a plain pod's Workload (not a pod group's)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    owners = meta.get("ownerReferences") or []
    annotations = meta.get("annotations") or {}
    if len(owners) != 1 or annotations.get("kueue.x-k8s.io/is-group-workload") == "true":
        return False
    owner = owners[0]
    return (
        isinstance(owner, Mapping)
        and owner.get("kind") == "Pod"
        and owner.get("apiVersion") == "v1"
    )


class HostJudge:
    """Reads what Kueue's node controller reads, for one Workload at a time."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @property
    def gates(self) -> NodeFailureGates:
        return NodeFailureGates.of(self.ctx.settings.feature_gates)

    def judge(
        self, key: str, obj: Mapping[str, Any], workload: Workload, admission: Admission
    ) -> Judged | None:
        """Every host of the Workload's assignment judged now (None: none is down to hosts).
        A host is taken as its Node's name, as Kueue does."""
        hosts = hosts_of(admission)
        if not hosts:
            return None
        store = self.ctx.store
        views = [store.get(PODS, k) for k in store.by_index(PODS, "topology-workload", key)]
        pods = [v for v in views if isinstance(v, PodView) and v.topology is not None]
        progressing = {v.pod.node for v in pods if v.pod is not None and not v.deleting}
        tolerations = self._tolerations(obj, workload, admission)
        gates, now = self.gates, self.ctx.clock()
        nodes: dict[str, NodeView | None] = {}
        verdicts: dict[str, Verdict] = {}
        for host in hosts:
            view = store.get(NODES, host)
            nodes[host] = view if isinstance(view, NodeView) else None
            verdicts[host] = judge(
                _state(nodes[host]),
                progressing=host in progressing,
                tolerations=tolerations.get(host, ()),
                gates=gates,
                now=now,
            )
        waiting = [
            WaitingPod(
                v.key,
                v.topology.node_selector.get(HOSTNAME, ""),
                v.phase == "Pending",
                v.topology.gated,
            )
            for v in pods
            if v.topology is not None and v.pod is None and v.topology.node_selector.get(HOSTNAME)
        ]
        exists = {p.host: isinstance(store.get(NODES, p.host), NodeView) for p in waiting}
        current = unhealthy_nodes(obj)
        return Judged(
            verdicts,
            current,
            recorded(current, verdicts),
            tuple(late_pods(waiting, verdicts, exists)),
        )

    def _tolerations(
        self, obj: Mapping[str, Any], workload: Workload, admission: Admission
    ) -> dict[str, list[Sequence[Toleration]]]:
        """host -> the effective tolerations of each podSet placed there: its template's, its
        Ready checks' podSetUpdates' and its flavors' (Kueue's podSetsWithEffectiveTolerations)."""
        updated = with_placement_updates(workload, check_states(obj))
        # A podSetUpdate that does not merge leaves the template's (the job never started).
        pod_sets = {
            ps.name: ps for ps in (updated if isinstance(updated, Workload) else workload).pod_sets
        }
        flavors = self.ctx.state.resource_flavors()
        out: dict[str, list[Sequence[Toleration]]] = {}
        for psa in admission.pod_set_assignments:
            ps = pod_sets.get(psa.name)
            if psa.topology is None or ps is None:
                continue
            own = list(ps.tolerations)
            for name in dict.fromkeys(psa.flavors.values()):
                flavor = flavors.get(name)
                own += [t for t in flavor.tolerations if t not in own] if flavor else []
            for domain in psa.topology.domains:
                out.setdefault(domain.values[-1], []).append(tuple(own))
        return out


def _state(view: NodeView | None) -> NodeState | None:
    if view is None:
        return None
    return NodeState(view.ready, view.ready_since, view.node.taints)
