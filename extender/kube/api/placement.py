"""Nodes, pods and plans from the watch caches into the core's inventory, behind one lock.

Every replica keeps it (the scheduler extender answers on standbys too): store handlers, on
the informer threads, update the inventory as the cluster changes. The leader's cycle asks it
for plans through the PlacementCheck; the extender's HTTP threads read it. A plan is recorded
on its Workload (annotation tower.dev/placement), so a replica that never decided it knows it.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from extender.core.admission import multikueue
from extender.core.api import parse
from extender.core.api.models import PLACEMENT_ANNOTATION, WORKLOAD_ANNOTATION, Admission, Workload
from extender.core.api.parse import ManifestError
from extender.core.api.topology import HOSTNAME, TopologyAssignment
from extender.core.jobframework.jobs import pod_requests
from extender.core.jobframework.topology import (
    POD_INDEX_OFFSET,
    TOPOLOGY_ANNOTATIONS,
    TOPOLOGY_GATE,
)
from extender.core.placement.fit import (
    Inventory,
    Node,
    PlacementCheck,
    Plan,
    PlannedPodSet,
    Pod,
    is_extended_resource,
    node_of,
)
from extender.core.scheduling.cache import Cache
from extender.core.scheduling.cycle import ClusterState
from extender.core.tas.cache import Held, within_assignment
from extender.core.tas.scheduling import TopologyScheduling
from extender.kube.api import objects as o
from extender.kube.api.resources import (
    NODES,
    PODS,
    RESOURCE_FLAVORS,
    TOPOLOGIES,
    WORKLOADS,
    Resource,
)
from extender.kube.api.store import Store

log = logging.getLogger("tower.placement")
T = TypeVar("T")

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class NodeView:
    """A Node as the cache keeps it: what placement reads."""

    key: str
    resource_version: str
    node: Node
    ready: str | None = None  # the Ready condition's status; None: it has none
    ready_since: float = 0.0  # that condition's lastTransitionTime, in seconds


@dataclass(frozen=True, slots=True)
class TopologyPod:
    """What the ungater reads of a pod placed on topology domains."""

    workload: str  # namespace/name of its Workload
    pod_set: str
    gated: bool  # still behind kueue.x-k8s.io/topology
    gates: tuple[str, ...]  # every scheduling gate it has
    labels: Mapping[str, str]  # its index labels are among them
    node_selector: Mapping[str, str]
    created: str  # creationTimestamp, to take gated pods in a stable order
    # Its kueue.x-k8s.io/pod-index-offset: its rank is its index less this (None: not a number).
    index_offset: int | None = 0


@dataclass(frozen=True, slots=True)
class PodView:
    """A Pod as the cache keeps it: its node, phase, checked requests and owner; `pod` is
    None while it is unbound or once it has terminated (it then holds nothing)."""

    key: str
    resource_version: str
    pod: Pod | None
    phase: str
    owner: tuple[str, str] | None  # (kind, name) of its controller
    # What it requests, when it is bound and runs outside topology-aware scheduling (its
    # domains' room counts it); None for a topology-aware pod.
    usage: Mapping[str, int] | None = None
    topology: TopologyPod | None = None  # a pod its Workload placed on topology domains
    deleting: bool = False  # it has a deletionTimestamp


def _m(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def node_view(obj: Obj) -> NodeView:
    meta = _m(obj.get("metadata"))
    node = node_of(obj)
    ready = next(
        (
            c
            for c in _m(obj.get("status")).get("conditions") or ()
            if isinstance(c, Mapping) and c.get("type") == "Ready"
        ),
        None,
    )
    return NodeView(
        node.name,
        str(meta.get("resourceVersion") or ""),
        node,
        str(ready.get("status")) if ready is not None else None,
        o.seconds_at(ready.get("lastTransitionTime")) if ready is not None else 0.0,
    )


def pod_transform(checked: Callable[[str], bool]) -> Callable[[Obj], PodView]:
    """The cache's form of a Pod, keeping only the requests placement checks."""

    def transform(obj: Obj) -> PodView:
        return pod_view(obj, checked)

    return transform


def pod_view(obj: Obj, checked: Callable[[str], bool] = is_extended_resource) -> PodView:
    meta, spec, status = _m(obj.get("metadata")), _m(obj.get("spec")), _m(obj.get("status"))
    namespace = str(meta.get("namespace") or "")
    key = f"{namespace}/{meta.get('name') or ''}"
    phase = sys.intern(str(status.get("phase") or "Pending"))
    owner = next(
        (
            (sys.intern(str(r.get("kind"))), str(r.get("name")))
            for r in meta.get("ownerReferences") or ()
            if isinstance(r, Mapping) and r.get("controller")
        ),
        None,
    )
    node = spec.get("nodeName")
    pod = None
    usage: dict[str, int] | None = None
    if node and phase not in ("Succeeded", "Failed"):
        try:
            every = pod_requests(dict(spec), "spec")
        except ManifestError:
            every = {}
        requests = {sys.intern(r): v for r, v in every.items() if v > 0 and checked(r)}
        annotations = _m(meta.get("annotations"))
        if not any(a in annotations for a in TOPOLOGY_ANNOTATIONS):
            usage = {sys.intern(r): v for r, v in every.items() if v > 0}
        workload = annotations.get(WORKLOAD_ANNOTATION)
        pod_set = _m(meta.get("labels")).get(o.PODSET_LABEL)
        pod = Pod(
            key,
            sys.intern(str(node)),
            requests,
            f"{namespace}/{workload}" if workload else None,
            sys.intern(str(pod_set)) if pod_set else None,
        )
    return PodView(
        key,
        str(meta.get("resourceVersion") or ""),
        pod,
        phase,
        owner,
        usage,
        _topology_pod(namespace, meta, spec, phase),
        bool(meta.get("deletionTimestamp")),
    )


def _topology_pod(
    namespace: str, meta: Mapping[str, Any], spec: Mapping[str, Any], phase: str
) -> TopologyPod | None:
    annotations, labels = _m(meta.get("annotations")), _m(meta.get("labels"))
    workload, pod_set = annotations.get(WORKLOAD_ANNOTATION), labels.get(o.PODSET_LABEL)
    if not workload or not pod_set or phase in ("Succeeded", "Failed"):
        return None
    gates = tuple(
        str(g.get("name")) for g in spec.get("schedulingGates") or () if isinstance(g, Mapping)
    )
    gated = TOPOLOGY_GATE in gates
    if not gated and not any(a in annotations for a in TOPOLOGY_ANNOTATIONS):
        return None
    return TopologyPod(
        f"{namespace}/{workload}",
        sys.intern(str(pod_set)),
        gated,
        gates,
        {str(k): str(v) for k, v in labels.items()},
        {str(k): str(v) for k, v in _m(spec.get("nodeSelector")).items()},
        str(meta.get("creationTimestamp") or ""),
        _offset(annotations.get(POD_INDEX_OFFSET)),
    )


def _offset(value: Any) -> int | None:
    if value is None:
        return 0
    text = str(value)
    return int(text) if text.isdigit() else None


def topology_workload_index(view: Any) -> list[str]:
    """The pods store's index: a topology-placed pod under its Workload's key."""
    if isinstance(view, PodView) and view.topology is not None:
        return [view.topology.workload]
    return []


def plan_from_workload(obj: Mapping[str, Any], checked: Callable[[str], bool]) -> Plan | None:
    """The plan an admitted Workload carries, or None (not admitted, finished, no plan)."""
    if not isinstance(obj, dict) or not o.is_true(obj, o.QUOTA_RESERVED):
        return None
    if o.is_true(obj, o.FINISHED):
        return None
    meta = _m(obj.get("metadata"))
    raw = _m(meta.get("annotations")).get(PLACEMENT_ANNOTATION)
    if not raw:
        return None
    key = f"{meta.get('namespace')}/{meta.get('name')}"
    nodes = json.loads(raw)
    admission = o.admission_of(obj)
    flavors = {psa.name: psa.flavors for psa in admission.pod_set_assignments} if admission else {}
    pod_sets: dict[str, PlannedPodSet] = {}
    for i, ps in enumerate(_m(obj.get("spec")).get("podSets") or ()):
        name = str(_m(ps).get("name") or "main")
        if name not in nodes:
            continue
        template = _m(_m(ps).get("template"))
        requests = pod_requests(dict(_m(template.get("spec"))), f"spec.podSets[{i}].template.spec")
        requests = {r: v for r, v in requests.items() if v > 0 and checked(r)}
        assigned = flavors.get(name, {})
        pod_set_flavors = tuple(dict.fromkeys(assigned[r] for r in requests if r in assigned))
        counts = {str(n): int(c) for n, c in _m(nodes[name]).items() if int(c) > 0}
        pod_sets[name] = PlannedPodSet(requests, counts, pod_set_flavors)
    return Plan(key, pod_sets)


def topology_from_workload(
    obj: Mapping[str, Any],
) -> list[tuple[tuple[str, ...], str, TopologyAssignment, dict[str, int]]]:
    """What an admitted Workload holds on topology domains: per podSet with an assignment,
    its flavors, the assignment and one pod's requests (nothing once it finished)."""
    if not isinstance(obj, dict) or not o.is_true(obj, o.QUOTA_RESERVED):
        return []
    if o.is_true(obj, o.FINISHED):
        return []
    admission = o.admission_of(obj)
    if admission is None:
        return []
    templates = {
        str(_m(ps).get("name") or "main"): (i, _m(_m(ps).get("template")))
        for i, ps in enumerate(_m(obj.get("spec")).get("podSets") or ())
    }
    out = []
    for psa in admission.pod_set_assignments:
        if psa.topology is None or psa.name not in templates:
            continue
        i, template = templates[psa.name]
        requests = pod_requests(dict(_m(template.get("spec"))), f"spec.podSets[{i}].template.spec")
        flavors = tuple(dict.fromkeys(psa.flavors.values()))
        out.append((flavors, psa.name, psa.topology, requests))
    return out


class Placement:
    """The inventory, kept current from the store, and the check the leader's cycle uses."""

    def __init__(self, checked: Callable[[str], bool] = is_extended_resource) -> None:
        self.lock = threading.Lock()
        self.inventory = Inventory(checked)
        self.check_in_cycle = PlacementCheck(self.inventory)
        self.topology = TopologyScheduling()
        self._store: Store | None = None
        self._cache: Cache | None = None  # the term's ClusterQueues and AdmissionChecks

    # ----- the store's handlers (informer threads) ----------------------------------------

    def attach(self, store: Store) -> None:
        """Follow nodes, pods, flavors and Workloads as the store changes."""
        self._store = store
        store.subscribe(NODES, self._on_node)
        store.subscribe(PODS, self._on_pod)
        store.subscribe(RESOURCE_FLAVORS, self._on_flavor)
        store.subscribe(WORKLOADS, self._on_workload)
        store.subscribe(TOPOLOGIES, self._on_topology)

    def _on_node(self, key: str, old: Any, new: Any) -> None:
        with self.lock:
            if isinstance(new, NodeView):
                self.inventory.set_node(new.node)
                self.topology.set_node(new.node)
            else:
                self.inventory.delete_node(key)
                self.topology.delete_node(key)

    def _on_pod(self, key: str, old: Any, new: Any) -> None:
        with self.lock:
            if isinstance(new, PodView) and new.pod is not None:
                self.inventory.set_pod(new.pod)
                self.topology.set_pod(key, new.pod.node, new.usage)
            else:
                self.inventory.delete_pod(key)
                self.topology.set_pod(key, None, None)
            # What a failed TAS node waits for (tas/node_failure.py): a topology-placed pod
            # that stops running on its node, or one let through to a host it cannot reach.
            was = _running_on(old)
            if was is not None and was != _running_on(new):
                self.topology.pod_left(*was)
            if isinstance(new, PodView) and (waiting := _waiting_for(new)) is not None:
                self.topology.pod_held_to(*waiting)

    def _on_flavor(self, key: str, old: Any, new: Any) -> None:
        flavors = self._every(RESOURCE_FLAVORS, parse.resource_flavor)
        with self.lock:
            self.inventory.set_flavors(flavors)
            self.topology.set_flavors(flavors)

    def _on_topology(self, key: str, old: Any, new: Any) -> None:
        topologies = self._every(TOPOLOGIES, parse.topology)
        with self.lock:
            self.topology.set_topologies(topologies)

    def _every(self, resource: Resource, parse_one: Callable[[Any], T]) -> list[T]:
        """Every object of a kind the store has, parsed (one that does not parse is left out:
        no node is a flavor's, no domain a Topology's, until it is fixed)."""
        out: list[T] = []
        for name, obj in self._store.items(resource) if self._store is not None else ():
            try:
                out.append(parse_one(obj))
            except ManifestError:
                log.debug("%s %s is not valid; it is left out of placement", resource.kind, name)
        return out

    def _on_workload(self, key: str, old: Any, new: Any) -> None:
        try:
            plan = plan_from_workload(new, self.inventory.is_checked) if new is not None else None
        except (ManifestError, ValueError, TypeError) as err:
            log.warning(
                "Workload %s: annotation %s is not a plan: %s", key, PLACEMENT_ANNOTATION, err
            )
            plan = None
        try:
            placed = topology_from_workload(new) if new is not None else []
        except (ManifestError, ValueError, TypeError) as err:
            log.warning("Workload %s: its topology assignment cannot be read: %s", key, err)
            placed = []
        with self.lock:
            self.inventory.record(key, plan)
            tas = self.topology
            holds = [
                Held(flavor, pod_set, assignment, requests)
                for flavors, pod_set, assignment, requests in placed
                for flavor in flavors
                if tas.is_topology_flavor(flavor)
            ]
            if holds:
                tas.hold(key, holds)
            elif key in tas.held and not o.holds_quota(new):
                tas.release(key)

    # ----- the leader's cycle ---------------------------------------------------------

    def connect(self, state: ClusterState) -> None:
        """Plug the check into a term's state: a plan is needed to admit, and goes with the
        quota."""
        state.add_admission_check(self.check)
        state.on_release(self.forget)
        self._cache = state.cache
        state.scheduler.topology = self

    def new_term(self, state: ClusterState) -> None:
        """A term as leader begins: forget the last term's unwritten plans, and plug in."""
        with self.lock:
            self.inventory.forget_all()
            self.inventory.take_disturbed()
        self.connect(state)

    def check(self, workload: Workload, admission: Admission) -> str | Admission | None:
        """Topology placement first (it may amend the admission), then the physical plan;
        a plan refused gives back the domains the placement took."""
        with self.lock:
            placed = self.topology(workload, admission)
            if isinstance(placed, str):
                return placed
            if self._runs_on_workers(admission.cluster_queue):
                return placed  # MultiKueue: its pods run on a worker, never on these nodes
            refusal = self.check_in_cycle(workload, placed or admission)
            if refusal is not None:
                self.topology.release(workload.key)
                return refusal
            return placed

    def _runs_on_workers(self, cluster_queue: str) -> bool:
        cache = self._cache
        cq = cache.cluster_queues.get(cluster_queue) if cache is not None else None
        if cq is None:
            return False
        checks = cache.admission_checks if cache is not None else {}
        return multikueue.dispatches(
            (r.name for r in cq.admission_checks),
            lambda name: c.controller_name if (c := checks.get(name)) else None,
        )

    # ----- scheduler.TopologyHooks, under the lock ---------------------------------------

    def fits_without(
        self, workload: Workload, admission: Admission, victims: Sequence[str] | None
    ) -> bool:
        """Would its topology podSets be placed were these workloads gone (tas.fits_without)."""
        with self.lock:
            return self.topology.fits_without(workload, admission, victims)

    def reserve(
        self, workload: Workload, admission: Admission, victims: Sequence[str] | None
    ) -> None:
        with self.lock:
            self.topology.reserve(workload, admission, victims)

    def end_cycle(self) -> None:
        with self.lock:
            self.topology.end_cycle()

    def prepare(self, workload: Workload, flavors: Iterable[str]) -> None:
        """Count a queued workload's topology requests now, not in its cycle (tas.prepare)."""
        with self.lock:
            self.topology.prepare(workload, flavors)

    def forget(self, key: str) -> None:
        with self.lock:
            self.inventory.forget(key)
            self.topology.release(key)

    def plan_of(self, key: str) -> Plan | None:
        with self.lock:
            return self.inventory.plan_of(key)

    def replan(self, workload: Workload, admission: Admission, keep: Plan) -> Plan | str:
        with self.lock:
            plan = self.inventory.plan(workload, admission, keep=keep)
            if isinstance(plan, Plan):
                self.inventory.assume(plan)
            return plan

    def place_delayed(self, workload: Workload, admission: Admission) -> Admission | str | None:
        """The podSets whose placement waited for admission checks, placed (tas.place_delayed)."""
        with self.lock:
            return self.topology.place_delayed(workload, admission)

    def replace_topology(
        self, workload: Workload, admission: Admission, unhealthy: Sequence[str] | None = None
    ) -> Admission | str | None:
        """A failed host's pods placed again on the workload's domains (see tas.replace)."""
        with self.lock:
            return self.topology.replace(workload, admission, unhealthy)

    def disturb(self, key: str) -> None:
        """Look at this workload's plan again on the next turn (a write of it failed)."""
        with self.lock:
            self.inventory.disturbed.add(key)
            if key in self.topology.held:
                self.topology.disturbed.add(key)

    def take_changes(self) -> tuple[set[str], set[str]]:
        """(ClusterQueues to try again, Workloads whose plan a node change broke)."""
        with self.lock:
            requeue = self.check_in_cycle.to_requeue(self.inventory.take_grown())
            requeue |= self.topology.to_requeue()
            return requeue, self.inventory.take_disturbed() | self.topology.take_disturbed()

    # ----- the scheduler extender (HTTP threads) ----------------------------------------

    def filter(
        self,
        namespace: str,
        workload: str | None,
        pod_set: str | None,
        requests: Mapping[str, int],
        candidates: Iterable[str],
    ) -> tuple[list[str], dict[str, str]]:
        with self.lock:
            names = list(candidates)
            inside = (
                within_assignment(self.topology, f"{namespace}/{workload}", pod_set or "", names)
                if workload
                else None
            )
            if inside is None:
                return self.inventory.filter(namespace, workload, pod_set, requests, names)
            # A podSet placed on topology domains: only their nodes (the ungater's
            # nodeSelector says the same; a pod made without it is held to it here).
            kept = [n for n in names if n in inside]
            passed, failed = self.inventory.filter(namespace, workload, pod_set, requests, kept)
            for name in names:
                if name not in inside:
                    failed[name] = "not in a domain of its podSet's topology assignment"
            return passed, failed

    def prioritize(
        self, namespace: str, workload: str | None, pod_set: str | None, candidates: Iterable[str]
    ) -> list[tuple[str, int]]:
        with self.lock:
            return self.inventory.prioritize(namespace, workload, pod_set, candidates)

    def counts(self) -> tuple[int, int, int]:
        with self.lock:
            return self.inventory.counts()


def _running_on(view: Any) -> tuple[str, str] | None:
    """(Workload key, node) of a topology-placed pod bound there, not ending nor being deleted."""
    if not isinstance(view, PodView) or view.deleting or view.pod is None:
        return None
    return (view.topology.workload, view.pod.node) if view.topology is not None else None


def _waiting_for(view: PodView) -> tuple[str, str] | None:
    """(Workload key, host) of a topology-placed pod let through to a host and not bound."""
    topology = view.topology
    if topology is None or topology.gated or view.pod is not None or view.phase != "Pending":
        return None
    host = topology.node_selector.get(HOSTNAME)
    return (topology.workload, host) if host else None


def annotation(plan: Plan) -> str:
    """The plan as the Workload carries it."""
    return json.dumps(plan.as_annotation(), separators=(",", ":"), sort_keys=True)
