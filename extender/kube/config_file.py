"""`run --config FILE`: reads Kueue's Configuration and settles each flag: flag, file, default."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from typing import Any

import yaml

from extender.core.admission.multikueue import INCREMENTAL_STEP, MultiKueueSettings
from extender.core.admission.retention import WorkloadRetention
from extender.core.config.custom_labels import GATE as CUSTOM_LABELS_GATE
from extender.core.config.custom_labels import CustomLabels
from extender.core.config.gates import merge, parse_flag, resolve
from extender.core.config.kueue_config import (
    KueueConfig,
    MetricsConfig,
    MultiKueue,
    default_namespace_selector,
    parse,
)
from extender.core.config.resource_policy import ResourcePolicy
from extender.core.config.schema import ConfigError
from extender.core.jobframework import registry
from extender.core.scheduling.options import SchedulingOptions

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Tower's own defaults, for a flag given neither on the command line nor in a file.
TOWER_DEFAULTS: dict[str, Any] = {
    # Kueue v0.19.2's clientConnection defaults (apis/config/v1beta2/defaults.go).
    "kube_api_qps": 300.0,
    "kube_api_burst": 500,
    "fair_sharing": False,
    "leader_elect": True,
    "leader_election_id": "tower-controller",
    "lease_duration": 15.0,
    "renew_deadline": 10.0,
    "retry_period": 2.0,
    "integrations": None,  # the registry's default set
    "wait_for_pods_ready": None,  # off: Tower's behaviour without a Configuration
    "resource_policy": ResourcePolicy(),  # requests as the pods ask for them
    "admission_fair_sharing": None,  # off
    "managed_namespaces": None,  # Kueue's default, with Tower's namespace (settle)
    "multikueue": MultiKueueSettings(),  # Kueue's multiKueue defaults
    "namespace": None,  # Tower's own (settle): where workers' kubeconfig Secrets are
    "metrics_address": ":8443",  # Kueue's metrics.bindAddress default
    "visibility_address": "0",  # served where asked: visibilityServer or the flag
    "metrics_config": MetricsConfig(),  # Kueue's metrics defaults
    "label_keys_to_copy": (),  # integrations.labelKeysToCopy: none
    "workload_retention": WorkloadRetention(),  # objectRetentionPolicies: nothing deleted
    "custom_labels": CustomLabels(),  # metrics.customLabels: none
}
FEATURE_GATES_FLAG = "--feature-gates"


class ConfigFileError(Exception):
    """A --config file Tower cannot use; its message is the one line to print."""


def load(path: str, namespace: str | None = None) -> KueueConfig:
    """The Configuration in the file at `path`, or ConfigFileError naming the field.
    `namespace` is Tower's own (default: POD_NAMESPACE), where the file names none."""
    try:
        with open(path, encoding="utf-8") as handle:
            doc = yaml.load(handle, Loader=_Loader)
    except OSError as err:
        raise ConfigFileError(f"--config {path}: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        at = f" (line {where.line + 1})" if where is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigFileError(f"--config {path}: not YAML: {problem}{at}") from None
    try:
        return parse(doc, namespace=namespace or os.environ.get("POD_NAMESPACE"))
    except ConfigError as err:
        raise ConfigFileError(f"--config {path}: {err}") from None


def from_file(config: KueueConfig) -> dict[str, Any]:
    """The flags' values the file gives, with Kueue's defaults where it is silent."""
    lease = config.leader_election
    values: dict[str, Any] = {
        "kube_api_qps": config.kube_api_qps,
        "kube_api_burst": config.kube_api_burst,
        "fair_sharing": config.fair_sharing,
        "leader_elect": lease.leader_elect,
        "leader_election_id": lease.resource_name,
        "lease_duration": lease.lease_duration,
        "renew_deadline": lease.renew_deadline,
        "retry_period": lease.retry_period,
        "integrations": config.integrations,
        "wait_for_pods_ready": config.wait_for_pods_ready,
        "resource_policy": config.resource_policy,
        "admission_fair_sharing": config.admission_fair_sharing,
        "managed_namespaces": config.managed_jobs_namespace_selector,
        "multikueue": multikueue_settings(config.multi_kueue),
        "metrics_address": config.metrics_bind_address,
        "metrics_config": config.metrics,
        "label_keys_to_copy": config.label_keys_to_copy,
        "workload_retention": config.workload_retention,
        "custom_labels": config.custom_labels,
    }
    if config.visibility_bind_address is not None:
        values["visibility_address"] = config.visibility_bind_address
    if lease.resource_namespace is not None:  # else the pod's namespace, as in Kueue
        values["leader_election_namespace"] = lease.resource_namespace
    return values


def kueue_lease_of(config: KueueConfig, own_namespace: str) -> str:
    """Where Kueue's manager leads, as far as this file tells (Tower's own lease aside): the
    lease's namespace, else the file's namespace when it is not Tower's, else Kueue's; its
    name, unless it is Tower's own lease name (Tower's shipped file keeps tower-controller),
    else Kueue's default."""
    lease = config.leader_election
    namespace = lease.resource_namespace or (
        config.namespace if config.namespace != own_namespace else "kueue-system"
    )
    name = lease.resource_name
    if name == TOWER_DEFAULTS["leader_election_id"]:
        name = "c1f6bfd2.kueue.x-k8s.io"
    return f"{namespace}/{name}"


def multikueue_settings(section: MultiKueue) -> MultiKueueSettings:
    """The file's multiKueue section as the MultiKueue check controller takes it."""
    return MultiKueueSettings(
        origin=section.origin,
        worker_lost_timeout=section.worker_lost_timeout,
        gc_interval=section.gc_interval,
        dispatcher=section.dispatcher_name,
        incremental_step=section.incremental_step_size or INCREMENTAL_STEP,
        access_providers=section.access_providers,
    )


def settle(args: argparse.Namespace) -> list[str]:
    """Fill in every flag left unset (None): from the --config file if there is one, else
    Tower's default. A flag given (or its environment variable) always wins. Returns the
    file's warnings, one line each, or raises ConfigFileError."""
    warnings: list[str] = []
    fallback: dict[str, Any] = dict(TOWER_DEFAULTS)
    own = os.environ.get("POD_NAMESPACE") or "tower-system"
    fallback["leader_election_namespace"] = own
    fallback["managed_namespaces"] = default_namespace_selector(own)
    fallback["namespace"] = own
    file_gates: dict[str, bool] = {}
    config: KueueConfig | None = None
    if args.config:
        config = load(args.config)
        fallback.update(from_file(config))
        fallback["kueue_lease"] = kueue_lease_of(config, own)
        warnings = config.warnings(args.config)
        file_gates = dict(config.feature_gates)
    for name, value in fallback.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    args.feature_gates = feature_gates(file_gates, getattr(args, "feature_gates_flag", None))
    refusal = registry.gate_refusal(args.integrations or (), args.feature_gates)
    if refusal is not None:  # Kueue's manager does not start either
        raise ConfigFileError(refusal)
    args.metrics_config = args.metrics_config.with_gates(args.feature_gates)
    args.scheduling = (
        config.scheduling(args.feature_gates)
        if config is not None
        else SchedulingOptions.of(
            strategies=None, quota_check_strategy=None, gates=args.feature_gates
        )
    )
    if args.feature_gates["DisableWaitForPodsReady"]:  # Kueue's waitforpodsready.Enabled
        args.wait_for_pods_ready = None
    warnings.extend(_settle_custom_labels(args))
    return warnings


def _settle_custom_labels(args: argparse.Namespace) -> list[str]:
    """metrics.customLabels as the resolved CustomMetricLabels gate lets them act: the
    metrics' custom_<name> labels, and their Workload keys join the keys copied to each job's
    Workload (Kueue's getLabelsAndAnnotationsToCopy). Set with the gate off, they are said to
    do nothing, one line, as Kueue's manager says at start."""
    custom = replace(args.custom_labels, enabled=args.feature_gates[CUSTOM_LABELS_GATE])
    args.custom_labels = custom
    args.label_keys_to_copy = custom.label_keys_to_copy(args.label_keys_to_copy)
    args.annotations_to_copy = custom.workload_annotation_keys()
    if custom.entries and not custom.enabled:
        return [
            f"Configuration {args.config}: metrics.customLabels is set but feature gate "
            f"{CUSTOM_LABELS_GATE} is off: the custom labels have no effect (as in Kueue)"
        ]
    return []


def feature_gates(file: dict[str, bool], flag: str | None) -> dict[str, bool]:
    """Every Kueue gate's value: the file's featureGates with --feature-gates on top, gate by
    gate; ConfigFileError in Kueue's words (or Tower's, for a gate it cannot honour)."""
    try:
        return resolve(merge(file, parse_flag(flag or "")))
    except ConfigError as err:
        raise ConfigFileError(f"{FEATURE_GATES_FLAG}: {err}") from None
