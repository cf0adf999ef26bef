"""Kueue's DRA device quota: a pod set's resource claims counted as devices of a quota resource.

A pod that claims devices through `spec.resourceClaims[].resourceClaimTemplateName` asks, for
each device request of the template (`spec.spec.devices.requests[].exactly`), `count` devices
of its `deviceClassName`. The Configuration's `resources.deviceClassMappings` names the quota
resource each DeviceClass is charged to; the count is added to each pod's requests, so a
ClusterQueue's quota (`example.com/gpu: 8`) holds, and preemption and borrowing treat it as
any other resource. This is Kueue v0.19.2's ResourceClaimTemplate path (pkg/dra/claims.go, the
workload controller's DRA step), with its refusals in its own words:

- a pod that names a ResourceClaim (`resourceClaimName`) makes the Workload inadmissible;
- a request by `firstAvailable`, with `adminAccess`, or in allocationMode `All` does too;
- so does a DeviceClass no mapping names, or a template that cannot be read.

With the feature gate KueueDRAIntegration off, claims are not counted: such a Workload is
inadmissible while KueueDRARejectWorkloadsWhenDRADisabled is on (its default), and admitted
without device quota when it is off. Kueue's further check that enough devices in the
cluster's ResourceSlices match a request's CEL selectors is not made (Tower evaluates no CEL).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from extender.core.api.models import Workload
from extender.core.api.quantity import MILLI_RESOURCES

RESOURCE_CLAIM_TEMPLATES = "resourceclaimtemplates.resource.k8s.io"

# Kueue's messages (pkg/controller/core/workload_controller.go).
DISABLED_MESSAGE = (
    "Workload uses DRA resources but the KueueDRAIntegration feature gate is not enabled"
)
CLAIMS_MESSAGE = "KueueDRAIntegration feature does not support use of resource claims"


@dataclass(frozen=True, slots=True)
class DevicePolicy:
    """What the feature gates and resources.deviceClassMappings say about claimed devices."""

    enabled: bool = True  # KueueDRAIntegration (Beta, on)
    reject_when_disabled: bool = True  # KueueDRARejectWorkloadsWhenDRADisabled (Beta, on)
    classes: Mapping[str, str] = field(default_factory=dict)  # DeviceClass -> quota resource

    @classmethod
    def of(cls, gates: Mapping[str, bool], classes: Mapping[str, str]) -> DevicePolicy:
        """The policy for these resolved gates (a gate not named is at Kueue's default)."""
        return cls(
            gates.get("KueueDRAIntegration", True),
            gates.get("KueueDRARejectWorkloadsWhenDRADisabled", True),
            classes,
        )


@dataclass(frozen=True, slots=True)
class Claim:
    """One entry of a pod set's spec.resourceClaims."""

    pod_set: str
    pod_set_index: int
    index: int
    template: str | None  # resourceClaimTemplateName
    claim: str | None  # resourceClaimName

    @property
    def path(self) -> str:
        return f"spec.podSets[{self.pod_set_index}].template.spec.resourceClaims[{self.index}]"


@dataclass(frozen=True, slots=True)
class Devices:
    """A Workload's claimed devices: per pod set, what each pod adds to its requests (in
    accounted units); or, when Kueue would not queue it, why (`refusal`, Kueue's message)."""

    per_pod: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    refusal: str | None = None


class _RefusedError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


TemplateLookup = Callable[[str], "Mapping[str, Any] | str"]
"""A ResourceClaimTemplate of the Workload's namespace by name: the object, or why it cannot
be read (as the API client says it, e.g. `... "x" not found`)."""


def claims(workload: Mapping[str, Any]) -> tuple[Claim, ...]:
    """Every resource claim of a Workload's pod templates (malformed entries are skipped: the
    API server's schema refuses them)."""
    spec = workload.get("spec")
    pod_sets = spec.get("podSets") if isinstance(spec, Mapping) else None
    return tuple(_claims(pod_sets if isinstance(pod_sets, list) else []))


def _claims(pod_sets: Sequence[Any]) -> Iterator[Claim]:
    for i, ps in enumerate(pod_sets):
        if not isinstance(ps, Mapping):
            continue
        template = ps.get("template")
        pod = template.get("spec") if isinstance(template, Mapping) else None
        entries = pod.get("resourceClaims") if isinstance(pod, Mapping) else None
        for j, entry in enumerate(entries if isinstance(entries, list) else []):
            if not isinstance(entry, Mapping):
                continue
            rct, rc = entry.get("resourceClaimTemplateName"), entry.get("resourceClaimName")
            yield Claim(
                str(ps.get("name") or "main"),
                i,
                j,
                str(rct) if rct is not None else None,
                str(rc) if rc is not None else None,
            )


def devices(
    workload_claims: Sequence[Claim], templates: TemplateLookup, policy: DevicePolicy
) -> Devices | None:
    """What a Workload's claims add to its pods' requests, or why it is inadmissible; None
    when its claims change nothing (it has none, or they are ignored)."""
    uses_templates = any(c.template is not None for c in workload_claims)
    uses_claims = any(c.claim is not None for c in workload_claims)
    if not (uses_templates or uses_claims):
        return None
    if not policy.enabled:
        return Devices(refusal=DISABLED_MESSAGE) if policy.reject_when_disabled else None
    if uses_claims:
        return Devices(refusal=CLAIMS_MESSAGE)
    per_pod: dict[str, dict[str, int]] = {}
    try:
        for claim in workload_claims:
            if claim.template is None:
                continue
            adds = per_pod.setdefault(claim.pod_set, {})
            for resource, count in _charged(claim, templates, policy):
                adds[resource] = adds.get(resource, 0) + count
    except _RefusedError as refused:
        return Devices(refusal=refused.message)
    return Devices(per_pod={ps: adds for ps, adds in per_pod.items() if adds})


def _charged(
    claim: Claim, templates: TemplateLookup, policy: DevicePolicy
) -> Iterator[tuple[str, int]]:
    """(quota resource, amount per pod) for each device class one template asks for."""
    assert claim.template is not None
    found = templates(claim.template)
    if isinstance(found, str):
        raise _RefusedError(
            f"{claim.path}: Internal error: failed to get claim spec for ResourceClaimTemplate "
            f"{claim.template} in podset {claim.pod_set}: {found}"
        )
    counts = _counts_per_class(claim, _claim_spec(found))
    for device_class, count in counts.items():
        resource = policy.classes.get(device_class)
        if resource is None:
            raise _RefusedError(
                f"{claim.path}.resourceClaimTemplateName: Not found: "
                f'"DeviceClass {device_class} is not mapped in DRA configuration for podset '
                f'{claim.pod_set}"'
            )
        yield resource, count * 1000 if resource in MILLI_RESOURCES else count


def _claim_spec(template: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = template.get("spec")
    inner = spec.get("spec") if isinstance(spec, Mapping) else None
    return inner if isinstance(inner, Mapping) else {}


def _counts_per_class(claim: Claim, spec: Mapping[str, Any]) -> dict[str, int]:
    """Kueue's countDevicesPerClass: devices per DeviceClass of one claim spec, in request
    order; its refusals name the request's field."""
    devices_ = spec.get("devices")
    requests = devices_.get("requests") if isinstance(devices_, Mapping) else None
    out: dict[str, int] = {}
    for i, request in enumerate(requests if isinstance(requests, list) else []):
        if not isinstance(request, Mapping):
            continue
        here = f"{claim.path}.devices.requests[{i}]"
        if request.get("firstAvailable") is not None:
            raise _refusal(here, "null", claim, "FirstAvailable device selection is not supported")
        exactly = request.get("exactly")
        if not isinstance(exactly, Mapping):
            raise _refusal(here, "null", claim, "Exactly must be set if FirstAvailable is nil")
        if exactly.get("adminAccess") is True:
            raise _refusal(
                f"{here}.exactly.adminAccess", "null", claim, "AdminAccess is not supported"
            )
        # The API server defaults allocationMode to ExactCount and count to 1.
        mode = exactly.get("allocationMode") or "ExactCount"
        if mode == "All":
            raise _refusal(
                f"{here}.exactly.allocationMode",
                '"All"',
                claim,
                "AllocationMode 'All' is not supported",
            )
        if mode != "ExactCount":
            raise _refusal(
                f"{here}.exactly.allocationMode",
                f'"{mode}"',
                claim,
                f"unsupported allocation mode: {mode}",
            )
        device_class = str(exactly.get("deviceClassName") or "")
        if not device_class:
            continue
        count = exactly.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int):
            count = 1
        out[device_class] = out.get(device_class, 0) + count
    return out


def _refusal(path: str, value: str, claim: Claim, detail: str) -> _RefusedError:
    """A field error as Kueue prefixes it with its claim and template."""
    return _RefusedError(
        f"{path}: Invalid value: {value}: ResourceClaimTemplate {claim.template}: {detail}"
    )


def with_devices(workload: Workload, found: Devices) -> Workload:
    """The Workload with each pod's claimed devices added to its requests (a node is asked
    for none of them), or, when refused, marked inadmissible with Kueue's message."""
    if found.refusal is not None:
        return replace(workload, inadmissible=found.refusal)
    if not found.per_pod:
        return workload
    pod_sets = []
    for ps in workload.pod_sets:
        adds = found.per_pod.get(ps.name)
        if not adds:
            pod_sets.append(ps)
            continue
        requests = dict(ps.requests)
        for resource, amount in adds.items():
            requests[resource] = requests.get(resource, 0) + amount
        pod_sets.append(replace(ps, requests=requests, own_requests=ps.pod_requests))
    return replace(workload, pod_sets=tuple(pod_sets))


def template_keys(workload: Any) -> list[str]:
    """The `namespace/name` of each ResourceClaimTemplate a Workload's pods claim through
    (an index of the cache: which Workloads to look at again when a template changes)."""
    if not isinstance(workload, Mapping):
        return []
    meta = workload.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    return sorted({f"{namespace}/{c.template}" for c in claims(workload) if c.template})


def is_refusal(message: str) -> bool:
    """Whether a Workload's QuotaReserved message is one of the refusals above: the devices its
    pods claim keep it out of every queue (`kubectl tower why` says so, and no position)."""
    return message in (DISABLED_MESSAGE, CLAIMS_MESSAGE) or (
        message.startswith("spec.podSets[") and ".template.spec.resourceClaims[" in message
    )
