"""Pod groups: many pods, one Workload (Kueue's pod groups, and a StatefulSet's pods).

A plain pod group is named by its pods (`kueue.x-k8s.io/pod-group-name` with
`pod-group-total-count`): its Workload is made once all its members exist, one podSet per
role (pods of one shape share a role hash). A StatefulSet declares its group itself: one
Workload for all its replicas, made up front. Either way admission lifts the gate of every
member, and members that appear later while the Workload is admitted (a replacement) are let
through under the same admission.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.core.api.parse import ManifestError, is_dns1123_subdomain
from extender.core.jobframework.adapter import PodSetTemplate, as_mapping

GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
FAST_ADMISSION = "kueue.x-k8s.io/pod-group-fast-admission"
SERVING = "kueue.x-k8s.io/pod-group-serving"
ROLE_HASH = "kueue.x-k8s.io/role-hash"
RETRIABLE = "kueue.x-k8s.io/retriable-in-group"
POD_INDEX = "kueue.x-k8s.io/pod-group-pod-index"  # a member's rank, for topology placement
# Which label of a member holds its rank (a StatefulSet's apps.kubernetes.io/pod-index).
POD_INDEX_LABEL = "kueue.x-k8s.io/pod-group-pod-index-label"
# On a group's Workload: it is followed by its pods, not by one owner.
IS_GROUP_WORKLOAD = "kueue.x-k8s.io/is-group-workload"
OWNER_GVK = "kueue.x-k8s.io/job-owner-gvk"
OWNER_NAME = "kueue.x-k8s.io/job-owner-name"
MAX_ROLES = 18  # Kueue's limit of podSets in a Workload
WAITING_FOR_REPLACEMENT = "WaitingForReplacementPods"  # a Workload condition
# The group of a pod whose parent must first tell it (a LeaderWorkerSet's, before Tower stamps
# it): this prefix and the parent's name. The colon keeps it apart from every Workload name.
UNSTAMPED = "unstamped:"
# QuotaReserved=False with this reason: the quota was given back on purpose (a StatefulSet
# scaled to zero), and the Workload waits for no quota until its owner clears it (Kueue's).
ON_HOLD = "OnHold"
ON_HOLD_MESSAGE = "StatefulSet scaled to zero; workload on hold"
OFF_HOLD_MESSAGE = "Workload no longer on hold; waiting for quota reservation"

# The parts of a pod's spec that make its role: what it asks of a node, not what it runs.
_SHAPE_FIELDS = (
    "initContainers",
    "containers",
    "nodeSelector",
    "affinity",
    "tolerations",
    "runtimeClassName",
    "priority",
    "topologySpreadConstraints",
    "overhead",
    "resourceClaims",
)


def _go_json(value: Any) -> str:
    """JSON as Go's encoding/json writes it: compact, non-ASCII raw, <, > and & escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _containers(value: Any) -> list[dict[str, Any]] | None:
    if not isinstance(value, list):
        return None
    out = []
    for container in value:
        container = as_mapping(container)
        requests = as_mapping(container.get("resources")).get("requests")
        out.append(
            {
                "ports": container.get("ports"),
                "resources": {"requests": _sorted(requests)},
            }
        )
    return out


def _sorted(value: Any) -> Any:
    """A Go map's JSON: keys in order (a struct keeps its fields' order, as the API sent it)."""
    return {k: value[k] for k in sorted(value)} if isinstance(value, Mapping) else value


def role_hash(spec: Mapping[str, Any]) -> str:
    """Kueue's role hash of a pod: 8 hex digits of the SHA-256 of its spec's shape (requests,
    ports, node constraints, tolerations, priority), as Kueue's webhook computes it."""
    shape: dict[str, Any] = {}
    for name in _SHAPE_FIELDS:
        value = spec.get(name)
        if name in ("initContainers", "containers"):
            value = _containers(value)
        elif name in ("nodeSelector", "overhead"):
            value = _sorted(value)
        shape[name] = value
    if spec.get("resources") is not None:
        shape["resources"] = _sorted(as_mapping(spec.get("resources")).get("requests"))
    text = _go_json({"spec": {k: shape[k] for k in sorted(shape)}})
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def group_name(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(field path, name) of a pod's group: the annotation when set, else the label."""
    meta = as_mapping(obj.get("metadata"))
    for part in ("annotations", "labels"):
        value = as_mapping(meta.get(part)).get(GROUP_NAME)
        if isinstance(value, str) and value:
            return f"metadata.{part}[{GROUP_NAME}]", value
    return None


def _annotation(obj: Mapping[str, Any], key: str) -> Any:
    return as_mapping(as_mapping(obj.get("metadata")).get("annotations")).get(key)


def total_count(obj: Mapping[str, Any]) -> int:
    """A group member's `pod-group-total-count`; ManifestError names the annotation."""
    path = f"metadata.annotations[{TOTAL_COUNT}]"
    raw = _annotation(obj, TOTAL_COUNT)
    if raw is None:
        raise ManifestError(
            path, f"is required with {GROUP_NAME}: how many pods the group has in all"
        )
    try:
        count = int(str(raw))
    except ValueError:
        raise ManifestError(path, f"{raw!r} is not a whole number") from None
    if count < 1:
        raise ManifestError(path, f"must be at least 1, got {count}")
    return count


def check_member(obj: Mapping[str, Any]) -> None:
    """A pod's group metadata, as Kueue's webhook checks it at create."""
    found = group_name(obj)
    if found is None:
        if _annotation(obj, TOTAL_COUNT) is not None:
            raise ManifestError(
                f"metadata.labels[{GROUP_NAME}]",
                f"is required with {TOTAL_COUNT}: both name the pod's group",
            )
        return
    path, name = found
    if not is_dns1123_subdomain(name):
        raise ManifestError(path, f"{name!r} is not a valid Workload name (a DNS-1123 subdomain)")
    total_count(obj)


def check_member_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """A member stays in its group, and an unretriable group never becomes retriable."""
    before = group_name(old)
    if before is not None:
        after = group_name(new)
        if after is None or after[1] != before[1]:
            raise ManifestError(
                before[0],
                f"cannot change once set ({before[1]!r} to {after[1] if after else None!r})",
            )
    if _annotation(old, RETRIABLE) == "false" and _annotation(new, RETRIABLE) != "false":
        raise ManifestError(
            f"metadata.annotations[{RETRIABLE}]",
            "an unretriable pod group cannot be made retriable",
        )


@dataclass(frozen=True, slots=True)
class Member:
    """One pod of a group, as the group's rules read it."""

    name: str
    uid: str
    role: str  # its podSet in the group's Workload
    gated: bool  # still behind the admission gate
    phase: str  # Succeeded, Failed or Gone (deleted before it ran), else ""
    running: bool  # bound to a node and not ended: its containers may run
    holds: bool  # carries Kueue's finalizer
    unretriable: bool = False  # retriable-in-group: "false"
    total: int | None = None  # its pod-group-total-count (None when unreadable)
    fast: bool = False  # pod-group-fast-admission: "true"
    queue: str | None = None
    template: Mapping[str, Any] | None = None  # its spec as a pod template, while needed

    @property
    def runnable(self) -> bool:
        """Kueue's "active" member: not Failed, and not deleted before it ran."""
        return self.phase not in ("Failed", "Gone")


def _keep_order(member: Member) -> tuple[bool, bool, str]:
    # Kueue keeps first the pods it holds, then those already let through; names break ties
    # (Kueue uses creation times, which the cache does not keep).
    return (not member.holds, member.gated, member.name)


def compose(members: Sequence[Member], total: int, fast: bool) -> list[PodSetTemplate]:
    """A plain group's podSets from its members, one per role in name order; ManifestError
    while fewer than `total` runnable members exist (unless fast admission asks for one podSet
    of `total` pods from the first member)."""
    runnable = sorted((m for m in members if m.runnable), key=_keep_order)
    if not runnable:
        raise ManifestError("metadata.labels[" + GROUP_NAME + "]", "the group has no pods yet")
    if fast:
        first = runnable[0]
        return [
            PodSetTemplate(
                first.role, total, first.template or {}, "spec", pod_index_label=POD_INDEX
            )
        ]
    if len(runnable) < total:
        raise ManifestError(
            f"metadata.annotations[{TOTAL_COUNT}]",
            f"the group has {len(runnable)} of its {total} pods: it is queued once all exist",
        )
    counts: dict[str, int] = {}
    templates: dict[str, Mapping[str, Any]] = {}
    for member in runnable[:total]:
        counts[member.role] = counts.get(member.role, 0) + 1
        if member.template is not None:
            templates.setdefault(member.role, member.template)
    if len(counts) > MAX_ROLES:
        raise ManifestError(
            f"metadata.annotations[{ROLE_HASH}]",
            f"a pod group can have at most {MAX_ROLES} roles (pod shapes), this one has "
            f"{len(counts)}",
        )
    return [
        PodSetTemplate(
            role, counts[role], templates.get(role, {}), "spec", pod_index_label=POD_INDEX
        )
        for role in sorted(counts)
    ]


def disagreement(members: Iterable[Member]) -> str | None:
    """Why a group's members cannot be one Workload: their queues or total counts differ."""
    seen: Member | None = None
    for member in members:
        if member.phase == "Failed":
            continue
        if member.total is None:
            return f"pod {member.name}: {TOTAL_COUNT} is not a whole number of at least 1"
        if seen is None:
            seen = member
        elif member.queue != seen.queue:
            return (
                f"pods {seen.name} and {member.name} have different queue names: "
                f"{seen.queue}!={member.queue}"
            )
        elif member.total != seen.total:
            return (
                f"pods {seen.name} and {member.name} have different {TOTAL_COUNT} values: "
                f"{seen.total}!={member.total}"
            )
    return None


def excess(members: Sequence[Member], counts: Mapping[str, int]) -> list[Member]:
    """Runnable members beyond their role's count (or of a role the Workload does not have):
    the ones Kueue deletes, those it would keep last first."""
    out: list[Member] = []
    for role in {m.role for m in members}:
        runnable = sorted((m for m in members if m.role == role and m.runnable), key=_keep_order)
        out += runnable[counts.get(role, 0) :]
    return sorted(out, key=lambda m: m.name)


def replaced(members: Sequence[Member], counts: Mapping[str, int]) -> list[Member]:
    """Ended members whose role is full again (a replacement runs): their finalizer can go."""
    out: list[Member] = []
    for role, count in counts.items():
        runnable = sum(1 for m in members if m.role == role and m.runnable)
        if runnable >= count:
            out += [m for m in members if m.role == role and not m.runnable and m.holds]
    return sorted(out, key=lambda m: m.name)


def finished(members: Sequence[Member], total: int) -> tuple[str, str] | None:
    """A plain group's end, as Kueue reads it: all its pods succeeded, or none still runs and
    one of them is unretriable. Kueue's reason is always Succeeded for a group."""
    succeeded = sum(1 for m in members if m.phase == "Succeeded")
    ended = all(m.phase in ("Succeeded", "Failed", "Gone") for m in members)
    if succeeded >= total or (members and ended and any(m.unretriable for m in members)):
        return "Succeeded", f"Pods succeeded: {succeeded}/{total}."
    return None


def replacement_condition(
    counts: Mapping[str, int],
    members: Sequence[Member],
    current: tuple[Any, Any, Any] | None,
    evicted: tuple[str, str] | None,
) -> tuple[str, str, str] | None:
    """Kueue's WaitingForReplacementPods (status, reason, message) for a plain group, when it
    must be written: True while members are missing (failed or deleted, not yet replaced),
    with the eviction's reason if it was evicted; False once none is, only after it was set.
    None: as it is."""
    absent = sum(
        max(0, count - sum(1 for m in members if m.role == role and m.runnable))
        for role, count in counts.items()
    )
    if absent:
        want = (
            ("True", *evicted)
            if evicted
            else ("True", "PodsFailed", "Some Failed pods need replacement")
        )
    elif current is not None:
        want = ("False", "PodsReady", "No pods need replacement")
    else:
        return None
    return None if current == want else want


def on_hold(workload: Mapping[str, Any]) -> bool:
    """Kueue's IsOnHold: QuotaReserved is False with reason OnHold."""
    for cond in as_mapping(workload.get("status")).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "QuotaReserved":
            return cond.get("status") == "False" and cond.get("reason") == ON_HOLD
    return False
