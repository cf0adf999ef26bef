"""Kueue's `resources` configuration applied to what each pod of a pod set requests.

Before a workload is measured against quota, each pod's requests lose the resources whose
name starts with one of `excludeResourcePrefixes`, then go through `transformations`: an
input resource becomes its outputs (each output the input's quantity times its factor, or
times the quantity of the resource named by `multiplyBy` as well), and is kept as well
(`Retain`, the default) or not (`Replace`). Outputs are summed per name; a negative total is
zero. This is Kueue's order and arithmetic (pkg/workload/workload.go); the amounts are
Tower's accounted integers (milli-cpu, units otherwise), rounded up as Kueue rounds them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction

from extender.core.api.models import Workload
from extender.core.api.quantity import MILLI_RESOURCES


@dataclass(frozen=True, slots=True)
class Transformation:
    """One entry of resources.transformations."""

    input: str
    retain: bool = True  # strategy Retain (else Replace)
    multiply_by: str = ""
    outputs: tuple[tuple[str, Fraction], ...] = ()  # (resource, quantity per unit of input)


@dataclass(frozen=True, slots=True)
class ResourcePolicy:
    """What Kueue's Configuration says about resources: excluded prefixes, transformations,
    device classes."""

    exclude_prefixes: tuple[str, ...] = ()
    transformations: Mapping[str, Transformation] = field(default_factory=dict)
    # resources.deviceClassMappings: DeviceClass -> the quota resource its claimed devices
    # count against (extender/core/jobframework/dra.py adds them; `apply` leaves them be).
    device_classes: Mapping[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        """Whether `apply` changes any pod's requests."""
        return bool(self.exclude_prefixes or self.transformations)


def _quantity(resource: str, amount: int) -> Fraction:
    return Fraction(amount, 1000) if resource in MILLI_RESOURCES else Fraction(amount)


def _amount(resource: str, quantity: Fraction) -> int:
    return math.ceil(quantity * 1000) if resource in MILLI_RESOURCES else math.ceil(quantity)


def effective(requests: Mapping[str, int], policy: ResourcePolicy) -> dict[str, int]:
    """One pod's requests as the quota sees them under the policy."""
    kept = {
        name: amount
        for name, amount in requests.items()
        if not any(name.startswith(prefix) for prefix in policy.exclude_prefixes)
    }
    transforms = policy.transformations
    if not any(name in transforms for name in kept):
        return kept
    retained: dict[str, int] = {}
    generated: dict[str, Fraction] = {}
    for name, amount in kept.items():
        mapping = transforms.get(name)
        if mapping is None:
            retained[name] = amount
            continue
        base = _quantity(name, amount)
        if mapping.multiply_by and mapping.multiply_by in kept:
            base *= _quantity(mapping.multiply_by, kept[mapping.multiply_by])
        for output, factor in mapping.outputs:
            generated[output] = generated.get(output, Fraction(0)) + base * factor
        if mapping.retain:
            retained[name] = amount
    out = dict(retained)
    for output, quantity in generated.items():
        out[output] = out.get(output, 0) + _amount(output, max(quantity, Fraction(0)))
    return out


def apply(workload: Workload, policy: ResourcePolicy) -> Workload:
    """The workload with each pod set's requests as the quota sees them (itself when the
    policy changes nothing)."""
    if not policy:
        return workload
    pod_sets = tuple(
        replace(ps, requests=effective(ps.requests, policy), own_requests=ps.pod_requests)
        for ps in workload.pod_sets
    )
    if all(a.requests == b.requests for a, b in zip(pod_sets, workload.pod_sets, strict=True)):
        return workload
    return replace(workload, pod_sets=pod_sets)
