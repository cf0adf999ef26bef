"""Kueue's TestFindTopologyAssignments cases, read from their one-line transcription.

tests/conformance/data/kueue_tas_find_assignments.txt holds every case of Kueue v0.19.2's table
(pkg/cache/scheduler/tas_cache_test.go) in a compact notation; this module turns a line into
nodes, a Topology, non-topology pods and podSets, and the expected assignment or reason.
Cases this harness cannot express say why in `skip`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from extender.core.api.labels import Taint, Toleration
from extender.core.api.quantity import to_amount
from extender.core.api.topology import (
    IMPLICIT,
    PREFERRED,
    REQUIRED,
    UNCONSTRAINED,
    DomainAssignment,
    SliceLayer,
    TopologyAssignment,
    TopologyRequest,
)
from extender.core.placement.model import Node
from extender.core.tas.placement import PodSetPlacement

DATA = Path(__file__).parent / "data" / "kueue_tas_find_assignments.txt"

LABELS = {
    "block": "cloud.com/topology-block",
    "rack": "cloud.com/topology-rack",
    "host": "kubernetes.io/hostname",
    "subblock": "cloud.com/topology-subblock",
    "datacenter": "cloud.com/datacenter",
    "dc": "cloud.com/datacenter",
    "aizone": "cloud.com/aizone",
    "zone": "cloud.com/topology-zone",
    "switch": "cloud.com/topology-switch",
}
RESOURCES = {"cpu": "cpu", "mem": "memory", "gpu": "example.com/gpu", "nvgpu": "nvidia.com/gpu"}

# The table's shared node sets (tas_cache_test.go L75-L330).
FIXTURES = {
    "defaultNodes": (
        "b1-r1-x3[block=b1,rack=r1,host=x3]{cpu:1, mem:1Gi, pods:10}; "
        "b1-r2-x5[block=b1,rack=r2,host=x5]{cpu:1, mem:1Gi, pods:10}; "
        "b1-r2-x1[block=b1,rack=r2,host=x1]{cpu:1, mem:1Gi, pods:10}; "
        "b1-r2-x6[block=b1,rack=r2,host=x6]{cpu:1, mem:1Gi, pods:10}; "
        "b2-r2-x2[block=b2,rack=r1,host=x2]{cpu:1, mem:1Gi, pods:10}; "
        "b2-r2-x4[block=b2,rack=r2,host=x4]{cpu:2, mem:4Gi, pods:40}"
    ),
    "scatteredNodes": (
        "b1-r1-x3[block=b1,rack=r1,host=x3]{cpu:4, mem:1Gi, pods:10}; "
        "b1-r1-x5[block=b1,rack=r1,host=x5]{cpu:1, mem:1Gi, pods:10}; "
        "b1-r1-x1[block=b1,rack=r1,host=x1]{cpu:1, mem:1Gi, pods:10}; "
        "b2-r1-x6[block=b2,rack=r1,host=x6]{cpu:2, mem:1Gi, pods:10}; "
        "b2-r1-x2[block=b2,rack=r1,host=x2]{cpu:1, mem:1Gi, pods:10}"
    ),
    "multipodNodeset": (
        "b1-r1-x3[block=b1,rack=r1,host=x3]{cpu:10, mem:1Gi, pods:10}; "
        "b1-r2-x5[block=b1,rack=r2,host=x5]{cpu:10, mem:1Gi, pods:10}; "
        "b1-r2-x1[block=b1,rack=r2,host=x1]{cpu:10, mem:1Gi, pods:10}; "
        "b1-r2-x6[block=b1,rack=r2,host=x6]{cpu:10, mem:1Gi, pods:10}; "
        "b2-r1-x2[block=b2,rack=r1,host=x2]{cpu:10, mem:1Gi, pods:10}; "
        "b2-r2-x4[block=b2,rack=r2,host=x4]{cpu:20, mem:4Gi, pods:40}"
    ),
    "binaryTreesNodes": "; ".join(
        f"{b}-{r}-{x}[block={b},rack={r},host={x}]{{cpu:1, mem:1Gi, pods:10}}"
        for b, r, x in (
            ("b1", "r1", "x3"),
            ("b1", "r1", "x5"),
            ("b1", "r2", "x1"),
            ("b1", "r2", "x6"),
            ("b2", "r1", "x2"),
            ("b2", "r1", "x4"),
            ("b2", "r2", "x7"),
            ("b2", "r2", "x8"),
        )
    ),
}
# Case #117's nodes, made by a loop in the source: 1 dc x 2 aizones x 2 blocks x 2 racks,
# 18 nodes a rack of 2 GPUs each.
FIXTURES["generated (8 racks x 18 nodes, see source)"] = "; ".join(
    f"{block}-{rack}-{az}-n{i}[dc=dc0,aizone={az},block={block},rack={rack}]"
    f"{{nvidia.com/gpu:2, pods:110}}"
    for az, block, rack in (
        ("aizone0", "block0", "r0"),
        ("aizone0", "block0", "r1"),
        ("aizone0", "block1", "r2"),
        ("aizone0", "block1", "r3"),
        ("aizone1", "block2", "r4"),
        ("aizone1", "block2", "r5"),
        ("aizone1", "block3", "r6"),
        ("aizone1", "block3", "r7"),
    )
    for i in range(18)
)

# Kueue v0.19.2's defaults: a case that sets a gate to its default is run; one that needs a
# gate off by default (or a default one off) tests what Tower does not do.
DEFAULT_GATES = {
    "TASProfileMixed": "on",
    "TASMultiLayerTopology": "on",
    "TASBalancedPlacement": "off",
    "SkipReassignmentForPodOwnedWorkloads": "on",
}


@dataclass
class Expected:
    assignment: TopologyAssignment | None = None
    reason: str | None = None


@dataclass
class Case:
    number: int
    line: int
    name: str
    nodes: list[Node] = field(default_factory=list)
    levels: tuple[str, ...] = ()
    node_labels: dict[str, str] = field(default_factory=dict)
    pods: list[tuple[str, dict[str, int]]] = field(default_factory=list)  # (node name, requests)
    prior: list[tuple[tuple[str, ...], dict[str, int], int]] = field(default_factory=list)
    pod_sets: list[PodSetPlacement] = field(default_factory=list)
    expected: dict[str, Expected] = field(default_factory=dict)
    skip: str | None = None


def _label(key: str) -> str:
    key = key.strip()
    if key.startswith('"'):
        return key.strip('"')
    return LABELS[key]


def _amount(resource: str, text: str) -> int:
    return to_amount(resource, text.strip())


def _nodes(text: str) -> list[Node]:
    out = []
    for part in text.split("; "):
        m = re.match(r"\s*([^\[]+)\[([^\]]*)\]\{([^}]*)\}(.*)$", part)
        if m is None:
            raise ValueError(f"cannot read node {part!r}")
        name, labels_text, alloc_text, rest = m.groups()
        labels = {}
        for item in filter(None, labels_text.split(",")):
            key, value = item.split("=", 1)
            labels[_label(key)] = value
        allocatable = {}
        for item in filter(None, (i.strip() for i in alloc_text.split(","))):
            item = item.replace("Name(", "")
            key, value = item.rsplit(":", 1)
            resource = RESOURCES.get(key, key)
            allocatable[resource] = _amount(resource, value)
        taints = tuple(
            Taint(k, v, e.replace("TaintEffect", ""))
            for k, v, e in re.findall(
                r'Taint\{Key: "([^"]*)", Value: "([^"]*)", Effect: (\w+)\}', rest
            )
        )
        ready = "NotReady" not in rest
        out.append(Node(name, labels, taints, allocatable, "Unschedulable" in rest, ready))
    return out


def _requests(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in filter(None, text.split(",")):
        key, value = item.split("=", 1)
        product = 1
        for factor in value.split("*"):  # "64 * 1024 * 1024" in two cases
            product *= int(factor)
        out[RESOURCES.get(key, key)] = product
    return out


def _expected(text: str, levels: tuple[str, ...]) -> Expected:
    text = text.strip()
    if text.startswith("reason"):
        body = text[len("reason") :].strip()
        if body.startswith("`"):
            return Expected(reason=body.strip("`"))
        return Expected(reason=body.strip('"').replace('\\"', '"'))
    m = re.match(r"\[([^\]]*)\]\s*(.*)$", text)
    if m is None:
        raise ValueError(f"cannot read expectation {text!r}")
    levels_text, domains_text = m.groups()
    result_levels = tuple(_label(k) for k in levels_text.split(","))
    domains = []
    for item in domains_text.replace("{", "").split():
        values, count = item.rsplit(":", 1)
        domains.append(DomainAssignment(tuple(values.split("/")), int(count)))
    return Expected(assignment=TopologyAssignment(result_levels, tuple(domains)))


def _pod_set(text: str, levels: tuple[str, ...]) -> tuple[PodSetPlacement, Expected]:
    spec, _, want = text.partition("⇒")
    name = ""
    m = re.match(r"\s*([\w-]+):\s(.*)$", spec)
    if m is not None and m.group(1) not in ("req", "pref"):
        name, spec = m.group(1), m.group(2)
    mode, level, implied = IMPLICIT, None, False
    if (m := re.search(r"\breq:(\S+)", spec)) is not None:
        mode, level = REQUIRED, _label(m.group(1))
    elif (m := re.search(r"\bpref:(\S+)", spec)) is not None:
        mode, level = PREFERRED, _label(m.group(1))
    elif re.search(r"\bunconstrained\b", spec):
        mode = UNCONSTRAINED
    elif "implied(no TR)" in spec:
        implied = True
    slices: tuple[SliceLayer, ...] = ()
    if (m := re.search(r"\bslice=(\S+)/(\S+)", spec)) is not None:
        size = 0 if m.group(2) == "-" else int(m.group(2))
        slices = (SliceLayer(_label(m.group(1)) if m.group(1) != "-" else "", size),)
    if (m := re.search(r"\blayers=(\S+)", spec)) is not None:
        slices = tuple(
            SliceLayer(_label(p.split("/")[0]), int(p.split("/")[1])) for p in m.group(1).split(",")
        )
    count = int(re.search(r"\bcount=(\d+)", spec).group(1))  # type: ignore[union-attr]
    requests = _requests(re.search(r"\breq\(([^)]*)\)", spec).group(1))  # type: ignore[union-attr]
    group = m.group(1) if (m := re.search(r"\bgroup=(\S+)", spec)) else None
    selector = {}
    if (m := re.search(r"nodeSelector=\{([^}]*)\}", spec)) is not None:
        for k, v in re.findall(r'"([^"]+)": "([^"]*)"', m.group(1)):
            selector[k] = v
    tolerations = tuple(
        Toleration(k, "Equal", v, "")
        for k, v in re.findall(r'Toleration\{Key: "([^"]*)", Value: "([^"]*)"', spec)
    )
    request = TopologyRequest(mode, level, slices, group)
    placement = PodSetPlacement(name, count, requests, request, implied, selector, (), tolerations)
    return placement, _expected(want, levels)


def parse(line: str) -> Case:
    head = re.match(r"- \*\*#(\d+)\*\* \(L(\d+)\) `([^`]*)`", line)
    if head is None:
        raise ValueError(f"not a case: {line[:60]}")
    case = Case(int(head.group(1)), int(head.group(2)), head.group(3))
    for part in line[head.end() :].split(" · "):
        part = part.strip()
        if part.startswith("gates"):
            for gate, value in re.findall(r"(\w+)=(on|off)", part):
                if DEFAULT_GATES.get(gate, "off") != value:
                    case.skip = f"feature gate {gate}={value} (not its v0.19.2 default)"
            if "…" in part:
                case.skip = "feature gates not transcribed"
        elif part.startswith("nodes:"):
            fixture = part.split(":", 1)[1].strip()
            if fixture not in FIXTURES:
                case.skip = f"nodes generated by code ({fixture})"
            else:
                case.nodes = _nodes(FIXTURES[fixture])
        elif part.startswith("nodes("):
            case.nodes = _nodes(part.split(":", 1)[1])
        elif part.startswith("levels"):
            m = re.match(r"levels \[([^\]]*)\]$", part)
            grown = re.match(r"levels append\(\{(\w+)\}, \[([^\]]*)\]\.\.\.\)$", part)
            if grown is not None:  # append({dc}, defaultThreeLevels...)
                case.levels = tuple(_label(k) for k in (grown.group(1), *grown.group(2).split(",")))
            elif m is None:
                case.skip = case.skip or f"levels built by code ({part})"
            else:
                case.levels = tuple(_label(k) for k in m.group(1).split(","))
        elif part.startswith("nodeLabels:"):
            for k, v in re.findall(r'"([^"]+)": "([^"]*)"', part):
                case.node_labels[k] = v
        elif part.startswith("pods:"):
            for pod in part.split("Pod(")[1:]:
                node = re.search(r'NodeName\("([^"]+)"\)', pod)
                phase = re.search(r"StatusPhase\((\w+)\)", pod)
                if node is None or (phase and phase.group(1) in ("PodFailed", "PodSucceeded")):
                    continue
                cpu = re.search(r'Request\(CPU, "([^"]+)"\)', pod)
                requests = {"cpu": _amount("cpu", cpu.group(1))} if cpu else {}
                case.pods.append((node.group(1), requests))
        elif part.startswith("priorOwnUsage:"):
            for values, cpu, n in re.findall(
                r"\{\{([^}]*)\}, SinglePodRequests: [^{]*\{CPU: (\d+)\}\), n=(\d+)\}", part
            ):
                case.prior.append(
                    (tuple(re.findall(r'"([^"]+)"', values)), {"cpu": int(cpu)}, int(n))
                )
        elif part.startswith("priorFlavorUsage:"):
            case.skip = case.skip or "usage of a sibling flavor on shared hosts"
        elif part.startswith("workload:"):
            case.skip = case.skip or "node replacement of an admitted workload"
        elif part.startswith("podsets:"):
            body = part.split(":", 1)[1]
            if "prev[" in body:
                case.skip = case.skip or "elastic workload's previous assignment"
            if "Affinity[" in body:
                case.skip = case.skip or "node affinity terms not transcribed"
            for text in body.split(" ‖ "):
                placement, expected = _pod_set(text, case.levels)
                case.pod_sets.append(placement)
                case.expected[placement.name] = expected
    return case


def cases() -> list[Case]:
    """Every case of the table, in order (all 140 are transcribed)."""
    out = [
        parse(line)
        for line in DATA.read_text(encoding="utf-8").splitlines()
        if line.startswith("- **#")
    ]
    if [c.number for c in out] != list(range(1, 141)):
        raise ValueError(f"{DATA} does not hold cases 1 to 140 in order")
    return out
