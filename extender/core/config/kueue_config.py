"""Kueue's Configuration file, parsed: checked, defaulted and converted as Kueue v0.19.2 does it."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from extender.core.admission.cluster_profile import AccessProvider
from extender.core.admission.pods_ready import RequeuingStrategy, WaitForPodsReady
from extender.core.admission.retention import WorkloadRetention
from extender.core.api.quantity import parse_quantity
from extender.core.api.unacted import Unacted
from extender.core.config.custom_labels import CustomLabels
from extender.core.config.custom_labels import parse as parse_custom_labels
from extender.core.config.device_classes import check as check_device_classes
from extender.core.config.fields import UNACTED
from extender.core.config.gates import resolve
from extender.core.config.resource_policy import ResourcePolicy, Transformation
from extender.core.config.schema import (
    KIND,
    PREEMPTION_STRATEGY_SETS,
    V1BETA1,
    V1BETA1_SCHEMA,
    V1BETA2,
    V1BETA2_SCHEMA,
    ConfigError,
    check,
    duration_seconds,
    show,
)
from extender.core.jobframework import registry
from extender.core.scheduling.admission_fair_sharing import AfsConfig
from extender.core.scheduling.options import SchedulingOptions


@dataclass(frozen=True, slots=True)
class LeaderElection:
    leader_elect: bool
    lease_duration: float  # seconds
    renew_deadline: float
    retry_period: float
    resource_name: str
    resource_namespace: str | None  # None: the pod's own namespace


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
    access_providers: tuple[AccessProvider, ...] = ()  # clusterProfile.accessProviders


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    """What Kueue's metrics section and its metrics' feature gates turn on (Kueue's defaults
    without a file)."""

    cluster_queue_resources: bool = False  # metrics.enableClusterQueueResources
    local_queues: bool = True  # feature gate LocalQueueMetrics (Beta, on)
    local_queues_enabled: bool = True  # metrics.localQueueMetrics.enable
    local_queue_selector: LabelSelector | None = None  # ...localQueueSelector; None: all
    cohorts: bool = True  # feature gate MetricsForCohorts (Beta, on): the *_info metrics
    workload_creation_latency: bool = True  # MetricForWorkloadCreationLatency (Beta, on)

    def exposes_local_queue(self, labels: Mapping[str, str]) -> bool:
        """Whether a LocalQueue with these labels has its metrics reported (Kueue's
        ShouldExposeLocalQueueMetrics)."""
        return (
            self.local_queues
            and self.local_queues_enabled
            and (self.local_queue_selector is None or self.local_queue_selector.matches(labels))
        )

    def with_gates(self, gates: Mapping[str, bool]) -> MetricsConfig:
        """These metrics as Kueue's resolved feature gates turn them on or off."""
        return replace(
            self,
            local_queues=gates.get("LocalQueueMetrics", True),
            cohorts=gates.get("MetricsForCohorts", True),
            workload_creation_latency=gates.get("MetricForWorkloadCreationLatency", True),
        )


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
    metrics: MetricsConfig
    metrics_bind_address: str  # metrics.bindAddress: "0" is no metrics server
    visibility_bind_address: str | None  # visibilityServer: None when the file has none
    feature_gates: Mapping[str, bool]  # featureGates as the file asks (checked: gates.resolve)
    unacted: tuple[Unacted, ...]  # what the file asks for that Tower does not do
    label_keys_to_copy: tuple[str, ...] = ()  # integrations.labelKeysToCopy
    # objectRetentionPolicies.workloads: when finished and deactivated Workloads go.
    workload_retention: WorkloadRetention = field(default_factory=WorkloadRetention)
    fair_sharing_strategies: tuple[str, ...] = ()  # as written (empty: Kueue's default)
    # metrics.customLabels, on as the file's featureGates say (--feature-gates may change it).
    custom_labels: CustomLabels = field(default_factory=CustomLabels)

    def warnings(self, name: str) -> list[str]:
        """One line for each field set (or on by default) that Tower does not act on."""
        return [entry.message(name) for entry in self.unacted]

    def scheduling(self, gates: Mapping[str, bool]) -> SchedulingOptions:
        """fairSharing.preemptionStrategies and resources.quotaCheckStrategy, as the resolved
        feature gates let the scheduler act on them."""
        strategy = self.resources.quota_check_strategy if self.resources is not None else None
        return SchedulingOptions.of(
            strategies=self.fair_sharing_strategies, quota_check_strategy=strategy, gates=gates
        )

    @property
    def resource_policy(self) -> ResourcePolicy:
        """resources.excludeResourcePrefixes, transformations and deviceClassMappings, as
        acted on."""
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
            device_classes={
                device_class: m.name
                for m in resources.device_class_mappings
                for device_class in m.device_class_names
            },
        )


# Kueue's defaults (apis/config/v1beta2/defaults.go; v1beta1's are the same where both have
# the field, but for waitForPodsReady).
DEFAULT_QPS = 300.0
DEFAULT_BURST = 500
DEFAULT_LEADER_ELECTION_ID = "c1f6bfd2.kueue.x-k8s.io"
DEFAULT_NAMESPACE = "kueue-system"
DEFAULT_FRAMEWORKS = ("batch/job",)
DEFAULT_METRICS_BIND_ADDRESS = ":8443"
DEFAULT_VISIBILITY_BIND_PORT = 8082  # Kueue's visibilityServer.bindPort default
DEFAULT_WAIT_TIMEOUT = {V1BETA2: 1800.0, V1BETA1: 300.0}


def parse(doc: Any, namespace: str | None = None) -> KueueConfig:
    """The Configuration in `doc` (a YAML document), or ConfigError naming the field.

    `namespace` stands for Kueue's fallback when the file has none: the namespace it runs in.
    """
    if not isinstance(doc, Mapping):
        raise ConfigError(f"not a {KIND} (a YAML mapping of its fields)")
    version, kind = doc.get("apiVersion"), doc.get("kind")
    if version not in (V1BETA2, V1BETA1):
        raise ConfigError(f"apiVersion: {show(version)} is not {V1BETA2} or {V1BETA1}")
    if kind != KIND:
        raise ConfigError(f"kind: {show(kind)} is not {KIND}")
    check(doc, V1BETA2_SCHEMA if version == V1BETA2 else V1BETA1_SCHEMA, "")
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
    asked = dict(get("featureGates") or {})
    try:
        gates = resolve(asked)
    except ConfigError as err:
        raise ConfigError(f"featureGates: {err}") from None
    return KueueConfig(
        api_version=version,
        kube_api_qps=_qps(get),
        kube_api_burst=_burst(get),
        leader_election=_leader_election(get),
        integrations=frameworks,
        fair_sharing=fair,
        namespace=ns,
        wait_for_pods_ready=_wait_for_pods_ready(get, version) if wait_on else None,
        resources=_resources(get, gates),
        manage_jobs_without_queue_name=bool(get("manageJobsWithoutQueueName")),
        managed_jobs_namespace_selector=_namespace_selector(get, ns, frameworks),
        multi_kueue=_multi_kueue(get),
        admission_fair_sharing=_admission_fair_sharing(get),
        metrics=_metrics(get).with_gates(gates),
        metrics_bind_address=_metrics_bind_address(get),
        visibility_bind_address=_visibility_bind_address(get),
        feature_gates=asked,
        unacted=tuple(unacted),
        fair_sharing_strategies=tuple(get("fairSharing.preemptionStrategies") or ()),
        label_keys_to_copy=tuple(str(k) for k in get("integrations.labelKeysToCopy") or ()),
        workload_retention=_workload_retention(get),
        custom_labels=parse_custom_labels(
            get("metrics.customLabels"), enabled=gates.get("CustomMetricLabels", False)
        ),
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


def _metrics_bind_address(get: Callable[[str], Any]) -> str:
    """metrics.bindAddress: host:port (an empty host is every address), or "0" for none."""
    value = get("metrics.bindAddress") or DEFAULT_METRICS_BIND_ADDRESS
    _, colon, port = value.rpartition(":")
    if value != "0" and (not colon or not port.isdigit() or int(port) > 65535):
        raise ConfigError(
            f"metrics.bindAddress: {value!r} is not host:port (:8443, Kueue's default; "
            "0: no metrics server)"
        )
    return str(value)


def _visibility_bind_address(get: Callable[[str], Any]) -> str | None:
    """visibilityServer as host:port, with Kueue's defaults (every address, port 8082) for
    what the section leaves out; None when the file has no visibilityServer (Tower serves the
    visibility API where it is asked to: this field, or --visibility-address)."""
    if get("visibilityServer") is None:
        return None
    address = get("visibilityServer.bindAddress")
    if address is not None:
        try:
            ipaddress.ip_address(address)
        except ValueError:
            raise ConfigError(
                f"visibilityServer.bindAddress: {address!r} is not an IP address"
            ) from None
    port = get("visibilityServer.bindPort") or DEFAULT_VISIBILITY_BIND_PORT
    host = f"[{address}]" if address and ":" in address else (address or "")
    return f"{host}:{port}"


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
    if strategies not in PREEMPTION_STRATEGY_SETS:
        allowed = "; ".join(", ".join(s) for s in PREEMPTION_STRATEGY_SETS)
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


def _resources(get: Callable[[str], Any], gates: Mapping[str, bool]) -> Resources | None:
    if get("resources") is None:
        return None
    strategy = get("resources.quotaCheckStrategy")
    prefixes = tuple(get("resources.excludeResourcePrefixes") or ())
    # Kueue's validateQuotaCheckStrategy, in its words; with the gate off it reads no strategy.
    if strategy is not None and gates.get("QuotaCheckStrategy", True):
        if strategy == "IgnoreUndeclared" and prefixes:
            raise ConfigError(
                'resources.quotaCheckStrategy: Invalid value: "IgnoreUndeclared": '
                "excludeResourcePrefixes is not allowed when quotaCheckStrategy is IgnoreUndeclared"
            )
        if strategy not in ("BlockUndeclared", "IgnoreUndeclared"):
            raise ConfigError(
                f'resources.quotaCheckStrategy: Unsupported value: "{strategy}": supported '
                'values: "IgnoreUndeclared", "BlockUndeclared"'
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
    raw_mappings = get("resources.deviceClassMappings") or []
    check_device_classes(raw_mappings)  # Kueue's refusals, in its words
    mappings = tuple(
        DeviceClassMapping(m.get("name") or "", tuple(m.get("deviceClassNames") or ()))
        for m in raw_mappings
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
    selector = _label_selector(raw, path)
    if "pod" in frameworks:  # Kueue keeps the pod integration out of these namespaces
        for ns in ("kube-system", namespace):
            if selector.matches({"kubernetes.io/metadata.name": ns}):
                raise ConfigError(f"{path}: must not match the namespace {ns!r}")
    return selector


def _label_selector(raw: Mapping[str, Any], path: str) -> LabelSelector:
    """A metav1.LabelSelector, refused (naming its field) where Kubernetes would refuse it."""
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
    return LabelSelector(labels, tuple(requirements))


def _metrics(get: Callable[[str], Any]) -> MetricsConfig:
    """Kueue defaults localQueueMetrics to {enable: true} only when the section is absent:
    a section without `enable` turns LocalQueue metrics off, as in Kueue."""
    section = get("metrics.localQueueMetrics")
    raw = get("metrics.localQueueMetrics.localQueueSelector")
    return MetricsConfig(
        cluster_queue_resources=bool(get("metrics.enableClusterQueueResources")),
        local_queues_enabled=section is None or bool(section.get("enable")),
        local_queue_selector=(
            _label_selector(raw, "metrics.localQueueMetrics.localQueueSelector")
            if raw is not None
            else None
        ),
    )


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
    # Kueue takes the deprecated credentialsProviders when accessProviders is empty.
    providers = get("multiKueue.clusterProfile.accessProviders") or get(
        "multiKueue.clusterProfile.credentialsProviders"
    )
    access = tuple(
        AccessProvider(str(p.get("name") or ""), dict(p.get("execConfig") or {}))
        for p in providers or []
    )
    return MultiKueue(gc, origin, lost, dispatcher, external, step, access)


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


def _workload_retention(get: Callable[[str], Any]) -> WorkloadRetention:
    """objectRetentionPolicies.workloads: each duration in seconds, None where unset."""
    after = {}
    for name in ("afterFinished", "afterDeactivatedByKueue"):
        path = f"objectRetentionPolicies.workloads.{name}"
        after[name] = None if get(path) is None else _seconds(get, path, 0)
    return WorkloadRetention(after["afterFinished"], after["afterDeactivatedByKueue"])


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
