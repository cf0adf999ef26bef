"""Kueue's scheduler-level TAS tables, read from their data transcription and run on Tower.

tests/conformance/data/kueue_scheduler_tas_cases.yaml holds every case of Kueue v0.19.2's
pkg/scheduler/scheduler_tas_test.go (TestScheduleForTAS, TestScheduleForTASPreemption,
TestScheduleForTASCohorts) as plain data: nodes, pods, Topologies, flavors, ClusterQueues,
workloads and what one cycle must leave behind. Its `conventions` and `runners` say how the Go
test reads each field. This module turns a case into Kueue-shaped manifests, parses them
with Tower's own parsers, runs one cycle, and reports what Kueue's test compares.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from extender.core.api import parse
from extender.core.api.models import Admission, Namespace, PodSetAssignment, Workload
from extender.core.api.quantity import parse_quantity, to_amount
from extender.core.api.topology import HOSTNAME, DomainAssignment, TopologyAssignment
from extender.core.config.resource_policy import ResourcePolicy, Transformation
from extender.core.config.resource_policy import apply as apply_policy
from extender.core.jobframework.workloads import workload as parse_workload
from extender.core.placement.model import Node, node_of
from extender.core.scheduling.cycle import ClusterState
from extender.core.tas.cache import Held
from extender.core.tas.scheduling import TopologyScheduling

DATA = Path(__file__).parent / "data" / "kueue_scheduler_tas_cases.yaml"
API = "kueue.x-k8s.io/v1beta2"
NOW = 1_700_000_000.0  # the Go test's `now`; any second works, the tables are relative


@cache
def _document() -> dict[str, Any]:
    with DATA.open() as f:
        loaded: dict[str, Any] = yaml.load(f, Loader=yaml.CSafeLoader)
    return loaded


@dataclass(frozen=True)
class Case:
    table: str  # schedule, preemption or cohorts
    id: str
    name: str
    line: int
    raw: Mapping[str, Any] = field(repr=False, hash=False, compare=False)

    @property
    def gates(self) -> Mapping[str, bool]:
        gates: Mapping[str, bool] = self.raw.get("featureGates") or {}
        return gates

    def __str__(self) -> str:
        return f"{self.id} (L{self.line}) {self.name}"


def cases() -> list[Case]:
    doc = _document()
    return [
        Case(table, c["id"], c["name"], c["source"]["line"], c)
        for table, rows in doc["tables"].items()
        for c in rows
    ]


def default_gates() -> dict[str, bool]:
    return {k: v["default"] for k, v in _document()["feature_gates"]["defaults_v0_19_2"].items()}


# ----- fixtures and manifests ---------------------------------------------------------------


def _resolve(items: list[Any], block: str) -> list[dict[str, Any]]:
    doc = _document()
    out = []
    for item in items or ():
        if "use" in item:
            out.append(dict(doc[block][item["use"]]))
        else:
            out.append(dict(item))
    return out


def _nodes(raw: list[Any]) -> Iterator[dict[str, Any]]:
    for item in raw:
        if "nodeSet" in item:
            yield from _document()["node_sets"][item["nodeSet"]]["nodes"]
        else:
            yield item


def _when(symbolic: str | None) -> float:
    """`now`, `now-1m`, `now+1s` as seconds; no timestamp is Go's zero time."""
    if not symbolic:
        return 0.0
    if symbolic == "now":
        return NOW
    sign = 1 if "+" in symbolic else -1
    amount = symbolic.split("+" if sign > 0 else "-")[1]
    unit = {"s": 1, "m": 60, "h": 3600}[amount[-1]]
    return NOW + sign * int(amount[:-1]) * unit


def node_manifest(n: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": n["name"], "labels": n.get("labels") or {}},
        "spec": {"unschedulable": n.get("unschedulable", False), "taints": n.get("taints") or []},
        "status": {
            "allocatable": n.get("allocatable") or {},
            "conditions": [{"type": "Ready", "status": "True"}] if n.get("ready") else [],
        },
    }


def _obj(kind: str, name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": dict(spec)}


def _without_name(raw: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if k not in ("name", "goVar", "line")}


def workload_manifest(w: Mapping[str, Any]) -> dict[str, Any]:
    pod_sets = []
    for ps in w["podSets"]:
        pod_spec: dict[str, Any] = {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "resources": {"requests": ps.get("requests") or {}}}],
        }
        for key in ("nodeSelector", "tolerations", "affinity"):
            if key in ps:
                pod_spec[key] = ps[key]
        entry: dict[str, Any] = {"name": ps["name"], "count": ps["count"]}
        entry["template"] = {"spec": pod_spec}
        if "minCount" in ps:
            entry["minCount"] = ps["minCount"]
        if "topologyRequest" in ps:
            entry["topologyRequest"] = ps["topologyRequest"]
        pod_sets.append(entry)
    spec: dict[str, Any] = {"queueName": w["queueName"], "podSets": pod_sets}
    if w.get("priority") is not None:
        spec["priority"] = w["priority"]
    meta = {"name": w["name"], "namespace": w["namespace"], "uid": w.get("uid", "")}
    meta["labels"] = w.get("labels") or {}
    return {"apiVersion": API, "kind": "Workload", "metadata": meta, "spec": spec}


def topology_assignment(raw: Mapping[str, Any]) -> TopologyAssignment:
    return TopologyAssignment(
        tuple(raw["levels"]),
        tuple(DomainAssignment(tuple(d["values"]), d["count"]) for d in raw["domains"]),
    )


def admission(raw: Mapping[str, Any]) -> Admission:
    """An internal-form admission (the table's) as Tower's model."""
    assignments = []
    for psa in raw["podSetAssignments"]:
        topology = psa.get("topologyAssignment")
        assignments.append(
            PodSetAssignment(
                psa["name"],
                dict(psa.get("flavors") or {}),
                {r: to_amount(r, v) for r, v in (psa.get("resourceUsage") or {}).items()},
                psa.get("count", 1),
                topology_assignment(topology) if topology else None,
                psa.get("delayedTopologyRequest"),
            )
        )
    return Admission(raw["clusterQueue"], tuple(assignments))


def condition(w: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in (w.get("status") or {}).get("conditions") or ():
        if c["type"] == kind:
            found: Mapping[str, Any] = c
            return found
    return None


def _is_true(w: Mapping[str, Any], kind: str) -> bool:
    c = condition(w, kind)
    return c is not None and c["status"] == "True"


def policy(case: Case) -> ResourcePolicy:
    transformations = {}
    for t in case.raw.get("resourceTransformations") or ():
        outputs = tuple((name, parse_quantity(str(q))) for name, q in t["outputs"].items())
        retain = t.get("strategy", "Retain") == "Retain"
        transformations[t["input"]] = Transformation(
            t["input"], retain, t.get("multiplyBy", ""), outputs
        )
    return ResourcePolicy((), transformations)


# ----- one cycle ----------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one cycle left behind, in the terms the Go test compares."""

    assignments: dict[str, Admission]
    left: dict[str, set[str]]
    inadmissible: dict[str, set[str]]
    preempted: dict[str, str]  # victim key -> Preempted condition reason
    evicted: dict[str, str]  # key -> eviction message (node failures)
    messages: dict[str, str]  # pending key -> QuotaReserved=False message


def run(case: Case) -> Outcome:
    raw = case.raw
    doc = _document()
    tas = TopologyScheduling()
    state = ClusterState()
    topologies = [
        parse.topology(
            _obj("Topology", t["name"], {"levels": [{"nodeLabel": x} for x in t["levels"]]})
        )
        for t in _resolve(raw["topologies"], "topologies")
    ]
    flavors = [
        parse.resource_flavor(_obj("ResourceFlavor", f["name"], _without_name(f)))
        for f in _resolve(raw["resourceFlavors"], "flavors")
    ]
    cluster_queues = [
        parse.cluster_queue(_obj("ClusterQueue", q["name"], _without_name(q)))
        for q in _resolve(raw["clusterQueues"], "cluster_queues")
    ]
    cohorts = [
        parse.cohort(_obj("Cohort", c["name"], _without_name(c)))
        for c in _resolve(raw.get("cohorts") or [], "cohorts")
    ]
    checks = [
        parse.admission_check(
            {
                **_obj("AdmissionCheck", a["name"], {"controllerName": a["controllerName"]}),
                "status": {"conditions": a.get("conditions") or []},
            }
        )
        for a in _resolve(raw.get("admissionChecks") or [], "admission_checks")
    ]
    local_queues = [
        parse.local_queue(
            {
                "apiVersion": API,
                "kind": "LocalQueue",
                "metadata": {"name": q["name"], "namespace": q["namespace"]},
                "spec": {"clusterQueue": q["clusterQueue"]},
            }
        )
        for q in doc["local_queues"][raw["localQueues"]]["queues"]
    ]
    tas.set_topologies(topologies)
    tas.set_flavors(flavors)
    for n in _nodes(raw["nodes"]):
        tas.set_node(node_of(node_manifest(n)))
    for p in raw.get("pods") or ():
        if p.get("phase") not in ("Succeeded", "Failed"):
            requests = {r: to_amount(r, v) for r, v in (p.get("requests") or {}).items()}
            tas.set_pod(f"{p['namespace']}/{p['name']}", p.get("nodeName"), requests)
    state.configure(
        flavors=flavors,
        cluster_queues=cluster_queues,
        cohorts=cohorts,
        local_queues=local_queues,
        namespaces=[Namespace("default")],
        admission_checks=checks,
        topologies=topologies,
    )
    state.add_admission_check(tas)
    state.on_release(tas.release)
    state.scheduler.topology = tas
    resources = policy(case)

    initially: set[str] = set()
    failed_hosts: dict[str, Workload] = {}
    replacing: list[tuple[Workload, Admission]] = []
    second_pass: list[tuple[Workload, Admission]] = []  # placement delayed, checks Ready
    for w in raw["workloads"]:
        model = apply_policy(parse_workload(workload_manifest(w)), resources)
        model = _with_time(model, _when(w.get("creationTimestamp")))
        status = w.get("status") or {}
        if not (status.get("admission") and _is_true(w, "QuotaReserved")):
            state.add_workload(model)
            continue
        held = admission(status["admission"])
        state.assume(
            model, held, _when((condition(w, "QuotaReserved") or {}).get("lastTransitionTime"))
        )
        by_name = {ps.name: ps for ps in model.pod_sets}
        tas.hold(
            model.key,
            [
                Held(flavor, psa.name, psa.topology, by_name[psa.name].requests)
                for psa in held.pod_set_assignments
                if psa.topology is not None
                for flavor in sorted(set(psa.flavors.values()))
                if tas.is_topology_flavor(flavor)
            ],
        )
        unhealthy = status.get("unhealthyNodes") or []
        if _is_true(w, "Admitted") and not unhealthy:
            initially.add(model.key)
        for host in unhealthy:
            failed_hosts[host] = model
        if unhealthy:
            replacing.append((model, held))
        checks = status.get("admissionChecks") or []
        if not _is_true(w, "Admitted") and all(c["state"] == "Ready" for c in checks):
            second_pass.append((model, held))
    # Tower learns of a failed host from its Node (NotReady or gone), not from
    # status.unhealthyNodes: the hosts the table names unhealthy are made NotReady.
    for node in list(tas.nodes.values()):
        if node.labels.get(HOSTNAME, node.name) in failed_hosts:
            tas.set_node(_not_ready(node))
    evicted: dict[str, str] = {}
    for model, held in replacing:
        replaced = tas.replace(model, held)
        if isinstance(replaced, str):
            evicted[model.key] = replaced
            state.mark_evicting(model.key)
        elif replaced is not None:
            state.forget(model.key)
            state.assume(model, replaced, NOW)
            tas.hold(
                model.key,
                [
                    Held(
                        flavor,
                        psa.name,
                        psa.topology,
                        next(p.requests for p in model.pod_sets if p.name == psa.name),
                    )
                    for psa in replaced.pod_set_assignments
                    if psa.topology is not None
                    for flavor in sorted(set(psa.flavors.values()))
                    if tas.is_topology_flavor(flavor)
                ],
            )

    # Kueue's second pass for a delayed topology request: Tower's controller places it once
    # every check is Ready, before it writes Admitted (kube/controller/checks.py).
    for model, held in second_pass:
        placed = tas.place_delayed(model, held)
        if isinstance(placed, Admission):
            state.forget(model.key)
            state.assume(model, placed, NOW)

    result = state.schedule(NOW)
    assignments = {
        held.workload.key: held.admission
        for held in state.admitted_workloads()
        if held.workload.key not in initially
    }
    left: dict[str, set[str]] = {}
    inadmissible: dict[str, set[str]] = {}
    for name in state.cluster_queue_names():
        for pending in state.pending_workloads_in(name):
            where = inadmissible if state.queue_is_inadmissible(name, pending.key) else left
            where.setdefault(name, set()).add(pending.key)
    messages = {wl.key: status.message for wl, status in state.pending()}
    preempted = {e.workload.key: e.preemption_reason or e.reason for e in result.evicted}
    return Outcome(assignments, left, inadmissible, preempted, evicted, messages)


def _with_time(model: Workload, at: float) -> Workload:
    return replace(model, creation_time=at)


def _not_ready(node: Node) -> Node:
    return replace(node, ready=False)
