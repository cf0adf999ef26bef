"""Kueue's ProvisioningRequest admission check, as a policy of configs, requests and states.

The ProvisioningRequestConfig, what a reservation asks cluster-autoscaler for, and how the
request's conditions become the check's state.

For a Workload with quota reserved and the check Pending, one ProvisioningRequest
(autoscaling.x-k8s.io/v1) per attempt is made, `<workload>-<check>-<attempt>`, with a
PodTemplate `ppt-<request>-<podSet>` for each podSet that uses a managed resource. Its
conditions decide the check: Provisioned is Ready (with podSetUpdates that make the pods
consume the request), Failed or BookingExpired is Retry with backoff until the config's
backoffLimitCount, then Rejected, CapacityRevoked is Rejected. Everything here is a function
of the objects read; the controller (extender/kube/controller/provisioning.py) does the I/O.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.core.admission.checks import PENDING, READY, REJECTED, RETRY, CheckState
from extender.core.api.parse import ManifestError, as_list, as_map, check_version, name_of
from extender.core.jobframework.adapter import as_mapping, as_sequence

CONTROLLER = "kueue.x-k8s.io/provisioning-request"
CONFIG_KIND = "ProvisioningRequestConfig"
GROUP = "kueue.x-k8s.io"
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
PARAMETER_PREFIX = "provreq.kueue.x-k8s.io/"
MANAGED_LABEL = "kueue.x-k8s.io/managed"

NOT_ACTIVE = "the check is not active"
NOT_NEEDED = "the provisioning request is not needed"
ACTIVE_MESSAGE = "The admission check is active"
_MAX_NAME = 253
_LIMITED = 247  # names longer are cut here and given a hash suffix, as Kueue cuts them

IDENTICAL_TEMPLATES = "IdenticalPodTemplates"
IDENTICAL_REQUIREMENTS = "IdenticalWorkloadSchedulingRequirements"


@dataclass(frozen=True, slots=True)
class RetryStrategy:
    limit: int = 3  # backoffLimitCount
    base: int = 60  # backoffBaseSeconds
    cap: int = 1800  # backoffMaxSeconds


@dataclass(frozen=True, slots=True)
class ProvisioningConfig:
    """A ProvisioningRequestConfig."""

    name: str
    class_name: str
    parameters: Mapping[str, str]
    managed_resources: frozenset[str] = frozenset()
    retry: RetryStrategy = RetryStrategy()
    node_selector_details: tuple[tuple[str, str], ...] = ()  # (label key, class detail key)
    merge_policy: str | None = None


def parse_config(obj: Mapping[str, Any]) -> ProvisioningConfig:
    """A ProvisioningRequestConfig manifest (the API server filled in its defaults)."""
    check_version(obj, CONFIG_KIND)
    name = name_of(obj)
    spec = as_map(obj.get("spec"), "spec", required=True)
    class_name = spec.get("provisioningClassName")
    if not isinstance(class_name, str) or not class_name:
        raise ManifestError("spec.provisioningClassName", "is required")
    params = as_map(spec.get("parameters"), "spec.parameters")
    managed = as_list(spec.get("managedResources"), "spec.managedResources")
    retry = as_map(spec.get("retryStrategy"), "spec.retryStrategy")
    values = []
    for field, default in (
        ("backoffLimitCount", 3),
        ("backoffBaseSeconds", 60),
        ("backoffMaxSeconds", 1800),
    ):
        value = retry.get(field, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ManifestError(f"spec.retryStrategy.{field}", f"must be 0 or more, got {value!r}")
        values.append(value)
    updates = as_map(spec.get("podSetUpdates"), "spec.podSetUpdates")
    selectors = []
    for i, entry in enumerate(
        as_list(updates.get("nodeSelector"), "spec.podSetUpdates.nodeSelector")
    ):
        entry = as_map(entry, f"spec.podSetUpdates.nodeSelector[{i}]")
        key, detail = entry.get("key"), entry.get("valueFromProvisioningClassDetail")
        if not isinstance(key, str) or not isinstance(detail, str):
            raise ManifestError(
                f"spec.podSetUpdates.nodeSelector[{i}]",
                "needs key and valueFromProvisioningClassDetail",
            )
        selectors.append((key, detail))
    policy = spec.get("podSetMergePolicy")
    if policy not in (None, IDENTICAL_TEMPLATES, IDENTICAL_REQUIREMENTS):
        raise ManifestError(
            "spec.podSetMergePolicy",
            f"must be {IDENTICAL_TEMPLATES} or {IDENTICAL_REQUIREMENTS}, got {policy!r}",
        )
    return ProvisioningConfig(
        name,
        class_name,
        {str(k): str(v) for k, v in params.items()},
        frozenset(str(r) for r in managed),
        RetryStrategy(*values),
        tuple(selectors),
        policy,
    )


def parameters_ref_error(parameters: tuple[str, str, str] | None) -> str | None:
    """Why an AdmissionCheck's spec.parameters does not name a ProvisioningRequestConfig
    (Kueue's words), or None."""
    if parameters is None:
        return "missing parameters reference"
    group, kind, name = parameters
    if not name:
        return "empty name: bad parameters reference"
    if group != GROUP:
        return f'wrong group "{group}", expecting "{GROUP}": bad parameters reference'
    if kind != CONFIG_KIND:
        return f'wrong kind "{kind}", expecting "{CONFIG_KIND}": bad parameters reference'
    return None


# ----- names --------------------------------------------------------------------------------


def request_name(workload: str, check: str, attempt: int) -> str:
    """`<workload>-<check>-<attempt>`, cut with a hash suffix when too long for a name."""
    return _limited(f"{workload}-{check}-{attempt}")


def template_name(request: str, pod_set: str) -> str:
    return _limited(f"ppt-{request}-{pod_set}")


def _limited(name: str) -> str:
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha1(name.encode(), usedforsecurity=False).hexdigest()[:5]
    return f"{name[:_LIMITED]}-{digest}"


def attempt_of(request: str, workload: str, check: str) -> int | None:
    """The attempt a request's name says, for this Workload and check (None: not one of its
    requests)."""
    prefix = _limited(f"{workload}-{check}-")  # only long names are cut; the prefix is not
    found = re.fullmatch(re.escape(prefix) + r"([0-9]+)", request)
    return int(found.group(1)) if found else None


# ----- what is asked for --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestedPodSet:
    """One podSet of a ProvisioningRequest: the Workload podSet it is named after (the first
    of those merged into it) and how many pods."""

    name: str
    template: Mapping[str, Any]
    count: int


def uses_managed(template: Mapping[str, Any], managed: frozenset[str]) -> bool:
    """Whether a pod template asks for a managed resource (every resource, when none is
    named), in any container's requests or limits."""
    if not managed:
        return True
    spec = as_mapping(template.get("spec"))
    for key in ("containers", "initContainers"):
        for container in as_sequence(spec.get(key)):
            resources = as_mapping(as_mapping(container).get("resources"))
            for part in ("requests", "limits"):
                if managed & set(as_mapping(resources.get(part))):
                    return True
    return False


def requested_pod_sets(
    pod_sets: Sequence[Mapping[str, Any]],
    counts: Mapping[str, int],
    config: ProvisioningConfig,
) -> list[RequestedPodSet]:
    """The podSets a reservation asks cluster-autoscaler for: those with pods admitted that
    use a managed resource, merged by the config's podSetMergePolicy (counts summed)."""
    groups: list[RequestedPodSet] = []
    for pod_set in pod_sets:
        name = str(pod_set.get("name"))
        template = as_mapping(pod_set.get("template"))
        count = counts.get(name, 0)
        if count <= 0 or not uses_managed(template, config.managed_resources):
            continue
        for i, group in enumerate(groups):
            if _mergeable(group.template, template, config.merge_policy):
                groups[i] = RequestedPodSet(group.name, group.template, group.count + count)
                break
        else:
            groups.append(RequestedPodSet(name, template, count))
    return groups


def _mergeable(first: Mapping[str, Any], other: Mapping[str, Any], policy: str | None) -> bool:
    if policy == IDENTICAL_TEMPLATES:
        return first == other
    if policy == IDENTICAL_REQUIREMENTS:
        return _requirements(first) == _requirements(other)
    return False


def _requirements(template: Mapping[str, Any]) -> tuple[Any, ...]:
    spec = as_mapping(template.get("spec"))

    def requests(key: str) -> list[Any]:
        return [
            as_mapping(as_mapping(c).get("resources")).get("requests")
            for c in as_sequence(spec.get(key))
        ]

    return (
        requests("containers"),
        requests("initContainers"),
        *(spec.get(k) for k in ("resources", "nodeSelector", "tolerations", "affinity")),
        spec.get("resourceClaims"),
    )


def effective_parameters(
    config: ProvisioningConfig, annotations: Mapping[str, Any]
) -> dict[str, str]:
    """The config's parameters, each overridden by the Workload's
    `provreq.kueue.x-k8s.io/<name>` annotation."""
    out = dict(config.parameters)
    for key, value in annotations.items():
        if isinstance(key, str) and key.startswith(PARAMETER_PREFIX):
            out[key[len(PARAMETER_PREFIX) :]] = str(value)
    return out


def synced_with(config: ProvisioningConfig, request: Mapping[str, Any]) -> bool:
    """Whether a ProvisioningRequest still matches its config: the same class and every
    parameter of the config with the same value (it may have more)."""
    spec = as_mapping(request.get("spec"))
    if spec.get("provisioningClassName") != config.class_name:
        return False
    params = as_mapping(spec.get("parameters"))
    return all(params.get(k) == v for k, v in config.parameters.items())


# ----- the check's state from the request's conditions --------------------------------------


def backoff_seconds(retry: RetryStrategy, retry_count: int) -> int:
    """requeueAfterSeconds before attempt retry_count + 2: base * 2^retry_count, capped."""
    return int(min(retry.base * 2**retry_count, retry.cap))


def _true(request: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in as_sequence(as_mapping(request.get("status")).get("conditions")):
        cond = as_mapping(cond)
        if cond.get("type") == kind and cond.get("status") == "True":
            return cond
    return None


def _has(request: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in as_sequence(as_mapping(request.get("status")).get("conditions")):
        cond = as_mapping(cond)
        if cond.get("type") == kind:
            return cond
    return None


@dataclass(frozen=True, slots=True)
class StateChange:
    """What the check's entry becomes (None fields: as it is)."""

    state: str
    message: str
    requeue_after: int | None = None
    pod_set_updates: tuple[Mapping[str, Any], ...] | None = None


def check_state(
    current: CheckState,
    request: Mapping[str, Any],
    attempt: int,
    config: ProvisioningConfig,
    *,
    admitted: bool,
    active: bool,
    requested: Sequence[RequestedPodSet],
) -> StateChange | None:
    """What the request's conditions make of the check (None: nothing changes), in Kueue's
    order: Failed, CapacityRevoked, BookingExpired (before admission only), Provisioned,
    Accepted."""
    failed = _true(request, "Failed")
    if failed is not None:
        return _retry_or_reject(current, attempt, config, "failure", failed)
    revoked = _true(request, "CapacityRevoked")
    if revoked is not None:
        return StateChange(REJECTED, str(revoked.get("message") or "")) if active else None
    expired = _true(request, "BookingExpired")
    if expired is not None and not admitted:
        return _retry_or_reject(current, attempt, config, "booking expired", expired)
    provisioned = _true(request, "Provisioned")
    if provisioned is not None:
        if current.state == READY:
            return None
        updates = pod_set_updates(request, config, requested)
        return StateChange(READY, str(provisioned.get("message") or ""), None, updates)
    if _true(request, "Accepted") is not None:
        progress = _has(request, "Provisioned")
        if progress is None:
            return None
        return StateChange(PENDING, str(progress.get("message") or ""))
    return StateChange(PENDING, "")


def _retry_or_reject(
    current: CheckState,
    attempt: int,
    config: ProvisioningConfig,
    what: str,
    condition: Mapping[str, Any],
) -> StateChange:
    message = str(condition.get("message") or "")
    if attempt <= config.retry.limit:
        text = f"Retrying after {what}: {message}"
        if attempt > current.retry_count:
            return StateChange(RETRY, text, backoff_seconds(config.retry, current.retry_count))
        return StateChange(current.state, text)  # an old request's answer, after the eviction
    return StateChange(REJECTED, message)


def pod_set_updates(
    request: Mapping[str, Any],
    config: ProvisioningConfig,
    requested: Sequence[RequestedPodSet],
) -> tuple[Mapping[str, Any], ...]:
    """What a Provisioned request sets on the pods of each podSet it asked for: they consume
    the request, and take the node labels the config maps from the class's details."""
    name = str(as_mapping(request.get("metadata")).get("name"))
    spec = as_mapping(request.get("spec"))
    details = as_mapping(as_mapping(request.get("status")).get("provisioningClassDetails"))
    selector = {
        key: str(details[detail])
        for key, detail in config.node_selector_details
        if detail in details
    }
    out = []
    for pod_set in requested:
        update: dict[str, Any] = {
            "name": pod_set.name,
            "annotations": {
                CONSUME_ANNOTATION: name,
                CLASS_ANNOTATION: str(spec.get("provisioningClassName") or ""),
            },
        }
        if selector:
            update["nodeSelector"] = dict(selector)
        out.append(update)
    return tuple(out)


def template_for(
    template: Mapping[str, Any],
    node_labels: Mapping[str, str],
    tolerations: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """A PodTemplate's template: the Workload podSet's, with its admitted flavors' node labels
    and tolerations, and each container's limits standing in for requests it does not set
    (what the pods will ask for)."""
    out = copy.deepcopy(dict(template))
    spec = out.setdefault("spec", {})
    if node_labels:
        selector = dict(as_mapping(spec.get("nodeSelector")))
        for key, value in node_labels.items():
            if selector.get(key, value) != value:
                raise ManifestError(
                    f"spec.template.spec.nodeSelector.{key}",
                    f"is {selector[key]!r}, and its flavor needs {value!r}",
                )
            selector[key] = value
        spec["nodeSelector"] = selector
    if tolerations:
        have = list(as_sequence(spec.get("tolerations")))
        spec["tolerations"] = have + [dict(t) for t in tolerations if t not in have]
    for key in ("containers", "initContainers"):
        for container in as_sequence(spec.get(key)):
            if not isinstance(container, dict):
                continue
            resources = container.get("resources")
            if not isinstance(resources, dict):
                continue
            limits = as_mapping(resources.get("limits"))
            requests = dict(as_mapping(resources.get("requests")))
            for name, value in limits.items():
                requests.setdefault(name, value)
            if requests:
                resources["requests"] = requests
    return out
