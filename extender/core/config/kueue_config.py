"""Kueue's Configuration file, parsed: checked, defaulted and converted as Kueue v0.19.2 does it."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from extender.core.api.quantity import QuantityError, parse_quantity
from extender.core.api.unacted import Effect, Unacted
from extender.core.config.resource_policy import ResourcePolicy, Transformation
from extender.core.jobframework import registry
from extender.core.scheduling.admission_fair_sharing import AfsConfig

GROUP = "config.kueue.x-k8s.io"
V1BETA2 = f"{GROUP}/v1beta2"
V1BETA1 = f"{GROUP}/v1beta1"
KIND = "Configuration"


class ConfigError(ValueError):
    """A Configuration Tower refuses: one line naming the field."""


# The schema: a leaf checks one value; a dict is a struct (its keys are the only fields
# allowed, as Kueue's strict decoder allows no others); ListOf and MapOf hold their items'.
@dataclass(frozen=True, slots=True)
class Leaf:
    what: str  # "a string": how an error names what was expected
    ok: Callable[[Any], bool]


@dataclass(frozen=True, slots=True)
class ListOf:
    item: Spec


@dataclass(frozen=True, slots=True)
class MapOf:
    value: Spec


Spec = Leaf | ListOf | MapOf | dict[str, Any]

# Go's time.ParseDuration: "1h30m", "5m", "0.5s", "0"; a bare number other than 0 is refused.
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1,
    "m": 60,
    "h": 3600,
}


def duration_seconds(text: str) -> float | None:
    """Seconds of a Go duration string, or None when it is not one."""
    sign, body = (-1.0, text[1:]) if text[:1] == "-" else (1.0, text.removeprefix("+"))
    if body == "0":
        return 0.0
    total, at = 0.0, 0
    for match in _DURATION_PART.finditer(body):
        if match.start() != at:
            return None
        total += float(match[1]) * _UNIT_SECONDS[match[2]]
        at = match.end()
    return sign * total if body and at == len(body) else None


def _is_int(v: Any) -> bool:
    # YAML's true is a Python int; Go's decoder refuses a bool, and a float, for an integer.
    return isinstance(v, int) and not isinstance(v, bool) and -(2**31) <= v < 2**31


def _is_quantity(v: Any) -> bool:
    try:
        parse_quantity(v)
    except QuantityError:
        return False
    return True


STR = Leaf("a string", lambda v: isinstance(v, str))
BOOL = Leaf("true or false", lambda v: isinstance(v, bool))
INT = Leaf("a whole number", _is_int)
INT64 = Leaf("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool))
NUMBER = Leaf(
    "a number", lambda v: isinstance(v, int | float) and not isinstance(v, bool) and v == v
)
DURATION = Leaf(
    "a duration such as 90s or 5m",
    lambda v: isinstance(v, str) and duration_seconds(v) is not None,
)
QUANTITY = Leaf("a quantity such as 5Gi", _is_quantity)
OPAQUE = Leaf("a mapping", lambda v: isinstance(v, Mapping))  # checked by no one here
STRINGS = ListOf(STR)

LABEL_SELECTOR: dict[str, Any] = {
    "matchLabels": MapOf(STR),
    "matchExpressions": ListOf({"key": STR, "operator": STR, "values": STRINGS}),
}
_CLUSTER_PROFILE_PROVIDER = {"name": STR, "execConfig": OPAQUE}
_DEVICE_SOURCE = {"name": STR, "driver": STR, "deviceSelector": OPAQUE}

# Kueue v0.19.2's apis/config/v1beta2 Configuration, ControllerManager inlined.
V1BETA2_SCHEMA: dict[str, Any] = {
    "apiVersion": STR,
    "kind": STR,
    # Not Kueue's: its strict decoder refuses the file, yet its own documentation's example
    # (opt-in namespace management) carries it; Tower takes it, with a warning.
    "metadata": OPAQUE,
    "namespace": STR,
    "manageJobsWithoutQueueName": BOOL,
    "managedJobsNamespaceSelector": LABEL_SELECTOR,
    "internalCertManagement": {
        "enable": BOOL,
        "webhookServiceName": STR,
        "webhookSecretName": STR,
    },
    "waitForPodsReady": {
        "timeout": DURATION,
        "blockAdmission": BOOL,
        "requeuingStrategy": {
            "timestamp": STR,
            "backoffLimitCount": INT,
            "backoffBaseSeconds": INT,
            "backoffMaxSeconds": INT,
        },
        "recoveryTimeout": DURATION,
    },
    "clientConnection": {"qps": NUMBER, "burst": INT},
    "integrations": {
        "frameworks": STRINGS,
        "externalFrameworks": STRINGS,
        "labelKeysToCopy": STRINGS,
    },
    "multiKueue": {
        "gcInterval": DURATION,
        "origin": STR,
        "workerLostTimeout": DURATION,
        "dispatcherName": STR,
        "externalFrameworks": ListOf({"name": STR}),
        "clusterProfile": {
            "accessProviders": ListOf(_CLUSTER_PROFILE_PROVIDER),
            "credentialsProviders": ListOf(_CLUSTER_PROFILE_PROVIDER),
        },
        "incrementalDispatcherConfig": {"stepSize": INT},
    },
    "fairSharing": {"preemptionStrategies": STRINGS},
    "admissionFairSharing": {
        "usageHalfLifeTime": DURATION,
        "usageSamplingInterval": DURATION,
        "resourceWeights": MapOf(NUMBER),
    },
    "resources": {
        "quotaCheckStrategy": STR,
        "excludeResourcePrefixes": STRINGS,
        "transformations": ListOf(
            {"input": STR, "strategy": STR, "multiplyBy": STR, "outputs": MapOf(QUANTITY)}
        ),
        "deviceClassMappings": ListOf(
            {
                "name": STR,
                "deviceClassNames": STRINGS,
                "sources": ListOf({"counter": _DEVICE_SOURCE, "capacity": _DEVICE_SOURCE}),
            }
        ),
    },
    "featureGates": MapOf(BOOL),
    "objectRetentionPolicies": {
        "workloads": {"afterFinished": DURATION, "afterDeactivatedByKueue": DURATION}
    },
    "visibilityServer": {"bindAddress": STR, "bindPort": INT},
    "webhook": {"port": INT, "host": STR, "certDir": STR},
    "leaderElection": {
        "leaderElect": BOOL,
        "leaseDuration": DURATION,
        "renewDeadline": DURATION,
        "retryPeriod": DURATION,
        "resourceLock": STR,
        "resourceName": STR,
        "resourceNamespace": STR,
    },
    "metrics": {
        "bindAddress": STR,
        "enableClusterQueueResources": BOOL,
        "customLabels": ListOf(
            {
                "name": STR,
                "sourceLabelKey": STR,
                "sourceAnnotationKey": STR,
                "sourceKind": STR,
                "trackedValues": STRINGS,
            }
        ),
        "localQueueMetrics": {"enable": BOOL, "localQueueSelector": LABEL_SELECTOR},
    },
    "health": {
        "healthProbeBindAddress": STR,
        "readinessEndpointName": STR,
        "livenessEndpointName": STR,
    },
    "pprofBindAddress": STR,
    # A Go time.Duration, not metav1.Duration: JSON carries it as nanoseconds.
    "controller": {"groupKindConcurrency": MapOf(INT), "cacheSyncTimeout": INT64},
    "tls": {"minVersion": STR, "cipherSuites": STRINGS, "curvePreferences": ListOf(INT)},
}


def _v1beta1_schema() -> dict[str, Any]:
    """v1beta1: the same, less v1beta2's additions, plus its `enable` switches and the
    fields v1beta2 dropped."""
    schema = dict(V1BETA2_SCHEMA)
    del schema["visibilityServer"]
    schema["waitForPodsReady"] = {"enable": BOOL, **V1BETA2_SCHEMA["waitForPodsReady"]}
    schema["fairSharing"] = {"enable": BOOL, **V1BETA2_SCHEMA["fairSharing"]}
    schema["integrations"] = {
        **V1BETA2_SCHEMA["integrations"],
        "podOptions": {"namespaceSelector": LABEL_SELECTOR, "podSelector": LABEL_SELECTOR},
    }
    multi = dict(V1BETA2_SCHEMA["multiKueue"])
    del multi["clusterProfile"], multi["incrementalDispatcherConfig"]
    schema["multiKueue"] = multi
    resources = dict(V1BETA2_SCHEMA["resources"])
    del resources["quotaCheckStrategy"]
    resources["deviceClassMappings"] = ListOf({"name": STR, "deviceClassNames": STRINGS})
    schema["resources"] = resources
    metrics = dict(V1BETA2_SCHEMA["metrics"])
    labels = dict(metrics["customLabels"].item)
    del labels["sourceKind"], labels["trackedValues"]
    metrics["customLabels"] = ListOf(labels)
    schema["metrics"] = metrics
    schema["queueVisibility"] = {
        "clusterQueues": {"maxCount": INT},
        "updateIntervalSeconds": INT,
    }
    return schema


V1BETA1_SCHEMA = _v1beta1_schema()


def _check(value: Any, spec: Spec, path: str) -> None:
    """Refuse a field the schema does not have, or a value of the wrong type."""
    if value is None:  # null: not set, as Go's decoder leaves a nil pointer
        return
    if isinstance(spec, dict):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: {_show(value)} is not a mapping of fields")
        for key, sub in value.items():
            here = f"{path}.{key}" if path else str(key)
            if key not in spec:
                raise ConfigError(f"{here}: unknown field")
            _check(sub, spec[key], here)
    elif isinstance(spec, ListOf):
        if not isinstance(value, list):
            raise ConfigError(f"{path}: {_show(value)} is not a list")
        for i, item in enumerate(value):
            _check(item, spec.item, f"{path}[{i}]")
    elif isinstance(spec, MapOf):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: {_show(value)} is not a mapping")
        for key, sub in value.items():
            if not isinstance(key, str):
                raise ConfigError(f"{path}: the key {_show(key)} is not a string")
            _check(sub, spec.value, f"{path}[{key}]")
    elif not spec.ok(value):
        raise ConfigError(f"{path}: {_show(value)} is not {spec.what}")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# What the file's fields become, for the docs and for the warnings.
ACTED: dict[str, str] = {
    "clientConnection.qps": "--kube-api-qps",
    "clientConnection.burst": "--kube-api-burst",
    "leaderElection.leaderElect": "--leader-elect",
    "leaderElection.leaseDuration": "--lease-duration",
    "leaderElection.renewDeadline": "--renew-deadline",
    "leaderElection.retryPeriod": "--retry-period",
    "leaderElection.resourceName": "--leader-election-id",
    "leaderElection.resourceNamespace": "--leader-election-namespace",
    "leaderElection.resourceLock": "`leases` only, the lock Tower uses",
    "integrations.frameworks": "--integrations",
    "fairSharing": "--fair-sharing (v1beta1: fairSharing.enable)",
    "fairSharing.preemptionStrategies": (
        "Kueue's default, LessThanOrEqualToFinalShare then LessThanInitialShare, is what "
        "Tower does; another choice is warned"
    ),
    "waitForPodsReady": (
        "all-or-nothing admission with ready pods: timeout, recoveryTimeout, blockAdmission "
        "and requeuingStrategy as Kueue acts on them; on by v1beta2's default when unset "
        "(v1beta1: waitForPodsReady.enable), off without --config"
    ),
    "admissionFairSharing": (
        "usage-based admission fair sharing for ClusterQueues whose admissionScope asks for "
        "it: usageHalfLifeTime, usageSamplingInterval and resourceWeights as Kueue acts on them"
    ),
    "manageJobsWithoutQueueName": (
        "python -m webhook --config: a job without a queue-name label in a namespace the "
        "selector below selects goes to its namespace's LocalQueue `default`; "
        "python -m certs bootstrap --config points the webhooks at those namespaces"
    ),
    "managedJobsNamespaceSelector": (
        "the namespaces whose jobs are managed at all, labelled or not (Kueue's "
        "ManagedJobsNamespaceSelectorAlwaysRespected): the webhooks' namespaceSelector, and "
        "the controller leaves a job elsewhere alone; default: not kube-system, not Tower's own"
    ),
    "resources.excludeResourcePrefixes": (
        "requests of resources with these prefixes are not counted against quota"
    ),
    "resources.transformations": (
        "each pod's requests are transformed (Retain or Replace, multiplyBy, outputs) before "
        "quota counts them, as in Kueue"
    ),
}

_DEFAULT_STRATEGIES = ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
_STRATEGY_SETS = (["LessThanOrEqualToFinalShare"], ["LessThanInitialShare"], _DEFAULT_STRATEGIES)


def _set(value: Any) -> bool:
    return value is not None and value != [] and value != {} and value != ""


def _cfg(path: str, feature: str, advice: str = "", **kw: Any) -> Unacted:
    return Unacted(KIND, path, Effect.HINT, feature, advice, **kw)


# Every other field of the file, one line each when it is set.
UNACTED: tuple[Unacted, ...] = (
    _cfg("namespace", "the namespace of Kueue's webhook Service"),
    _cfg(
        "metadata",
        "not a field of Kueue's Configuration, though its docs' example has one",
        "ignored; Kueue's strict decoding refuses the file",
    ),
    _cfg(
        "internalCertManagement",
        "Kueue's own webhook certificates",
        "Tower's are python -m certs bootstrap, or cert-manager",
    ),
    _cfg("integrations.externalFrameworks", "jobs managed by external controllers"),
    _cfg("integrations.labelKeysToCopy", "job labels copied to the Workload"),
    _cfg("integrations.podOptions", "pod integration options, dropped in v1beta2"),
    _cfg("multiKueue.externalFrameworks", "MultiKueue for jobs of external frameworks"),
    _cfg(
        "fairSharing.preemptionStrategies",
        "fair-sharing preemption strategies",
        "Tower uses LessThanOrEqualToFinalShare, then LessThanInitialShare",
        counts=lambda v: _set(v) and v != _DEFAULT_STRATEGIES,
    ),
    _cfg(
        "resources.quotaCheckStrategy",
        "which undeclared resources block admission",
        "Tower blocks a workload on a resource its ClusterQueue has no quota for",
    ),
    _cfg("resources.deviceClassMappings", "DRA device classes as resources"),
    _cfg("featureGates", "Kueue's feature gates"),
    _cfg("objectRetentionPolicies", "deleting finished and deactivated Workloads"),
    _cfg("visibilityServer", "the visibility API server"),
    _cfg("queueVisibility", "queue visibility in ClusterQueue status, dropped in v1beta2"),
    _cfg("webhook", "Kueue's webhook server", "Tower's webhook is python -m webhook"),
    _cfg("metrics", "Kueue's metrics server", "Tower serves /metrics on --health-address"),
    _cfg("health", "Kueue's health probe server", "Tower's is --health-address"),
    _cfg("pprofBindAddress", "pprof"),
    _cfg("controller", "controller concurrency and cache sync timeout"),
    _cfg("tls", "TLS options of Kueue's servers"),
)


@dataclass(frozen=True, slots=True)
class LeaderElection:
    leader_elect: bool
    lease_duration: float  # seconds
    renew_deadline: float
    retry_period: float
    resource_name: str
    resource_namespace: str | None  # None: the pod's own namespace


@dataclass(frozen=True, slots=True)
class RequeuingStrategy:
    timestamp: str  # Eviction or Creation
    backoff_limit_count: int | None  # None: requeued forever
    backoff_base_seconds: int
    backoff_max_seconds: int


@dataclass(frozen=True, slots=True)
class WaitForPodsReady:
    timeout: float  # seconds
    block_admission: bool
    recovery_timeout: float  # seconds; 0 turns the recovery check off
    requeuing: RequeuingStrategy


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LabelSelector:
    match_labels: tuple[tuple[str, str], ...]
    match_expressions: tuple[SelectorRequirement, ...]

    def as_manifest(self) -> dict[str, Any]:
        """The selector as Kubernetes writes it (a webhook's namespaceSelector)."""
        manifest: dict[str, Any] = {}
        if self.match_labels:
            manifest["matchLabels"] = dict(self.match_labels)
        if self.match_expressions:
            manifest["matchExpressions"] = [
                {
                    "key": r.key,
                    "operator": r.operator,
                    **({"values": list(r.values)} if r.values else {}),
                }
                for r in self.match_expressions
            ]
        return manifest

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels):
            return False
        for r in self.match_expressions:
            present = r.key in labels
            if (
                (r.operator == "In" and (not present or labels[r.key] not in r.values))
                or (r.operator == "NotIn" and present and labels[r.key] in r.values)
                or (r.operator == "Exists" and not present)
                or (r.operator == "DoesNotExist" and present)
            ):
                return False
        return True


@dataclass(frozen=True, slots=True)
class ResourceTransformation:
    input: str
    strategy: str  # Retain or Replace
    multiply_by: str
    outputs: tuple[tuple[str, str], ...]  # resource, quantity as written


@dataclass(frozen=True, slots=True)
class DeviceClassMapping:
    name: str
    device_class_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Resources:
    quota_check_strategy: str | None
    exclude_resource_prefixes: tuple[str, ...]
    transformations: tuple[ResourceTransformation, ...]
    device_class_mappings: tuple[DeviceClassMapping, ...]


@dataclass(frozen=True, slots=True)
class MultiKueue:
    gc_interval: float  # seconds; 0 turns garbage collection off
    origin: str
    worker_lost_timeout: float
    dispatcher_name: str
    external_frameworks: tuple[str, ...]
    incremental_step_size: int | None  # only with the incremental dispatcher


@dataclass(frozen=True, slots=True)
class KueueConfig:
    """The file, defaulted as Kueue defaults it. The first group is what Tower acts on;
    the second is parsed for work to come and only warned about for now."""

    api_version: str
    kube_api_qps: float
    kube_api_burst: int
    leader_election: LeaderElection
    integrations: tuple[str, ...]
    fair_sharing: bool
    namespace: str
    wait_for_pods_ready: WaitForPodsReady | None  # None: off
    resources: Resources | None
    manage_jobs_without_queue_name: bool
    managed_jobs_namespace_selector: LabelSelector
    multi_kueue: MultiKueue
    admission_fair_sharing: AfsConfig | None  # None: not in the file, off
    unacted: tuple[Unacted, ...]  # what the file asks for that Tower does not do

    def warnings(self, name: str) -> list[str]:
        """One line for each field set (or on by default) that Tower does not act on."""
        return [entry.message(name) for entry in self.unacted]

    @property
    def resource_policy(self) -> ResourcePolicy:
        """resources.excludeResourcePrefixes and resources.transformations, as acted on."""
        resources = self.resources
        if resources is None:
            return ResourcePolicy()
        return ResourcePolicy(
            resources.exclude_resource_prefixes,
            {
                t.input: Transformation(
                    t.input,
                    t.strategy == "Retain",
                    t.multiply_by,
                    tuple((name, parse_quantity(q)) for name, q in t.outputs),
                )
                for t in resources.transformations
            },
        )


# Kueue's defaults (apis/config/v1beta2/defaults.go; v1beta1's are the same where both have
# the field, but for waitForPodsReady).
DEFAULT_QPS = 300.0
DEFAULT_BURST = 500
DEFAULT_LEADER_ELECTION_ID = "c1f6bfd2.kueue.x-k8s.io"
DEFAULT_NAMESPACE = "kueue-system"
DEFAULT_FRAMEWORKS = ("batch/job",)
DEFAULT_WAIT_TIMEOUT = {V1BETA2: 1800.0, V1BETA1: 300.0}


def parse(doc: Any, namespace: str | None = None) -> KueueConfig:
    """The Configuration in `doc` (a YAML document), or ConfigError naming the field.

    `namespace` stands for Kueue's fallback when the file has none: the namespace it runs in.
    """
    if not isinstance(doc, Mapping):
        raise ConfigError(f"not a {KIND} (a YAML mapping of its fields)")
    version, kind = doc.get("apiVersion"), doc.get("kind")
    if version not in (V1BETA2, V1BETA1):
        raise ConfigError(f"apiVersion: {_show(version)} is not {V1BETA2} or {V1BETA1}")
    if kind != KIND:
        raise ConfigError(f"kind: {_show(kind)} is not {KIND}")
    _check(doc, V1BETA2_SCHEMA if version == V1BETA2 else V1BETA1_SCHEMA, "")
    get = _getter(doc)
    unacted = [e for e in UNACTED if _uses(doc, e)]
    if version == V1BETA1:
        # Converted as Kueue converts: a feature is on only when its `enable` says so.
        fair = bool(get("fairSharing.enable"))
        wait_on = bool(get("waitForPodsReady.enable"))
        unacted = [e for e in unacted if e.path != "fairSharing.preemptionStrategies" or fair]
    else:
        fair = get("fairSharing") is not None
        wait_on = True  # v1beta2 has no `enable`: a file that says nothing of it asks for it
    ns = get("namespace") or namespace or DEFAULT_NAMESPACE
    frameworks = _frameworks(get)
    _check_fair_sharing(get, fair)
    _check_the_rest(get)
    return KueueConfig(
        api_version=version,
        kube_api_qps=_qps(get),
        kube_api_burst=_burst(get),
        leader_election=_leader_election(get),
        integrations=frameworks,
        fair_sharing=fair,
        namespace=ns,
        wait_for_pods_ready=_wait_for_pods_ready(get, version) if wait_on else None,
        resources=_resources(get),
        manage_jobs_without_queue_name=bool(get("manageJobsWithoutQueueName")),
        managed_jobs_namespace_selector=_namespace_selector(get, ns, frameworks),
        multi_kueue=_multi_kueue(get),
        admission_fair_sharing=_admission_fair_sharing(get),
        unacted=tuple(unacted),
    )


def _getter(doc: Mapping[str, Any]) -> Callable[[str], Any]:
    def get(path: str) -> Any:
        value: Any = doc
        for part in path.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        return value

    return get


def _uses(doc: Mapping[str, Any], entry: Unacted) -> bool:
    return entry.counts(_getter(doc)(entry.path))


def _seconds(get: Callable[[str], Any], path: str, default: float) -> float:
    value = get(path)
    seconds = default if value is None else duration_seconds(value)
    assert seconds is not None  # the schema checked it
    return seconds


def _qps(get: Callable[[str], Any]) -> float:
    qps = get("clientConnection.qps")
    if qps is None:
        return DEFAULT_QPS
    if not qps > 0 or qps == float("inf"):
        # Kueue reads a negative QPS as "no limit"; Tower's writes are always budgeted.
        raise ConfigError(
            f"clientConnection.qps: {qps!r} is not a number above 0 (Tower always limits "
            "its API requests)"
        )
    return float(qps)


def _burst(get: Callable[[str], Any]) -> int:
    burst = get("clientConnection.burst")
    if burst is None:
        return DEFAULT_BURST
    if burst < 1:
        raise ConfigError(f"clientConnection.burst: {burst!r} is not a whole number of at least 1")
    return int(burst)


def _leader_election(get: Callable[[str], Any]) -> LeaderElection:
    lock = get("leaderElection.resourceLock")
    if lock not in (None, "", "leases"):
        raise ConfigError(
            f"leaderElection.resourceLock: {lock!r} is not supported (Tower's lock is leases)"
        )
    elect = get("leaderElection.leaderElect")
    # component-base's recommended defaults, which Kueue applies.
    timings = [
        _seconds(get, f"leaderElection.{name}", default)
        for name, default in (
            ("leaseDuration", 15.0),
            ("renewDeadline", 10.0),
            ("retryPeriod", 2.0),
        )
    ]
    for name, seconds in zip(
        ("leaseDuration", "renewDeadline", "retryPeriod"), timings, strict=True
    ):
        if not seconds > 0:
            raise ConfigError(
                f"leaderElection.{name}: {get(f'leaderElection.{name}')!r} is not above 0"
            )
    lease, renew, retry = timings
    on = True if elect is None else bool(elect)
    if on and not lease > renew > retry:
        raise ConfigError(
            "leaderElection.leaseDuration must be longer than renewDeadline, and that longer "
            f"than retryPeriod (got {lease:g}s, {renew:g}s, {retry:g}s)"
        )
    return LeaderElection(
        leader_elect=on,
        lease_duration=lease,
        renew_deadline=renew,
        retry_period=retry,
        resource_name=get("leaderElection.resourceName") or DEFAULT_LEADER_ELECTION_ID,
        resource_namespace=get("leaderElection.resourceNamespace") or None,
    )


def _frameworks(get: Callable[[str], Any]) -> tuple[str, ...]:
    names: list[str] = get("integrations.frameworks") or list(DEFAULT_FRAMEWORKS)
    known = ", ".join(registry.KUEUE_FRAMEWORKS)
    seen: set[str] = set()
    for i, name in enumerate(names):
        if registry.unknown([name]):
            raise ConfigError(
                f"integrations.frameworks[{i}]: {name!r} is no integration (Kueue's are {known})"
            )
        if name in seen:
            raise ConfigError(f"integrations.frameworks[{i}]: {name!r} is listed twice")
        seen.add(name)
    for i, name in enumerate(get("integrations.externalFrameworks") or []):
        if name.count(".") < 2:  # Kueue's schema.ParseKindArg
            raise ConfigError(
                f"integrations.externalFrameworks[{i}]: {name!r} is not Kind.version.group"
            )
    return tuple(names)


def _check_fair_sharing(get: Callable[[str], Any], on: bool) -> None:
    strategies = get("fairSharing.preemptionStrategies")
    if not on:
        return
    if not strategies:
        if get("fairSharing.enable") is not None:  # v1beta1 fills in Kueue's default
            return
        raise ConfigError(
            "fairSharing.preemptionStrategies: must be set when fairSharing is (Kueue's "
            "default: [LessThanOrEqualToFinalShare, LessThanInitialShare])"
        )
    if strategies not in _STRATEGY_SETS:
        allowed = "; ".join(", ".join(s) for s in _STRATEGY_SETS)
        raise ConfigError(
            f"fairSharing.preemptionStrategies: {strategies!r} is not one of: {allowed}"
        )


def _not_negative(get: Callable[[str], Any], path: str, value: float | int | None) -> None:
    if value is not None and value < 0:
        raise ConfigError(f"{path}: {get(path)!r} must not be negative")


def _wait_for_pods_ready(get: Callable[[str], Any], version: str) -> WaitForPodsReady:
    base = "waitForPodsReady"
    timeout = _seconds(get, f"{base}.timeout", 0.0)
    _not_negative(get, f"{base}.timeout", timeout)
    if timeout == 0:  # Kueue treats 0 as unset
        timeout = DEFAULT_WAIT_TIMEOUT[version]
    recovery = _seconds(get, f"{base}.recoveryTimeout", timeout)
    _not_negative(get, f"{base}.recoveryTimeout", recovery)
    block = get(f"{base}.blockAdmission")
    strategy = f"{base}.requeuingStrategy"
    timestamp = get(f"{strategy}.timestamp") or "Eviction"
    if timestamp not in ("Eviction", "Creation"):
        raise ConfigError(f"{strategy}.timestamp: {timestamp!r} is not Eviction or Creation")
    for name in ("backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"):
        _not_negative(get, f"{strategy}.{name}", get(f"{strategy}.{name}"))
    base_seconds, max_seconds = (
        get(f"{strategy}.backoffBaseSeconds"),
        get(f"{strategy}.backoffMaxSeconds"),
    )
    return WaitForPodsReady(
        timeout=timeout,
        # v1beta1's enable also meant "block admission" unless it said otherwise.
        block_admission=(version == V1BETA1) if block is None else block,
        recovery_timeout=recovery,
        requeuing=RequeuingStrategy(
            timestamp=timestamp,
            backoff_limit_count=get(f"{strategy}.backoffLimitCount"),
            backoff_base_seconds=60 if base_seconds is None else base_seconds,
            backoff_max_seconds=3600 if max_seconds is None else max_seconds,
        ),
    )


def _resources(get: Callable[[str], Any]) -> Resources | None:
    if get("resources") is None:
        return None
    strategy = get("resources.quotaCheckStrategy")
    prefixes = tuple(get("resources.excludeResourcePrefixes") or ())
    if strategy is not None and strategy not in ("BlockUndeclared", "IgnoreUndeclared"):
        raise ConfigError(
            f"resources.quotaCheckStrategy: {strategy!r} is not BlockUndeclared or IgnoreUndeclared"
        )
    if strategy == "IgnoreUndeclared" and prefixes:
        raise ConfigError(
            "resources.quotaCheckStrategy: IgnoreUndeclared does not go with "
            "excludeResourcePrefixes"
        )
    transformations = []
    inputs: set[str] = set()
    for i, t in enumerate(get("resources.transformations") or []):
        here = f"resources.transformations[{i}]"
        how = t.get("strategy") or "Retain"
        if how not in ("Retain", "Replace"):
            raise ConfigError(f"{here}.strategy: {how!r} is not Retain or Replace")
        name = t.get("input") or ""
        if name in inputs:
            raise ConfigError(f"{here}.input: {name!r} is transformed twice")
        inputs.add(name)
        outputs = tuple((k, str(v)) for k, v in (t.get("outputs") or {}).items())
        transformations.append(
            ResourceTransformation(name, how, t.get("multiplyBy") or "", outputs)
        )
    mappings = tuple(
        DeviceClassMapping(m.get("name") or "", tuple(m.get("deviceClassNames") or ()))
        for m in get("resources.deviceClassMappings") or []
    )
    return Resources(strategy, prefixes, tuple(transformations), mappings)


_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def default_namespace_selector(namespace: str) -> LabelSelector:
    """Kueue's managedJobsNamespaceSelector when none is given: not kube-system, not the
    namespace the manager runs in."""
    requirement = SelectorRequirement(
        "kubernetes.io/metadata.name", "NotIn", ("kube-system", namespace)
    )
    return LabelSelector((), (requirement,))


def _namespace_selector(
    get: Callable[[str], Any], namespace: str, frameworks: tuple[str, ...]
) -> LabelSelector:
    path = "managedJobsNamespaceSelector"
    raw = get(path)
    if raw is None:
        return default_namespace_selector(namespace)
    requirements = []
    for i, r in enumerate(raw.get("matchExpressions") or []):
        here = f"{path}.matchExpressions[{i}]"
        op, values = r.get("operator"), tuple(r.get("values") or ())
        if op not in _OPERATORS:
            raise ConfigError(f"{here}.operator: {op!r} is not one of {', '.join(_OPERATORS)}")
        if (op in ("In", "NotIn")) != bool(values):
            need = "needs values" if op in ("In", "NotIn") else "takes no values"
            raise ConfigError(f"{here}.values: {op} {need}")
        requirements.append(SelectorRequirement(r.get("key") or "", op, values))
    labels = tuple(sorted((raw.get("matchLabels") or {}).items()))
    selector = LabelSelector(labels, tuple(requirements))
    if "pod" in frameworks:  # Kueue keeps the pod integration out of these namespaces
        for ns in ("kube-system", namespace):
            if selector.matches({"kubernetes.io/metadata.name": ns}):
                raise ConfigError(f"{path}: must not match the namespace {ns!r}")
    return selector


_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
ALL_AT_ONCE = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"


def _multi_kueue(get: Callable[[str], Any]) -> MultiKueue:
    gc = _seconds(get, "multiKueue.gcInterval", 60.0)
    _not_negative(get, "multiKueue.gcInterval", gc)
    lost = _seconds(get, "multiKueue.workerLostTimeout", 900.0)
    _not_negative(get, "multiKueue.workerLostTimeout", lost)
    origin = get("multiKueue.origin") or "multikueue"
    if len(origin) > 63 or not _LABEL_VALUE.match(origin):
        raise ConfigError(f"multiKueue.origin: {origin!r} is not a label value")
    dispatcher = get("multiKueue.dispatcherName") or ALL_AT_ONCE
    step = get("multiKueue.incrementalDispatcherConfig.stepSize")
    if get("multiKueue.incrementalDispatcherConfig") is not None and dispatcher != INCREMENTAL:
        raise ConfigError(
            f"multiKueue.incrementalDispatcherConfig: only with the dispatcherName {INCREMENTAL}"
        )
    if step is not None and step < 1:
        raise ConfigError(
            f"multiKueue.incrementalDispatcherConfig.stepSize: {step!r} is not at least 1"
        )
    if dispatcher == INCREMENTAL and step is None:
        step = 3
    external = tuple(f.get("name") or "" for f in get("multiKueue.externalFrameworks") or [])
    for i, name in enumerate(external):
        if name.count(".") < 2:
            raise ConfigError(
                f"multiKueue.externalFrameworks[{i}].name: {name!r} is not Kind.version.group"
            )
    return MultiKueue(gc, origin, lost, dispatcher, external, step)


_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _admission_fair_sharing(get: Callable[[str], Any]) -> AfsConfig | None:
    base = "admissionFairSharing"
    if get(base) is None:
        return None
    weights = {str(k): float(v) for k, v in (get(f"{base}.resourceWeights") or {}).items()}
    return AfsConfig(
        _seconds(get, f"{base}.usageHalfLifeTime", 0),
        _seconds(get, f"{base}.usageSamplingInterval", 300.0),
        weights,
    )


def _check_the_rest(get: Callable[[str], Any]) -> None:
    """Kueue's checks of the fields Tower only reports: refused there, refused here."""
    base = "admissionFairSharing"
    if get(base) is not None:
        _not_negative(
            get, f"{base}.usageHalfLifeTime", _seconds(get, f"{base}.usageHalfLifeTime", 0)
        )
        if _seconds(get, f"{base}.usageSamplingInterval", 300.0) <= 0:
            raise ConfigError(f"{base}.usageSamplingInterval: must be above 0")
        for name, weight in (get(f"{base}.resourceWeights") or {}).items():
            _not_negative(get, f"{base}.resourceWeights[{name}]", weight)
    for name in ("afterFinished", "afterDeactivatedByKueue"):
        path = f"objectRetentionPolicies.workloads.{name}"
        _not_negative(get, path, _seconds(get, path, 0))
    if get("internalCertManagement.enable") is not False:
        service = get("internalCertManagement.webhookServiceName")
        if service is not None and (len(service) > 63 or not _DNS_LABEL.match(service)):
            raise ConfigError(
                f"internalCertManagement.webhookServiceName: {service!r} is not a DNS label"
            )
        secret = get("internalCertManagement.webhookSecretName")
        if secret is not None and (len(secret) > 253 or not _DNS_SUBDOMAIN.match(secret)):
            raise ConfigError(
                f"internalCertManagement.webhookSecretName: {secret!r} is not a DNS subdomain"
            )
    port = get("visibilityServer.bindPort")
    if port is not None and not 0 < port < 65536:
        raise ConfigError(f"visibilityServer.bindPort: {port!r} is not a port (1-65535)")
