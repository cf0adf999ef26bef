"""Kueue's concurrent admission: a parent Workload, one variant per flavor, and what to do next.

With the ConcurrentAdmission gate on, a Workload queued to a ClusterQueue that sets
`spec.concurrentAdmissionPolicy` becomes a parent (labelled `concurrent-admission-parent`): it
is never queued itself. One variant per flavor of the ClusterQueue's resource group is queued
instead, a copy of the parent owned by it and annotated with the one flavor it may take. The
first variant admitted lends the parent its admission, and the parent's job runs with it. With
`TryPreferredFlavors`, the variants of more preferred flavors stay queued: when one of them
fits, the admitted one is evicted (a migration), the parent follows it out, and the preferred
variant's admission becomes the parent's (pkg/controller/concurrentadmission in Kueue v0.19.2).

`decide` is the family's reconcile as Kueue orders it, over the family's state as values; the
controller (extender/kube/controller/concurrent/) reads the state and carries the actions out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from extender.core.api.parse import ManifestError
from extender.core.jobframework.workloads import creation_seconds

PARENT_LABEL = "kueue.x-k8s.io/concurrent-admission-parent"
ALLOWED_FLAVORS = "kueue.x-k8s.io/workload-allowed-resource-flavors"
PREEMPTION_GATE = "kueue.x-k8s.io/concurrent-admission"
POLICY_FIELD = "spec.concurrentAdmissionPolicy"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
TRY_PREFERRED = "TryPreferredFlavors"
RETAIN_FIRST = "RetainFirstAdmission"
# Kueue's WorkloadEvictedByFlavorMigration: the reason a less preferred variant is evicted with.
FLAVOR_MIGRATION = "FlavorMigration"
PARENT_WAITS = "admitted through its variants, one per flavor (concurrent admission)"
# What the cycle says of a variant that needs to preempt while its gate is closed.
PREEMPTION_GATED = "Workload requires preemption, but it's gated"
# Kueue opens one variant's gate at a time: the next one, this long after the last.
PREEMPTION_TIMEOUT = 300.0
_PARENTS_ONLY = (PARENT_LABEL, "kueue.x-k8s.io/job-uid")
_NAME_MAX = 253 - 1 - 5  # Kueue's workload names: a prefix, a dash and 5 hex of a hash

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Policy:
    """A ClusterQueue's spec.concurrentAdmissionPolicy.migration."""

    mode: str = TRY_PREFERRED
    last_acceptable: str | None = None  # constraints.lastAcceptableFlavorName


def _m(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def policy_of(cluster_queue: Mapping[str, Any] | None) -> Policy | None:
    """The policy a ClusterQueue object sets, or None (no concurrent admission there)."""
    spec = _m(_m(cluster_queue).get("spec"))
    if "concurrentAdmissionPolicy" not in spec or spec["concurrentAdmissionPolicy"] is None:
        return None
    migration = _m(_m(spec["concurrentAdmissionPolicy"]).get("migration"))
    last = _m(migration.get("constraints")).get("lastAcceptableFlavorName")
    return Policy(str(migration.get("mode") or TRY_PREFERRED), str(last) if last else None)


def flavor_order(cluster_queue: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The flavors of the ClusterQueue's first resource group, most preferred first (Kueue
    allows one group with a concurrentAdmissionPolicy)."""
    groups = _m(_m(cluster_queue).get("spec")).get("resourceGroups")
    if not isinstance(groups, list) or not groups:
        return ()
    flavors = _m(groups[0]).get("flavors")
    return tuple(str(_m(f).get("name")) for f in flavors or () if _m(f).get("name"))


def is_parent(workload: Mapping[str, Any]) -> bool:
    """Labelled the parent of a family."""
    return _m(_m(workload.get("metadata")).get("labels")).get(PARENT_LABEL) == "true"


def parent_of(workload: Mapping[str, Any]) -> tuple[str, str] | None:
    """(name, uid) of the parent Workload that owns a variant; None for any other Workload."""
    for owner in _m(workload.get("metadata")).get("ownerReferences") or ():
        owner = _m(owner)
        if owner.get("kind") == "Workload" and owner.get("apiVersion") == KUEUE_API:
            return str(owner.get("name") or ""), str(owner.get("uid") or "")
    return None


def variant_flavor(workload: Mapping[str, Any]) -> str:
    """The flavor a variant may take (the first of its annotation's list)."""
    value = _m(_m(workload.get("metadata")).get("annotations")).get(ALLOWED_FLAVORS)
    first = str(value or "").split(",")[0].strip()
    return first


def variant_name(parent_name: str, parent_uid: str, flavor: str) -> str:
    """Kueue's name for a parent's variant of a flavor: the parent's name without its hash,
    `-variant-<flavor>`, and a hash of the parent, its uid and the flavor."""
    base = parent_name.rsplit("-", 1)[0] if "-" in parent_name else parent_name
    text = f"Workload\nkueue.x-k8s.io\n{parent_name}\n{parent_uid}\n{flavor}"
    digest = hashlib.sha1(text.encode()).hexdigest()[:5]
    return f"{base}-variant-{flavor}"[:_NAME_MAX] + "-" + digest


def variant_manifest(parent: Mapping[str, Any], flavor: str) -> Obj:
    """A new variant of `parent` for `flavor`: its spec and labels, the flavor annotation, the
    concurrent-admission preemption gate (closed), owned by the parent."""
    meta = _m(parent.get("metadata"))
    # Not the job's Workload: the job's uid label stays the parent's.
    labels = {k: v for k, v in _m(meta.get("labels")).items() if k not in _PARENTS_ONLY}
    annotations = {**_m(meta.get("annotations")), ALLOWED_FLAVORS: flavor}
    spec = dict(_m(parent.get("spec")))
    gates = [g for g in spec.get("preemptionGates") or () if _m(g).get("name") != PREEMPTION_GATE]
    spec["preemptionGates"] = [*gates, {"name": PREEMPTION_GATE}]
    spec.pop("active", None)
    name, uid = str(meta.get("name") or ""), str(meta.get("uid") or "")
    return {
        "apiVersion": KUEUE_API,
        "kind": "Workload",
        "metadata": {
            "name": variant_name(name, uid, flavor),
            "namespace": meta.get("namespace"),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": KUEUE_API,
                    "kind": "Workload",
                    "name": name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


@dataclass(frozen=True, slots=True)
class Member:
    """A parent or a variant, as its conditions and spec say."""

    name: str
    flavor: str = ""  # a variant's
    active: bool = True  # spec.active
    reserved: bool = False  # QuotaReserved=True
    admitted: bool = False  # Admitted=True
    evicted: bool = False  # Evicted=True
    finished: bool = False  # Finished=True
    reason: str = ""  # Evicted's (or, for a parent, Finished's) reason
    message: str = ""
    evaluated: bool = False  # a cycle said something of it (it has a QuotaReserved condition)
    gated: bool = False  # the cycle found it needs to preempt, behind its closed gate
    gate_opened_at: float | None = None  # when its concurrent-admission gate was opened


@dataclass(frozen=True, slots=True)
class Create:
    flavor: str


@dataclass(frozen=True, slots=True)
class Delete:
    """A variant whose flavor the ClusterQueue no longer has."""

    name: str
    flavor: str


@dataclass(frozen=True, slots=True)
class SetActive:
    name: str
    active: bool
    why: str


@dataclass(frozen=True, slots=True)
class EvictParent:
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class ClearVariant:
    """An evicted variant gives its quota back (its parent holds none any more)."""

    name: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class AdmitParent:
    """The parent takes the admission of this variant."""

    variant: str


@dataclass(frozen=True, slots=True)
class FinishVariant:
    name: str
    reason: str
    message: str


Action = Create | Delete | SetActive | EvictParent | ClearVariant | AdmitParent | FinishVariant


def decide(
    parent: Member, variants: Sequence[Member], flavors: Sequence[str], policy: Policy
) -> tuple[Action, ...]:
    """What a family needs now, in Kueue's order: the variants made and pruned to the
    ClusterQueue's flavors; an evicted variant's eviction passed to the parent (or, once the
    parent holds nothing, its quota given back); variants deactivated below the admitted one
    and activated above it; and the parent admitted, evicted or finished as its variants."""
    if parent.finished:
        return tuple(
            FinishVariant(v.name, parent.reason, parent.message) for v in variants if not v.finished
        )
    order = {f: i for i, f in enumerate(flavors)}
    actions: list[Action] = [Create(f) for f in flavors if not any(v.flavor == f for v in variants)]
    actions += [Delete(v.name, v.flavor) for v in variants if v.flavor not in order]
    family = sorted((v for v in variants if v.flavor in order), key=lambda v: order[v.flavor])
    for index, variant in enumerate(family):
        if not (variant.evicted and variant.reserved):
            continue
        if parent.reserved:
            if not parent.evicted:
                actions.append(EvictParent("VariantEvicted", "Admitted variant was evicted"))
            return tuple(actions)  # the parent gives its quota back first
        actions.append(ClearVariant(variant.name, variant.reason, variant.message))
        family[index] = replace(variant, reserved=False, admitted=False, evicted=False)
        break
    family = _set_active(parent, family, order, policy, actions)
    admitted = next((v for v in family if v.admitted), None)
    if admitted is None and parent.admitted:
        actions.append(EvictParent("ConcurrentAdmission", "No variant is running"))
    elif admitted is not None and not parent.reserved:
        actions.append(AdmitParent(admitted.name))
    return tuple(actions)


def _set_active(
    parent: Member,
    family: list[Member],
    order: Mapping[str, int],
    policy: Policy,
    actions: list[Action],
) -> list[Member]:
    """Kueue's deactivateVariants then activateVariants: the family with the spec.active each
    variant should have, each change added to `actions`."""
    wanted = {v.name: v.active for v in family}
    admitted = next((v for v in family if v.admitted), None)
    last = order.get(policy.last_acceptable) if policy.last_acceptable is not None else None
    why: dict[str, str] = {}
    if not parent.active:
        for v in family:
            wanted[v.name], why[v.name] = False, f"Parent Workload {parent.name} not active"
    elif admitted is not None:
        rank = order[admitted.flavor]
        for v in family:
            if v.name == admitted.name:
                continue
            if policy.mode == RETAIN_FIRST:
                wanted[v.name] = False
                why[v.name] = f"RetainFirstAdmission: another Variant {admitted.name} is admitted"
            elif order[v.flavor] > rank or (last is not None and order[v.flavor] > last):
                wanted[v.name] = False
                why[v.name] = f"being lower priority than admitted Variant {admitted.name}"
            elif order[v.flavor] < rank:
                wanted[v.name] = True
                why[v.name] = f"being higher priority than admitted Variant {admitted.name}"
    else:
        for v in family:
            wanted[v.name], why[v.name] = True, "no other Variant being admitted"
    out = []
    for v in family:
        if wanted[v.name] != v.active:
            actions.append(SetActive(v.name, wanted[v.name], why[v.name]))
            v = replace(v, active=wanted[v.name])
        out.append(v)
    return out


def variant_to_ungate(variants: Sequence[Member], flavors: Sequence[str], now: float) -> str | None:
    """The variant whose preemption gate opens now, if any (Kueue's
    selectVariantToOpenPreemptionGate): among the variants that may still be admitted, in the
    flavors' order, the first that the cycle found gated; none while a variant before it was
    not judged yet, nor while another gate opened less than PREEMPTION_TIMEOUT ago."""
    order = {f: i for i, f in enumerate(flavors)}
    waiting = sorted(
        (
            v
            for v in variants
            if v.active and not v.finished and not v.reserved and v.flavor in order
        ),
        key=lambda v: order[v.flavor],
    )
    candidate = None
    for variant in waiting:
        if variant.gate_opened_at is not None:
            continue
        if variant.gated:
            candidate = variant
            break
        if not variant.evaluated:
            return None  # not judged yet: it may fit without preempting
    if candidate is None:
        return None
    opened = [v.gate_opened_at for v in waiting if v.gate_opened_at is not None]
    if opened and now - max(opened) < PREEMPTION_TIMEOUT:
        return None
    return candidate.name


def gate_opened_at(workload: Mapping[str, Any]) -> float | None:
    """When the concurrent-admission preemption gate of a variant was opened (None: closed)."""
    for gate in _m(workload.get("status")).get("preemptionGates") or ():
        gate = _m(gate)
        if gate.get("name") == PREEMPTION_GATE and gate.get("position") == "Open":
            try:
                return creation_seconds(gate.get("lastTransitionTime"), "time")
            except ManifestError:
                return 0.0
    return None


def member(workload: Mapping[str, Any]) -> Member:
    """A Workload object as a member of its family."""
    meta = _m(workload.get("metadata"))

    def true(kind: str) -> Mapping[str, Any] | None:
        for c in _m(workload.get("status")).get("conditions") or ():
            if _m(c).get("type") == kind and _m(c).get("status") == "True":
                return _m(c)
        return None

    evicted, finished = true("Evicted"), true("Finished")
    said = evicted or finished or {}
    reserved = next(
        (_m(c) for c in _m(workload.get("status")).get("conditions") or ()
         if _m(c).get("type") == "QuotaReserved"),
        None,
    )  # fmt: skip
    return Member(
        name=str(meta.get("name") or ""),
        flavor=variant_flavor(workload),
        active=_m(workload.get("spec")).get("active") is not False,
        reserved=true("QuotaReserved") is not None,
        admitted=true("Admitted") is not None,
        evicted=evicted is not None,
        finished=finished is not None,
        reason=str(said.get("reason") or ""),
        message=str(said.get("message") or ""),
        evaluated=reserved is not None,
        gated=reserved is not None
        and reserved.get("status") == "False"
        and reserved.get("message") == PREEMPTION_GATED,
        gate_opened_at=gate_opened_at(workload),
    )
