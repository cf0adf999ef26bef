"""Kueue manifests (v1beta2 and v1beta1 dicts) into core models, with Kueue's validation rules."""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from extender.core.api import schema
from extender.core.api.labels import (
    LabelSelector,
    NodeSelectorTerm,
    Requirement,
    Taint,
    Toleration,
)
from extender.core.api.models import (
    GROUP,
    TOPOLOGY_KEY_ANNOTATION,
    AdmissionCheck,
    CheckRule,
    ClusterQueue,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    FungibilityPolicy,
    LocalQueue,
    Namespace,
    Preemption,
    PriorityClass,
    QueueingStrategy,
    ReclaimWithinCohort,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    StopPolicy,
    WithinClusterQueue,
    WorkloadPriorityClass,
)
from extender.core.api.quantity import QuantityError, parse_quantity, to_amount
from extender.core.api.topology import HOSTNAME, Topology
from extender.core.api.unacted import blocking

KUEUE_VERSIONS = (f"{GROUP}/v1beta2", f"{GROUP}/v1beta1")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_MAX_FLAVOR_LABELS = 8


class ManifestError(ValueError):
    """A manifest that Kueue's API would reject: names the field path and what is wrong."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


Obj = Mapping[str, Any]


def as_map(value: Any, path: str, *, required: bool = False) -> Obj:
    """The value as an object ({} when absent); a ManifestError naming the path otherwise."""
    if value is None:
        if required:
            raise ManifestError(path, "is required")
        return {}
    if not isinstance(value, Mapping):
        raise ManifestError(path, f"must be an object, got {type(value).__name__}")
    return value


def as_list(value: Any, path: str) -> list[Any]:
    """The value as a list ([] when absent); a ManifestError naming the path otherwise."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ManifestError(path, f"must be a list, got {type(value).__name__}")
    return value


def _str(value: Any, path: str, *, required: bool = False) -> str | None:
    if value is None or value == "":
        if required:
            raise ManifestError(path, "is required")
        return None
    if not isinstance(value, str):
        raise ManifestError(path, f"must be a string, got {value!r}")
    return value


def _enum(value: Any, path: str, allowed: tuple[str, ...], default: str) -> str:
    if value is None:
        return default
    if value not in allowed:
        raise ManifestError(path, f"must be one of {', '.join(allowed)}, got {value!r}")
    return str(value)


def _int(value: Any, path: str, *, required: bool = False) -> int | None:
    if value is None:
        if required:
            raise ManifestError(path, "is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ManifestError(path, f"must be an integer, got {value!r}")
    return value


def _quantity(resource: str, value: Any, path: str) -> int:
    try:
        amount = to_amount(resource, value)
    except QuantityError:
        raise ManifestError(path, f"{value!r} is not a Kubernetes quantity") from None
    if amount < 0:
        raise ManifestError(path, f"must be greater than or equal to 0, got {value!r}")
    return amount


def _weight(value: Any, path: str) -> Fraction:
    if value is None:
        return Fraction(1)
    try:
        weight = parse_quantity(value)
    except QuantityError:
        raise ManifestError(path, f"{value!r} is not a Kubernetes quantity") from None
    if weight < 0:
        raise ManifestError(path, f"must be greater than or equal to 0, got {value!r}")
    return weight


def name_of(obj: Obj) -> str:
    """metadata.name, required and a DNS-1123 subdomain."""
    meta = as_map(obj.get("metadata"), "metadata", required=True)
    name = _str(meta.get("name"), "metadata.name", required=True)
    assert name is not None
    if not is_dns1123_subdomain(name):
        raise ManifestError(
            "metadata.name",
            f"{name!r} must be a lowercase RFC 1123 subdomain "
            "(lowercase letters, digits, '-' and '.')",
        )
    return name


def check_version(obj: Obj, kind: str) -> str:
    """The apiVersion of a Kueue object, which must be v1beta2 or v1beta1."""
    version = obj.get("apiVersion")
    if version not in KUEUE_VERSIONS:
        raise ManifestError(
            "apiVersion", f"{kind} must be {' or '.join(KUEUE_VERSIONS)}, got {version!r}"
        )
    return str(version)


def label_selector(value: Any, path: str) -> LabelSelector:
    """A metav1.LabelSelector dict."""
    sel = as_map(value, path)
    labels = as_map(sel.get("matchLabels"), f"{path}.matchLabels")
    exprs = []
    for i, expr in enumerate(as_list(sel.get("matchExpressions"), f"{path}.matchExpressions")):
        epath = f"{path}.matchExpressions[{i}]"
        expr = as_map(expr, epath)
        key = _str(expr.get("key"), f"{epath}.key", required=True)
        op = _enum(
            expr.get("operator"), f"{epath}.operator", ("In", "NotIn", "Exists", "DoesNotExist"), ""
        )
        if not op:
            raise ManifestError(f"{epath}.operator", "is required")
        values = tuple(str(v) for v in as_list(expr.get("values"), f"{epath}.values"))
        if op in ("In", "NotIn") and not values:
            raise ManifestError(f"{epath}.values", f"must be non-empty for operator {op}")
        assert key is not None
        exprs.append(Requirement(key, op, values))
    return LabelSelector(tuple((str(k), str(v)) for k, v in labels.items()), tuple(exprs))


def node_selector_terms(value: Any, path: str) -> tuple[NodeSelectorTerm, ...]:
    """requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms."""
    terms = []
    for i, term in enumerate(as_list(value, path)):
        tpath = f"{path}[{i}]"
        reqs = []
        exprs = as_list(as_map(term, tpath).get("matchExpressions"), f"{tpath}.matchExpressions")
        for j, expr in enumerate(exprs):
            epath = f"{tpath}.matchExpressions[{j}]"
            expr = as_map(expr, epath)
            reqs.append(
                Requirement(
                    str(expr.get("key", "")),
                    str(expr.get("operator", "")),
                    tuple(str(v) for v in as_list(expr.get("values"), f"{epath}.values")),
                )
            )
        terms.append(NodeSelectorTerm(tuple(reqs)))
    return tuple(terms)


def tolerations(value: Any, path: str) -> tuple[Toleration, ...]:
    """A list of core/v1 Tolerations."""
    out = []
    for i, t in enumerate(as_list(value, path)):
        tpath = f"{path}[{i}]"
        t = as_map(t, tpath)
        op = _enum(t.get("operator"), f"{tpath}.operator", ("Equal", "Exists"), "Equal")
        effect = _enum(t.get("effect"), f"{tpath}.effect", ("", *_TAINT_EFFECTS), "")
        out.append(
            Toleration(
                key=str(t.get("key") or ""),
                operator=op,
                value=str(t.get("value") or ""),
                effect=effect,
                toleration_seconds=_int(t.get("tolerationSeconds"), f"{tpath}.tolerationSeconds"),
            )
        )
    return tuple(out)


def resource_flavor(obj: Obj) -> ResourceFlavor:
    """A ResourceFlavor manifest."""
    check_version(obj, "ResourceFlavor")
    name = name_of(obj)
    spec = as_map(obj.get("spec"), "spec")
    labels = as_map(spec.get("nodeLabels"), "spec.nodeLabels")
    if len(labels) > _MAX_FLAVOR_LABELS:
        raise ManifestError("spec.nodeLabels", f"must have at most 8 entries, got {len(labels)}")
    taints = []
    raw_taints = as_list(spec.get("nodeTaints"), "spec.nodeTaints")
    if len(raw_taints) > _MAX_FLAVOR_LABELS:
        raise ManifestError("spec.nodeTaints", f"must have at most 8 items, got {len(raw_taints)}")
    for i, t in enumerate(raw_taints):
        tpath = f"spec.nodeTaints[{i}]"
        t = as_map(t, tpath)
        key = _str(t.get("key"), f"{tpath}.key", required=True)
        effect = _enum(t.get("effect"), f"{tpath}.effect", _TAINT_EFFECTS, "")
        if not effect:
            raise ManifestError(f"{tpath}.effect", "is required")
        assert key is not None
        taints.append(Taint(key, str(t.get("value") or ""), effect))
    tols = tolerations(spec.get("tolerations"), "spec.tolerations")
    if len(tols) > _MAX_FLAVOR_LABELS:
        raise ManifestError("spec.tolerations", f"must have at most 8 items, got {len(tols)}")
    return ResourceFlavor(
        name=name,
        node_labels={str(k): str(v) for k, v in labels.items()},
        node_taints=tuple(taints),
        tolerations=tols,
        topology_name=_str(spec.get("topologyName"), "spec.topologyName"),
        topology_key=_topology_key(obj),
    )


def _topology_key(obj: Obj) -> str | None:
    meta = as_map(obj.get("metadata"), "metadata")
    annotations = as_map(meta.get("annotations"), "metadata.annotations")
    path = f"metadata.annotations[{TOPOLOGY_KEY_ANNOTATION}]"
    key = _str(annotations.get(TOPOLOGY_KEY_ANNOTATION), path)
    if key is not None and not key.strip():
        raise ManifestError(path, "must name a node label, e.g. topology.kubernetes.io/zone")
    return key


def resource_groups(value: Any, path: str, *, has_parent: bool) -> tuple[ResourceGroup, ...]:
    """spec.resourceGroups of a ClusterQueue or Cohort, with Kueue's cross-field rules."""
    groups = []
    seen_resources: dict[str, int] = {}
    for gi, group in enumerate(as_list(value, path)):
        gpath = f"{path}[{gi}]"
        group = as_map(group, gpath)
        covered = [
            str(r) for r in as_list(group.get("coveredResources"), f"{gpath}.coveredResources")
        ]
        if not covered:
            raise ManifestError(f"{gpath}.coveredResources", "must list at least one resource")
        for r in covered:
            if r in seen_resources:
                raise ManifestError(
                    f"{gpath}.coveredResources",
                    f"resource {r!r} is already covered by resourceGroups[{seen_resources[r]}]; "
                    "a resource may be in one group only",
                )
            seen_resources[r] = gi
        flavors = []
        flavor_names: set[str] = set()
        raw_flavors = as_list(group.get("flavors"), f"{gpath}.flavors")
        if not raw_flavors:
            raise ManifestError(f"{gpath}.flavors", "must list at least one flavor")
        for fi, flavor in enumerate(raw_flavors):
            fpath = f"{gpath}.flavors[{fi}]"
            flavor = as_map(flavor, fpath)
            fname = _str(flavor.get("name"), f"{fpath}.name", required=True)
            assert fname is not None
            if fname in flavor_names:
                raise ManifestError(f"{fpath}.name", f"flavor {fname!r} is listed twice")
            flavor_names.add(fname)
            raw = as_list(flavor.get("resources"), f"{fpath}.resources")
            names = [
                str(as_map(r, f"{fpath}.resources[{i}]").get("name")) for i, r in enumerate(raw)
            ]
            if names != covered:
                raise ManifestError(
                    f"{fpath}.resources",
                    f"must list exactly the coveredResources {covered} in that order, got {names}",
                )
            quotas = []
            for ri, res in enumerate(raw):
                rpath = f"{fpath}.resources[{ri}]"
                rname = names[ri]
                if res.get("nominalQuota") is None:
                    raise ManifestError(f"{rpath}.nominalQuota", "is required")
                nominal = _quantity(rname, res["nominalQuota"], f"{rpath}.nominalQuota")
                borrowing = lending = None
                if res.get("borrowingLimit") is not None:
                    if not has_parent:
                        raise ManifestError(
                            f"{rpath}.borrowingLimit", "must be null when there is no cohort"
                        )
                    borrowing = _quantity(rname, res["borrowingLimit"], f"{rpath}.borrowingLimit")
                if res.get("lendingLimit") is not None:
                    if not has_parent:
                        raise ManifestError(
                            f"{rpath}.lendingLimit", "must be null when there is no cohort"
                        )
                    lending = _quantity(rname, res["lendingLimit"], f"{rpath}.lendingLimit")
                    if lending > nominal:
                        raise ManifestError(
                            f"{rpath}.lendingLimit",
                            f"must be less than or equal to nominalQuota "
                            f"({res['nominalQuota']}), got {res['lendingLimit']!r}",
                        )
                quotas.append(ResourceQuota(rname, nominal, borrowing, lending))
            flavors.append(FlavorQuotas(fname, tuple(quotas)))
        groups.append(ResourceGroup(tuple(covered), tuple(flavors)))
    return tuple(groups)


def _api_enum(kind: str, version: str, path: str, value: Any) -> str:
    """An enum field checked against the API's schema (extender/core/api/schema.py) at the
    manifest's version, its default filled in ("" when it has none), and a value v1beta1
    spells differently turned into v1beta2's."""
    at = version.rsplit("/", 1)[-1]
    default = schema.default(kind, at, path)
    got = _enum(value, path, schema.enum(kind, at, path), "" if default is None else str(default))
    return schema.value_renames(kind, path).get(got, got) if at == "v1beta1" else got


def cluster_queue(obj: Obj) -> ClusterQueue:
    """A ClusterQueue manifest (v1beta2, or v1beta1 with `cohort`)."""
    kind = "ClusterQueue"
    version = check_version(obj, kind)
    name = name_of(obj)
    spec = as_map(obj.get("spec"), "spec")
    v1beta1 = version.endswith("v1beta1")
    cohort_field = schema.name_at(kind, "spec.cohortName", "v1beta1" if v1beta1 else "v1beta2")
    if not v1beta1 and "cohort" in spec:
        raise ManifestError("spec.cohort", "unknown field in v1beta2 (it is spec.cohortName)")
    cohort = _str(spec.get(cohort_field), f"spec.{cohort_field}")
    groups = resource_groups(
        spec.get("resourceGroups"), "spec.resourceGroups", has_parent=cohort is not None
    )
    strategy = _api_enum(kind, version, "spec.queueingStrategy", spec.get("queueingStrategy"))
    selector = (
        None
        if spec.get("namespaceSelector") is None
        else label_selector(spec["namespaceSelector"], "spec.namespaceSelector")
    )
    fung = as_map(spec.get("flavorFungibility"), "spec.flavorFungibility")
    when_borrow = _api_enum(
        kind, version, "spec.flavorFungibility.whenCanBorrow", fung.get("whenCanBorrow")
    )
    when_preempt = _api_enum(
        kind, version, "spec.flavorFungibility.whenCanPreempt", fung.get("whenCanPreempt")
    )
    preference = (
        _api_enum(kind, version, "spec.flavorFungibility.preference", fung["preference"])
        if fung.get("preference") is not None
        else None
    )
    pre = as_map(spec.get("preemption"), "spec.preemption")
    within = _api_enum(
        kind, version, "spec.preemption.withinClusterQueue", pre.get("withinClusterQueue")
    )
    reclaim = _api_enum(
        kind, version, "spec.preemption.reclaimWithinCohort", pre.get("reclaimWithinCohort")
    )
    bwc = as_map(pre.get("borrowWithinCohort"), "spec.preemption.borrowWithinCohort")
    bwc_policy = _api_enum(
        kind, version, "spec.preemption.borrowWithinCohort.policy", bwc.get("policy")
    )
    if reclaim == "Never" and bwc_policy != "Never":
        raise ManifestError(
            "spec.preemption",
            "reclaimWithinCohort=Never and borrowWithinCohort.policy!=Never cannot be combined",
        )
    stop = _api_enum(kind, version, "spec.stopPolicy", spec.get("stopPolicy"))
    fair = as_map(spec.get("fairSharing"), "spec.fairSharing")
    return ClusterQueue(
        name=name,
        resource_groups=groups,
        cohort=cohort,
        queueing_strategy=QueueingStrategy(strategy),
        namespace_selector=selector,
        flavor_fungibility=FlavorFungibility(
            FungibilityPolicy(when_borrow), FungibilityPolicy(when_preempt), preference
        ),
        preemption=Preemption(
            WithinClusterQueue(within),
            ReclaimWithinCohort(reclaim),
            bwc_policy,
            _int(
                bwc.get("maxPriorityThreshold"),
                "spec.preemption.borrowWithinCohort.maxPriorityThreshold",
            ),
        ),
        stop_policy=StopPolicy(stop),
        fair_weight=_weight(fair.get("weight"), "spec.fairSharing.weight"),
        admission_checks=check_rules(spec, v1beta1),
        admission_fair_sharing=as_map(spec.get("admissionScope"), "spec.admissionScope").get(
            "admissionMode"
        )
        == "UsageBasedAdmissionFairSharing",
        unacted=blocking("ClusterQueue", obj),
    )


def check_rules(spec: Obj, v1beta1: bool) -> tuple[CheckRule, ...]:
    """The AdmissionChecks a ClusterQueue asks for: spec.admissionChecksStrategy, or
    v1beta1's spec.admissionChecks (every check for every flavor); not both, as Kueue says."""
    strategy = as_map(spec.get("admissionChecksStrategy"), "spec.admissionChecksStrategy")
    plain = as_list(spec.get("admissionChecks"), "spec.admissionChecks") if v1beta1 else []
    if plain and strategy:
        raise ManifestError(
            "spec.admissionChecks",
            "either spec.admissionChecks or spec.admissionChecksStrategy can be set, not both",
        )
    if plain:
        names = [_str(n, f"spec.admissionChecks[{i}]", required=True) for i, n in enumerate(plain)]
        return tuple(CheckRule(str(n)) for n in dict.fromkeys(names))
    path = "spec.admissionChecksStrategy.admissionChecks"
    rules: dict[str, CheckRule] = {}
    for i, item in enumerate(as_list(strategy.get("admissionChecks"), path)):
        item = as_map(item, f"{path}[{i}]")
        name = _str(item.get("name"), f"{path}[{i}].name", required=True)
        assert name is not None
        if name in rules:
            raise ManifestError(f"{path}[{i}].name", f"duplicate AdmissionCheck {name!r}")
        flavors = as_list(item.get("onFlavors"), f"{path}[{i}].onFlavors")
        on = [_str(f, f"{path}[{i}].onFlavors[{j}]", required=True) for j, f in enumerate(flavors)]
        rules[name] = CheckRule(name, frozenset(str(f) for f in on))
    return tuple(rules.values())


def admission_check(obj: Obj) -> AdmissionCheck:
    """An AdmissionCheck manifest; `active` is read from its status' Active condition."""
    check_version(obj, "AdmissionCheck")
    name = name_of(obj)
    spec = as_map(obj.get("spec"), "spec")
    controller = _str(spec.get("controllerName"), "spec.controllerName", required=True)
    assert controller is not None
    params = spec.get("parameters")
    parameters = None
    if params is not None:
        params = as_map(params, "spec.parameters")
        group, kind, ref = (
            _str(params.get(f), f"spec.parameters.{f}", required=True)
            for f in ("apiGroup", "kind", "name")
        )
        parameters = (str(group), str(kind), str(ref))
    active, message = False, ""
    status = as_map(obj.get("status"), "status")
    for i, cond in enumerate(as_list(status.get("conditions"), "status.conditions")):
        cond = as_map(cond, f"status.conditions[{i}]")
        if cond.get("type") == "Active":
            active = cond.get("status") == "True"
            message = str(cond.get("message") or "")
    return AdmissionCheck(name, controller, parameters, active, message)


def topology(obj: Obj) -> Topology:
    """A Topology manifest: its node labels, widest level first."""
    check_version(obj, "Topology")
    name = name_of(obj)
    spec = as_map(obj.get("spec"), "spec", required=True)
    levels = as_list(spec.get("levels"), "spec.levels")
    if not levels:
        raise ManifestError("spec.levels", "must list at least one level")
    labels: list[str] = []
    for i, level in enumerate(levels):
        label = _str(
            as_map(level, f"spec.levels[{i}]").get("nodeLabel"),
            f"spec.levels[{i}].nodeLabel",
            required=True,
        )
        if label in labels:
            raise ManifestError(
                f"spec.levels[{i}].nodeLabel", f"{label} is already level {labels.index(label)}"
            )
        labels.append(str(label))
    if HOSTNAME in labels[:-1]:
        raise ManifestError("spec.levels", f"{HOSTNAME} may only be the last (lowest) level")
    return Topology(name, tuple(labels))


def cohort(obj: Obj) -> Cohort:
    """A Cohort manifest (hierarchical cohorts)."""
    check_version(obj, "Cohort")
    name = name_of(obj)
    spec = as_map(obj.get("spec"), "spec")
    parent = _str(spec.get("parentName"), "spec.parentName")
    fair = as_map(spec.get("fairSharing"), "spec.fairSharing")
    return Cohort(
        name=name,
        parent=parent,
        resource_groups=resource_groups(
            spec.get("resourceGroups"), "spec.resourceGroups", has_parent=parent is not None
        ),
        fair_weight=_weight(fair.get("weight"), "spec.fairSharing.weight"),
    )


def local_queue(obj: Obj, default_namespace: str = "default") -> LocalQueue:
    """A LocalQueue manifest."""
    version = check_version(obj, "LocalQueue")
    name = name_of(obj)
    namespace = _str(as_map(obj.get("metadata"), "metadata").get("namespace"), "metadata.namespace")
    spec = as_map(obj.get("spec"), "spec", required=True)
    cq = _str(spec.get("clusterQueue"), "spec.clusterQueue", required=True)
    assert cq is not None
    stop = _api_enum("LocalQueue", version, "spec.stopPolicy", spec.get("stopPolicy"))
    fair = as_map(spec.get("fairSharing"), "spec.fairSharing")
    weight = _weight(fair.get("weight"), "spec.fairSharing.weight")
    return LocalQueue(namespace or default_namespace, name, cq, StopPolicy(stop), float(weight))


def workload_priority_class(obj: Obj) -> WorkloadPriorityClass:
    """A WorkloadPriorityClass manifest (value is a top-level field)."""
    check_version(obj, "WorkloadPriorityClass")
    value = _int(obj.get("value"), "value", required=True)
    assert value is not None
    return WorkloadPriorityClass(name_of(obj), value)


def priority_class(obj: Obj) -> PriorityClass:
    """A scheduling.k8s.io/v1 PriorityClass manifest."""
    value = _int(obj.get("value"), "value", required=True)
    assert value is not None
    return PriorityClass(name_of(obj), value, bool(obj.get("globalDefault", False)))


def namespace(obj: Obj) -> Namespace:
    """A core/v1 Namespace; Kubernetes adds the kubernetes.io/metadata.name label itself."""
    name = name_of(obj)
    if not _DNS1123_LABEL.match(name) or len(name) > 63:
        raise ManifestError("metadata.name", f"{name!r} must be a DNS-1123 label")
    labels = as_map(as_map(obj.get("metadata"), "metadata").get("labels"), "metadata.labels")
    return Namespace(name, {**labels, "kubernetes.io/metadata.name": name})


def is_dns1123_subdomain(value: str) -> bool:
    """Whether a string is a lowercase RFC 1123 subdomain (object names, DNS names)."""
    return len(value) <= 253 and bool(_DNS1123_SUBDOMAIN.match(value))


def is_dns1123_label(value: str) -> bool:
    """Whether a string is a DNS-1123 label (queue names, namespace names)."""
    return len(value) <= 63 and bool(_DNS1123_LABEL.match(value))
