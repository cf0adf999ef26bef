"""Tower's CEL rules decide as Kueue's do, case by case, with a CEL evaluator as the judge.

Tower's CRDs word their own rules (extender/kube/generators/crds.py); Kueue's are in the copy of its
v0.19.2 schema (tests/data/kueue-v0.19.2/). For every place either has rules, each case below
(an object as kube-apiserver sees it after defaulting, and the old one for an update) must be
accepted by both or refused by both, and each place has cases of both kinds. A rule that
refers to oldSelf is skipped on create, as kube-apiserver skips it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import celpy
import pytest

from tests.unit.core.api.test_kueue_schema import find, kueue, tower, walk

Case = tuple[Any, Any]  # (self, oldSelf or None on create)
_ENV = celpy.Environment()
_PROGRAMS: dict[str, Any] = {}


def accepted(rules: list[dict[str, str]], case: Case) -> bool:
    new, old = case
    for rule in rules:
        text = rule["rule"]
        if old is None and re.search(r"\boldSelf\b", text):
            continue
        program = _PROGRAMS.get(text)
        if program is None:
            program = _PROGRAMS[text] = _ENV.program(_ENV.compile(text))
        activation = {"self": celpy.json_to_cel(new)}
        if old is not None:
            activation["oldSelf"] = celpy.json_to_cel(old)
        try:
            result = program.evaluate(activation)
        except Exception:  # an error in a rule refuses the object, as kube-apiserver does
            return False
        if not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
            return False  # false, or an error value
    return True


def create(obj: Any) -> Case:
    return (obj, None)


def update(old: Any, change: Callable[[Any], None]) -> Case:
    new = copy.deepcopy(old)
    change(new)
    return (new, old)


def group(quota: dict[str, Any], resources: int = 1) -> dict[str, Any]:
    return {
        "coveredResources": ["cpu", "memory"][:resources],
        "flavors": [{"name": "f", "resources": [quota] * resources}],
    }


def cq_spec(cohort: str) -> list[Case]:
    return [
        create({"resourceGroups": [group({"name": "cpu", "nominalQuota": 1})]}),
        create(
            {"resourceGroups": [group({"name": "cpu", "nominalQuota": 1, "borrowingLimit": 1})]}
        ),
        create(
            {
                cohort: "all",
                "resourceGroups": [group({"name": "cpu", "nominalQuota": 1, "borrowingLimit": 1})],
            }
        ),
        create({}),
    ]


FUNGIBILITY = [
    create({"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}),
    create(
        {
            "whenCanBorrow": "TryNextFlavor",
            "whenCanPreempt": "TryNextFlavor",
            "preference": "PreemptionOverBorrowing",
        }
    ),
    create(
        {
            "whenCanBorrow": "MayStopSearch",
            "whenCanPreempt": "TryNextFlavor",
            "preference": "BorrowingOverPreemption",
        }
    ),
]
PREEMPTION = [
    create({"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"}),
    create({"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "Never"}}),
    create({"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}),
    create({"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority"}}),
]
RESOURCE_GROUP = [
    create(group({"name": "cpu", "nominalQuota": 1}, 2)),
    create({"coveredResources": ["cpu", "memory"], "flavors": [{"name": "f", "resources": [{}]}]}),
]
TOLERATIONS = [
    create([{"key": "a", "operator": "Equal", "value": "b", "effect": "NoSchedule"}]),
    create([{"operator": "Exists"}]),
    create([{"value": "x"}]),
    create([{"key": "a", "tolerationSeconds": 5, "effect": "NoExecute"}]),
    create([{"key": "a", "tolerationSeconds": 5, "effect": "NoSchedule"}]),
    create([{"key": "a", "tolerationSeconds": 5}]),
    create([{"key": "a", "operator": "Sometimes"}]),
    create([{"key": "a", "operator": "Exists", "value": "b"}]),
    create([{"key": "a", "operator": "Exists"}]),
    create([{"key": "a", "effect": "Never"}]),
    create([]),
]
TAS = {"nodeLabels": {"gpu": "a"}, "topologyName": "default"}
FLAVOR_SPEC = [
    create({}),
    create(TAS),
    create({"topologyName": "default"}),
    create({"topologyName": "default", "nodeLabels": {}}),
    update(TAS, lambda s: s["nodeLabels"].update(gpu="b")),
    update(TAS, lambda s: s.pop("nodeLabels")),
    update(TAS, lambda s: s.update(tolerations=[{"key": "a", "operator": "Exists"}])),
    update({**TAS, "tolerations": [{"key": "a", "operator": "Exists"}]}, lambda s: None),
    update(TAS, lambda s: s.update(topologyName="other")),
    update(TAS, lambda s: s.pop("topologyName")),
    update({"nodeLabels": {"gpu": "a"}}, lambda s: s.update(nodeLabels={"gpu": "b"})),
]
TAINTS = [
    create([{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoExecute"}]),
    create([{"key": "a", "effect": "Sometimes"}]),
]


def reserved(obj: dict[str, Any], condition: str = "QuotaReserved") -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out.setdefault("status", {}).setdefault("conditions", []).append(
        {"type": condition, "status": "True"}
    )
    return out


def workload_root(v1: bool) -> list[Case]:
    base = {"spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1}]}}
    admitted = reserved(reserved(base), "Admitted")
    admitted["status"]["admission"] = {
        "clusterQueue": "cq",
        "podSetAssignments": [{"name": "main"}],
    }
    two = copy.deepcopy(admitted)
    two["status"]["admission"]["podSetAssignments"].append({"name": "other"})
    cases = [
        create(base),
        create(admitted),
        create(two),
        update(reserved(base), lambda w: w["spec"].update(queueName="other")),
        update(base, lambda w: w["spec"].update(queueName="other")),
        update(reserved(base), lambda w: w["spec"].pop("queueName")),
        update(admitted, lambda w: w["spec"].update(maximumExecutionTimeSeconds=60)),
        update(reserved(base), lambda w: w["spec"].update(maximumExecutionTimeSeconds=60)),
    ]
    if v1:
        with_class = copy.deepcopy(base)
        with_class["spec"].update(
            priorityClassSource="scheduling.k8s.io/priorityclass", priorityClassName="high"
        )
        wpc = copy.deepcopy(base)
        wpc["spec"].update(
            priorityClassSource="kueue.x-k8s.io/workloadpriorityclass", priorityClassName="high"
        )
        cases += [
            update(reserved(with_class), lambda w: w["spec"].update(priorityClassName="low")),
            update(with_class, lambda w: w["spec"].update(priorityClassName="low")),
            update(reserved(wpc), lambda w: w["spec"].update(priorityClassName="low")),
            update(
                reserved(with_class),
                lambda w: w["spec"].update(
                    priorityClassSource="kueue.x-k8s.io/workloadpriorityclass"
                ),
            ),
        ]
    else:
        ref = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "high"}
        wpc_ref = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}
        with_ref = copy.deepcopy(base)
        with_ref["spec"]["priorityClassRef"] = ref
        with_wpc = copy.deepcopy(base)
        with_wpc["spec"]["priorityClassRef"] = wpc_ref
        cases += [
            update(reserved(with_ref), lambda w: w["spec"]["priorityClassRef"].update(name="low")),
            update(with_ref, lambda w: w["spec"]["priorityClassRef"].update(name="low")),
            update(reserved(with_wpc), lambda w: w["spec"]["priorityClassRef"].update(name="low")),
            update(reserved(with_ref), lambda w: w["spec"].pop("priorityClassRef")),
            update(reserved(base), lambda w: w["spec"].update(priorityClassRef=ref)),
            update(
                reserved(with_ref),
                lambda w: w["spec"]["priorityClassRef"].update(group="kueue.x-k8s.io"),
            ),
            update(
                reserved(with_wpc),
                lambda w: w["spec"]["priorityClassRef"].update(kind="PriorityClass"),
            ),
        ]
    return cases


def workload_spec(v1: bool) -> list[Case]:
    ref: Any = "high" if v1 else {"group": "kueue.x-k8s.io", "kind": "x", "name": "high"}
    field = "priorityClassName" if v1 else "priorityClassRef"
    return [create({}), create({field: ref, "priority": 1}), create({field: ref})]


STATUS = [
    create({"clusterName": "a"}),
    create({"clusterName": "a", "nominatedClusterNames": ["b"]}),
    create({"clusterName": "a", "nominatedClusterNames": []}),
    update({"clusterName": "a"}, lambda s: s.update(clusterName="b")),
    update({}, lambda s: s.update(clusterName="b")),
]
ASSIGNMENT = [
    create({"levels": ["rack"], "slices": [{"valuesPerLevel": [{"universal": "r1"}]}]}),
    create({"levels": ["rack", "host"], "slices": [{"valuesPerLevel": [{"universal": "r1"}]}]}),
]
SLICE = [
    create({"domainCount": 2, "podCounts": {"individual": [1, 1]}, "valuesPerLevel": []}),
    create({"domainCount": 2, "podCounts": {"individual": [1]}, "valuesPerLevel": []}),
    create(
        {
            "domainCount": 2,
            "podCounts": {"universal": 1},
            "valuesPerLevel": [{"individual": {"roots": ["a", "b"]}}],
        }
    ),
    create(
        {
            "domainCount": 2,
            "podCounts": {"universal": 1},
            "valuesPerLevel": [{"individual": {"roots": ["a"]}}],
        }
    ),
]


def levels(*labels: str) -> list[dict[str, str]]:
    return [{"nodeLabel": label} for label in labels]


HOST = "kubernetes.io/hostname"
TOPOLOGY_LEVELS = [
    create(levels("block", "rack")),
    create(levels("block", "rack", HOST)),
    create(levels(HOST)),
    create(levels(HOST, "rack")),
    create(levels("block", "block")),
    create(levels("block", HOST, "rack")),
    (levels("block", "rack"), levels("block", "rack")),
    (levels("block"), levels("block", "rack")),
    (levels("block", "zone"), levels("block", "rack")),
]
KUBECONFIG = {"location": "worker1-secret", "locationType": "Secret"}
CLUSTER_SOURCE = [
    create({"kubeConfig": KUBECONFIG}),
    create({"clusterProfileRef": {"name": "worker1"}}),
    create({"kubeConfig": KUBECONFIG, "clusterProfileRef": {"name": "worker1"}}),
    create({}),
]
MULTIKUEUE_CLUSTERS = [
    create(["worker1"]),
    create(["worker1", "worker2"]),
    create(["worker1", "worker2", "worker1"]),
    create(["a", "a"]),
]
ONE_OF = [
    create({"universal": 1}),
    create({"individual": [1]}),
    create({}),
    create({"universal": 1, "individual": [1]}),
]


def cases_for(plural: str, version: str, path: str) -> list[Case]:
    v1 = version == "v1beta1"
    table: dict[tuple[str, str], list[Case]] = {
        ("clusterqueues", ".spec"): cq_spec("cohort" if v1 else "cohortName"),
        ("clusterqueues", ".spec.flavorFungibility"): FUNGIBILITY,
        ("clusterqueues", ".spec.preemption"): PREEMPTION,
        ("clusterqueues", ".spec.resourceGroups[]"): RESOURCE_GROUP,
        ("cohorts", ".spec.resourceGroups[]"): RESOURCE_GROUP,
        ("localqueues", ".spec.clusterQueue"): [create("cq"), ("cq", "cq"), ("other", "cq")],
        ("resourceflavors", ".spec"): FLAVOR_SPEC,
        ("topologies", ".spec.levels"): TOPOLOGY_LEVELS,
        ("multikueueclusters", ".spec.clusterSource"): CLUSTER_SOURCE,
        ("multikueueconfigs", ".spec.clusters"): MULTIKUEUE_CLUSTERS,
        ("resourceflavors", ".spec.nodeTaints"): TAINTS,
        ("resourceflavors", ".spec.tolerations"): TOLERATIONS,
        ("workloads", ""): workload_root(v1),
        ("workloads", ".spec"): workload_spec(v1),
        ("workloads", ".spec.podSets[]"): [
            create({"count": 4, "minCount": 2}),
            create({"count": 2, "minCount": 2}),
            create({"count": 2, "minCount": 4}),
            create({"count": 1}),
        ],
        ("workloads", ".spec.priorityClassRef"): [
            create({"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "a"}),
            create({"group": "kueue.x-k8s.io", "kind": "PriorityClass", "name": "a"}),
            create({"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "a"}),
            create({"group": "scheduling.k8s.io", "kind": "WorkloadPriorityClass", "name": "a"}),
        ],
        ("workloads", ".status"): STATUS,
        ("workloads", ".status.admissionChecks[].podSetUpdates[].tolerations"): TOLERATIONS,
        ("workloads", ".status.admission.podSetAssignments[].topologyAssignment"): ASSIGNMENT,
        ("workloads", ".status.admission.podSetAssignments[].topologyAssignment.slices[]"): SLICE,
        (
            "workloads",
            ".status.admission.podSetAssignments[].topologyAssignment.slices[].podCounts",
        ): ONE_OF,
        (
            "workloads",
            ".status.admission.podSetAssignments[].topologyAssignment.slices[].valuesPerLevel[]",
        ): [create({"universal": "a"}), create({}), create({"universal": "a", "individual": {}})],
    }
    return table[(plural, path)]


def places() -> list[tuple[str, str, str]]:
    out = []
    for plural in (
        "clusterqueues",
        "cohorts",
        "localqueues",
        "resourceflavors",
        "topologies",
        "workloads",
        "multikueueclusters",
        "multikueueconfigs",
    ):
        for version in kueue(plural)["versions"]:
            for path, schema in walk(version["schema"]["openAPIV3Schema"]):
                if schema.get("x-kubernetes-validations"):
                    out.append((plural, version["name"], path))
    return out


@pytest.mark.parametrize(("plural", "version", "path"), places())
def test_towers_rules_decide_as_kueues(plural: str, version: str, path: str) -> None:
    theirs = find(
        next(v for v in kueue(plural)["versions"] if v["name"] == version)["schema"][
            "openAPIV3Schema"
        ],
        path,
    )
    ours = find(
        next(v for v in tower(plural)["versions"] if v["name"] == version)["schema"][
            "openAPIV3Schema"
        ],
        path,
    )
    assert theirs is not None
    assert ours is not None
    verdicts = []
    for case in cases_for(plural, version, path):
        kueue_says = accepted(theirs["x-kubernetes-validations"], case)
        tower_says = accepted(ours.get("x-kubernetes-validations") or [], case)
        assert tower_says == kueue_says, (case, kueue_says)
        verdicts.append(kueue_says)
    assert True in verdicts, "no case that both accept"
    assert False in verdicts, "no case that both refuse"
