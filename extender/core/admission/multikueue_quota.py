"""MultiKueue manager quota automation: a manager ClusterQueue's quota, the sum of its workers'.

With Kueue's `MultiKueueManagerQuotaAutomation` gate on and a MultiKueueConfig whose
`quotaManagement` is `Automated`, the manager's ClusterQueue of a MultiKueue check takes as
nominal quota, per covered resource, the sum over the connected workers of the quotas of the
ClusterQueues their LocalQueues of the same namespace and name point at; its condition
`MultiKueueManagerQuotaAutomation` says whether it does, as Kueue's reasons say. Pure: the
controller (extender/kube/controller/multikueue/quotas.py) reads the objects and writes this.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from extender.core.api.quantity import QuantityError, parse_quantity
from extender.core.jobframework.adapter import as_mapping, as_sequence

GATE = "MultiKueueManagerQuotaAutomation"  # the feature gate, and the condition's type
AUTOMATED, MANUAL = "Automated", "Manual"
AUTOMATED_MESSAGE = "ClusterQueue quota is automatically managed based on MultiKueue workers."

_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


@dataclass(frozen=True, slots=True)
class WorkerQueues:
    """What one connected worker holds: its LocalQueues and ClusterQueues."""

    local_queues: Sequence[Mapping[str, Any]]
    cluster_queues: Sequence[Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class QuotaAutomation:
    """The condition to write, and the flavor's resources when they are to be automated."""

    status: str
    reason: str
    message: str
    resources: tuple[tuple[str, str], ...] | None = None  # (name, nominalQuota) in cover order


def requested(config: Mapping[str, Any]) -> bool:
    return bool(as_mapping(config.get("spec")).get("quotaManagement", MANUAL) == AUTOMATED)


def automate(
    cq: Mapping[str, Any],
    config: Mapping[str, Any] | None,
    local_queues: Iterable[tuple[str, str]],
    workers: Sequence[WorkerQueues],
) -> QuotaAutomation:
    """What the manager ClusterQueue `cq` (of a MultiKueue check) says and holds, given the
    check's MultiKueueConfig (None: not found), the manager's LocalQueues pointing at it
    (namespace, name), and its connected workers' queues."""
    if config is None:
        return QuotaAutomation(
            "False", "UnsupportedConfiguration", "The referenced MultiKueueConfig was not found."
        )
    if not requested(config):
        return QuotaAutomation(
            "False", "NotRequested", "MultiKueue manager quota automation has not been requested."
        )
    groups = [as_mapping(g) for g in as_sequence(as_mapping(cq.get("spec")).get("resourceGroups"))]
    if len(groups) != 1 or len(as_sequence(groups[0].get("flavors"))) != 1:
        return QuotaAutomation(
            "False",
            "UnsupportedConfiguration",
            "Quota automation requires that the manager-side ClusterQueue has exactly one "
            "ResourceFlavor",
        )
    totals = _worker_totals(set(local_queues), workers)
    covered = [str(r) for r in as_sequence(groups[0].get("coveredResources"))]
    missing = sorted(set(totals) - set(covered))
    if missing:
        return QuotaAutomation(
            "False",
            "UnsupportedConfiguration",
            "manager-side coveredResources is missing resources configured on workers: "
            f"[{' '.join(missing)}]",
        )
    resources = tuple((name, _spelled(*totals.get(name, (Fraction(0), "0")))) for name in covered)
    return QuotaAutomation("True", "QuotaAutomated", AUTOMATED_MESSAGE, resources)


def _worker_totals(
    local_queues: set[tuple[str, str]], workers: Sequence[WorkerQueues]
) -> dict[str, tuple[Fraction, str]]:
    """resource -> (the sum, the quantity whose format the sum keeps, Kueue's first added)."""
    totals: dict[str, tuple[Fraction, str]] = {}
    for worker in workers:
        names = set()
        for lq in worker.local_queues:
            meta = as_mapping(lq.get("metadata"))
            if (meta.get("namespace"), meta.get("name")) in local_queues:
                names.add(as_mapping(lq.get("spec")).get("clusterQueue"))
        for rcq in worker.cluster_queues:
            if as_mapping(rcq.get("metadata")).get("name") not in names:
                continue
            for group in as_sequence(as_mapping(rcq.get("spec")).get("resourceGroups")):
                for flavor in as_sequence(as_mapping(group).get("flavors")):
                    for quota in as_sequence(as_mapping(flavor).get("resources")):
                        name = str(as_mapping(quota).get("name"))
                        text = str(as_mapping(quota).get("nominalQuota", "0"))
                        try:
                            value = parse_quantity(text)
                        except QuantityError:
                            continue  # the API server admits none such
                        total, first = totals.get(name, (Fraction(0), text))
                        totals[name] = (total + value, first)
    return totals


def _spelled(value: Fraction, like: str) -> str:
    """A sum as Go's resource.Quantity spells it, in the format of the quantity it started
    from: binary (Mi, Gi) when that one was, else decimal (m, k, M, G), or an exponent."""
    if value == 0:
        return "0"
    sign, value = ("-", -value) if value < 0 else ("", value)
    suffix = like.strip().lstrip("+-").lstrip("0123456789.")
    if suffix.endswith("i") and value.denominator == 1 and value >= 1024:
        amount, power = int(value), 0
        while amount % 1024 == 0 and power < len(_BINARY) - 1:
            amount, power = amount // 1024, power + 1
        return f"{sign}{amount}{_BINARY[power]}"
    exponent = 0
    while value.denominator != 1:
        value, exponent = value * 10, exponent - 1
    mantissa = int(value)
    while mantissa % 10 == 0:
        mantissa, exponent = mantissa // 10, exponent + 1
    shift = exponent % 3  # down to a multiple of 3, as Go's canonical form
    mantissa, exponent = mantissa * 10**shift, exponent - shift
    if suffix[:1] in ("e", "E"):
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    if exponent in _DECIMAL:
        return f"{sign}{mantissa}{_DECIMAL[exponent]}"
    return f"{sign}{mantissa}e{exponent}"
