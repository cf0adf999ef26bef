"""Nothing of Kueue v0.19.2 is silently ignored: every label and annotation key it documents,
every field of its Configuration and every feature gate is acted on by Tower or said.

- Keys (tests/data/kueue-keys/): each has one row, `acted` naming the test that shows Tower
  reading or writing it, or `warned` naming the test of the line a user is told. The walk checks
  that every named test exists and that its module speaks of the key.
- Configuration fields (tests/data/kueue-config/configuration-fields.txt): a field under an
  entry of extender/core/config/fields.py's UNACTED is warned, and a Configuration that sets it
  is checked to say so; any other field is acted on, and FIELD_TESTS must name the test that
  shows it (for it or the nearest field above it). A field taken out of UNACTED fails here until
  its test is named.
- Feature gates (tests/data/kueue-features/): each is in extender/core/config/feature_gates.py;
  one Tower implements, or follows at Kueue's default `true`, is acted on and GATE_TESTS names
  its test; one Tower cannot turn on is refused when asked on (resolve's one line; the run exits
  2); an `internal` one changes nothing a user sees and either value is taken.
Each walk prints its counts; the assertion is that none is neither.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.core.api import unread_keys
from extender.core.api.unacted import Unacted
from extender.core.config import fields as config_fields
from extender.core.config.feature_gates import BY_NAME, FeatureGate
from extender.core.config.feature_gates import Stand as GateStand
from extender.core.config.gates import resolve
from extender.core.config.kueue_config import parse
from extender.core.config.schema import ConfigError

ROOT = Path(__file__).resolve().parents[1]
KEYS_FILE = ROOT / "tests" / "data" / "kueue-keys" / "labels_and_annotations.yaml"
K = "kueue.x-k8s.io/"
ACTED, WARNED = "acted", "warned"
AT_ADMISSION = "a webhook warning at admission"


@dataclass(frozen=True)
class Stand:
    """Tower's stand on one key: what it does, and the test that shows it."""

    stand: str  # acted or warned
    test: str  # path::function, from the repository root
    how: str  # what the test shows Tower doing, or how the user is told
    via: str = ""  # a manifest the test applies, when the key is written there, not in the test
    spelled: str = ""  # how the test's module spells the key, when built from a shorter prefix


def acted(test: str, how: str, via: str = "", spelled: str = "") -> Stand:
    return Stand(ACTED, test, how, via, spelled)


def warned(test: str) -> Stand:
    return Stand(WARNED, test, AT_ADMISSION)


UNIT = "tests/unit/core/jobframework/"
GROUPS = UNIT + "test_pod_groups.py::"
POD_GROUPS = "tests/controller/test_pod_groups.py::"
TOPOLOGY = "tests/controller/test_topology.py::"
WARNINGS = "tests/webhook/test_unread_keys.py::"
ELASTIC = (
    "tests/controller/test_elastic.py::"
    "test_kueues_scalable_job_scales_down_in_place_and_up_through_a_slice"
)
STATEFULSET = POD_GROUPS + "test_kueues_sample_statefulset_is_one_workload_admitted_whole"
JOB_PARALLELISM = (
    UNIT
    + "test_jobframework.py::test_a_job_runs_with_the_admitted_parallelism_and_a_stop_puts_back_its_own"
)
SLICES = TOPOLOGY + "test_a_jobsets_slices_each_get_a_host_and_its_pods_ranked_by_job_index"
TAS_EXAMPLES = "tests/data/kueue-v0.19.2/examples/tas/"
TOPOLOGY_E2E = (
    "tests/e2e/test_topology_cluster.py::test_kueues_examples_are_placed_and_bound_in_their_domains"
)
START_PATCH = (
    "tests/unit/kube/test_kube_objects.py::test_start_patch_unsuspends_and_places_the_pods"
)
TOY_KIND = (
    "tests/controller/test_toy_kind.py::test_a_toy_kind_is_queued_admitted_started_and_finished"
)

STANDS: dict[tuple[str, str], Stand] = {
    (K + "admission-gated-by", "Annotation"): acted(
        "tests/controller/test_admission_gates.py::"
        "test_a_gated_job_waits_the_one_behind_it_runs_and_ungating_admits_it",
        "a gated Job waits until its gates are taken off",
    ),
    (K + "cluster-queue-name", "Label"): acted(START_PATCH, "written on the pods at start"),
    (K + "component-workload-index", "Annotation"): acted(
        GROUPS + "test_a_leaderworkerset_is_one_workload_per_group",
        "written on each LeaderWorkerSet group's Workload",
    ),
    (K + "elastic-job", "Annotation"): acted(
        ELASTIC,
        "an elastic Job scales while admitted: down in place, up through a Workload slice",
    ),
    (K + "is-group-workload", "Annotation"): acted(
        POD_GROUPS + "test_kueues_pod_group_waits_for_its_members_then_runs_whole_and_finishes",
        "written on a pod group's Workload",
    ),
    (K + "job-completions-equal-parallelism", "Annotation"): acted(
        JOB_PARALLELISM, "a partially admitted Job's completions follow its parallelism"
    ),
    (K + "job-min-parallelism", "Annotation"): acted(
        JOB_PARALLELISM, "a Job is admitted partially down to it"
    ),
    (K + "job-owner-gvk", "Annotation"): acted(STATEFULSET, "written on a StatefulSet's Workload"),
    (K + "job-owner-name", "Annotation"): acted(
        "tests/e2e/test_multikueue_cluster.py::test_kueues_statefulset_sample_runs_on_the_worker",
        "written on a StatefulSet's Workload, which is found by it",
    ),
    (K + "job-uid", "Label"): acted(
        "tests/unit/kube/test_kube_objects.py::test_workload_is_owned_by_its_job_and_keeps_the_template",
        "written on each Workload",
    ),
    (K + "local-queue-name", "Label"): acted(TOY_KIND, "written on the pods at start"),
    (K + "managed", "Label"): acted(
        "tests/unit/core/jobframework/test_pod_adapter.py::"
        "test_the_webhook_gates_labels_and_holds_a_pod_and_applies_twice_the_same",
        "written on a queued pod",
    ),
    (K + "max-exec-time-seconds", "Label"): acted(
        "tests/controller/test_exec_time.py::"
        "test_the_label_follows_into_a_waiting_workload_and_is_refused_on_a_running_job",
        "becomes the Workload's maximumExecutionTimeSeconds",
    ),
    (K + "multikueue-origin", "Label"): acted(
        "tests/controller/test_multikueue.py::test_a_job_runs_on_the_worker_that_admits_it",
        "written on a worker's copies and read to collect them",
    ),
    (K + "multikueue-origin-uid", "Annotation"): acted(
        "tests/controller/test_multikueue_kinds.py::test_kueues_serving_examples_run_on_the_worker",
        "written on a worker's copy of a serving workload",
    ),
    (K + "pod-group-fast-admission", "Annotation"): acted(
        STATEFULSET, "written on a StatefulSet's pods, admitted as one group of its replicas"
    ),
    (K + "pod-group-name", "Label"): acted(
        GROUPS + "test_a_member_belongs_to_its_group_by_its_role_and_the_annotation_wins",
        "a pod's group",
    ),
    (K + "pod-group-name", "Annotation"): acted(
        GROUPS + "test_a_member_belongs_to_its_group_by_its_role_and_the_annotation_wins",
        "a pod's group, before the label",
    ),
    (K + "pod-group-pod-index", "Label"): acted(
        GROUPS + "test_the_webhook_copies_a_members_rank_into_kueues_pod_index_label",
        "written on a group's pods and its podSets ranked by it",
    ),
    (K + "pod-group-pod-index-label", "Annotation"): acted(
        GROUPS + "test_the_webhook_copies_a_members_rank_into_kueues_pod_index_label",
        "the label it names is copied into pod-group-pod-index",
    ),
    (K + "pod-group-serving", "Annotation"): acted(
        GROUPS + "test_a_leaderworkersets_templates_are_marked_and_its_statefulsets_left_alone",
        "written on a serving group's templates",
    ),
    (K + "pod-group-total-count", "Annotation"): acted(
        GROUPS + "test_a_members_metadata_is_checked_at_create", "a group's size, checked at create"
    ),
    (K + "pod-index-offset", "Annotation"): acted(
        "tests/unit/core/jobframework/test_pod_index_offset.py::"
        "test_the_ungater_reads_a_pods_offset_and_ranks_the_workers_from_it",
        "written on the workers' template of an MPIJob whose launcher runs as a worker and of "
        "a LeaderWorkerSet with a leader; the topology ungater ranks their pods from it",
    ),
    (K + "pod-suspending-parent", "Annotation"): acted(
        "tests/unit/core/jobframework/test_pod_adapter.py::"
        "test_a_deployments_template_is_marked_for_its_queue_once",
        "written on a Deployment's template; its pods are queued one by one",
    ),
    (K + "podset", "Label"): acted(START_PATCH, "written on the pods at start"),
    (K + "podset-group-name", "Annotation"): acted(
        TOPOLOGY + "test_kueues_leaderworkerset_tas_example_puts_each_group_in_one_rack",
        "a leader and its workers placed in one domain",
    ),
    (K + "podset-preferred-topology", "Annotation"): acted(
        TOPOLOGY_E2E,
        "placed in one domain where it can be",
        via=TAS_EXAMPLES + "sample-job-preferred.yaml",
    ),
    (K + "podset-required-topology", "Annotation"): acted(
        TOPOLOGY + "test_kueues_required_example_is_placed_in_one_rack_and_its_pods_pinned",
        "placed in one domain",
    ),
    (K + "podset-slice-required-topology", "Annotation"): acted(
        SLICES, "each slice placed in its own domain"
    ),
    (K + "podset-slice-required-topology-constraints", "Annotation"): acted(
        "tests/webhook/test_validate_topology.py::"
        "test_a_bad_topology_annotation_is_refused_with_kueues_words",
        "read into slice layers, refused in Kueue's words when bad",
        spelled="slice-required-topology-constraints",
    ),
    (K + "podset-slice-size", "Annotation"): acted(SLICES, "the size of each slice"),
    (K + "podset-unconstrained-topology", "Annotation"): acted(
        TOPOLOGY_E2E,
        "placed wherever there is room",
        via=TAS_EXAMPLES + "sample-job-unconstrained.yaml",
    ),
    (K + "prebuilt-workload-name", "Label"): acted(
        "tests/controller/test_prebuilt_workload.py::"
        "test_a_finished_prebuilt_workload_loses_kueues_finalizer",
        "the job adopts the Workload it names",
    ),
    (K + "prebuilt-workload-name", "Annotation"): acted(
        "tests/controller/test_multikueue.py::test_a_job_runs_on_the_worker_that_admits_it",
        "written on a worker's copy, which adopts the Workload it names",
    ),
    (K + "priority-boost", "Annotation"): warned(
        WARNINGS + "test_a_workloads_unread_key_is_warned"
    ),
    (K + "priority-class", "Label"): acted(
        "tests/controller/test_preemption.py::"
        "test_higher_priority_preempts_and_the_template_is_restored",
        "a workload's priority, which preempts",
    ),
    (K + "queue-name", "Label"): acted(TOY_KIND, "the job is queued in that LocalQueue"),
    (K + "retriable-in-group", "Annotation"): acted(
        GROUPS + "test_a_member_stays_in_its_group_and_unretriable",
        "a member marked unretriable stays so",
    ),
    (K + "role-hash", "Annotation"): acted(
        GROUPS + "test_the_webhook_stamps_a_members_role_hash_as_kueue_does",
        "written on a group's pods; each role is a podSet",
    ),
    (K + "safe-to-forcefully-delete", "Annotation"): acted(
        "tests/controller/test_failure_recovery.py::"
        "test_a_pod_stuck_terminating_on_an_unreachable_node_is_failed_and_deleted",
        "with FailureRecoveryPolicy on, a pod stuck terminating on an unreachable node is "
        "failed and deleted a minute on",
    ),
    (K + "stopping", "Annotation"): warned(WARNINGS + "test_kueues_own_marks_on_a_job_are_warned"),
    (K + "workload", "Annotation"): acted(
        "tests/unit/kube/test_kube_objects.py::"
        "test_a_placed_workloads_pods_name_it_and_may_go_to_the_extenders_scheduler",
        "written on the pods of a placed Workload",
    ),
    (K + "workload-slice-name", "Annotation"): acted(
        ELASTIC, "written on every slice of an elastic job: its first slice's name"
    ),
    (K + "workload-slice-replacement-for", "Annotation"): acted(
        ELASTIC, "a scale-up slice counts the quota of the slice it names, and replaces it"
    ),
    ("provreq.kueue.x-k8s.io/", "Annotation prefix"): acted(
        "tests/unit/core/admission/test_provisioning.py::"
        "test_annotations_override_the_configs_parameters",
        "passed to the ProvisioningRequest as parameters",
    ),
}


def documented() -> list[tuple[str, str]]:
    """(key, type) of every entry in Kueue's list, in its order."""
    return [(str(e["key"]), str(e["type"])) for e in yaml.safe_load(KEYS_FILE.read_text())]


@cache
def functions_of(path: str) -> frozenset[str]:
    tree = ast.parse((ROOT / path).read_text())
    return frozenset(
        n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    )


def test_every_documented_key_has_a_stand_and_no_stand_names_another():
    keys = documented()
    assert len(keys) == 45  # Kueue v0.19.2's list, two keys each a label and an annotation
    missing = [k for k in keys if k not in STANDS]
    assert missing == [], f"keys Kueue documents that Tower takes no stand on: {missing}"
    extra = [k for k in STANDS if k not in keys]
    assert extra == [], f"stands on keys Kueue does not document: {extra}"
    by = {s: sorted(k for k, v in STANDS.items() if v.stand == s) for s in (ACTED, WARNED)}
    neither = [k for k, v in STANDS.items() if v.stand not in (ACTED, WARNED)]
    print(f"\nacted on {len(by[ACTED])}, warned {len(by[WARNED])}, neither {len(neither)}")
    assert neither == []


@pytest.mark.parametrize(("key", "kind"), list(STANDS), ids=[f"{k} {t}" for k, t in STANDS])
def test_each_stand_names_a_test_that_exists_and_speaks_of_the_key(key, kind):
    stand = STANDS[(key, kind)]
    path, _, function = stand.test.partition("::")
    assert (ROOT / path).is_file(), f"{key}: {path} does not exist"
    assert function in functions_of(path), f"{key}: {stand.test} is not a test"
    # Tests spell a key whole, or build it from Kueue's prefix.
    spelled = stand.spelled or key.rstrip("/").split("/")[-1]
    where = stand.via or path
    assert spelled in (ROOT / where).read_text(), f"{key}: {where} never mentions it"
    if stand.via:
        assert Path(stand.via).name in (ROOT / path).read_text(), (
            f"{path} never applies {stand.via}"
        )


@pytest.mark.parametrize("key", sorted(k for (k, _), s in STANDS.items() if s.stand == WARNED))
def test_a_key_warned_at_admission_is_one_the_webhook_warns_about(key):
    assert key in {entry.key for entry in unread_keys.UNREAD}


# ----- the fields of Kueue's Configuration ----------------------------------------------------

FIELDS_FILE = ROOT / "tests" / "data" / "kueue-config" / "configuration-fields.txt"
CONFIG_FILE = "tests/unit/kube/test_config_file.py::"
EVERY_ACTED_FIELD = CONFIG_FILE + "test_every_acted_field_takes_effect"
PODS_READY = "tests/controller/test_pods_ready.py::"
MULTIKUEUE = "tests/controller/test_multikueue.py::"
CLUSTER_PROFILE = "tests/controller/test_multikueue_cluster_profile.py::"
SECTIONS = "tests/unit/kube/test_config_sections_reach_the_controller.py::"
METRICS_CONFIG = "tests/unit/kube/test_metrics_config.py::"
RETENTION = "tests/controller/test_object_retention.py::"
RESOURCE_POLICY = (
    "tests/controller/test_resource_policy.py::"
    "test_quota_counts_the_credits_each_cpu_costs_and_not_an_excluded_resource"
)

# The test that shows each acted-on field taking effect. A row `X.*` stands for X and every
# field below it that has no row of its own; a row `X` for X alone, so that a field below it
# taken out of UNACTED needs its own.
FIELD_TESTS: dict[str, str] = {
    "leaderElection.*": EVERY_ACTED_FIELD,
    "leaderElection.resourceLock": CONFIG_FILE + "test_a_bad_field_is_one_line_naming_it",
    "metrics": METRICS_CONFIG + "test_the_metrics_fields_and_gates_are_acted_on_without_a_warning",
    "metrics.bindAddress": CONFIG_FILE + "test_metrics_bind_address_is_the_metrics_servers_address",
    "metrics.customLabels.*": (
        METRICS_CONFIG + "test_custom_labels_with_their_gate_label_the_metrics_and_are_not_warned"
    ),
    "metrics.enableClusterQueueResources": (
        METRICS_CONFIG + "test_the_metrics_fields_and_gates_are_acted_on_without_a_warning"
    ),
    "metrics.localQueueMetrics.*": (
        METRICS_CONFIG + "test_the_metrics_fields_and_gates_are_acted_on_without_a_warning"
    ),
    "metrics.localQueueMetrics.enable": (
        METRICS_CONFIG
        + "test_a_local_queue_metrics_section_without_enable_turns_them_off_as_in_kueue"
    ),
    "manageJobsWithoutQueueName": "tests/webhook/test_cli.py::test_the_config_file_sets_what_no_flag_gave",
    "managedJobsNamespaceSelector": (
        "tests/controller/test_managed_namespaces.py::"
        "test_jobs_are_managed_in_the_selected_namespaces_only"
    ),
    "waitForPodsReady.*": PODS_READY + "test_the_configuration_file_turns_it_on",
    "waitForPodsReady.timeout": (
        PODS_READY + "test_a_job_never_ready_is_evicted_requeued_with_backoff_then_deactivated"
    ),
    "waitForPodsReady.blockAdmission": (
        PODS_READY + "test_block_admission_admits_the_next_job_once_the_first_is_ready"
    ),
    "waitForPodsReady.requeuingStrategy": (
        PODS_READY + "test_a_job_never_ready_is_evicted_requeued_with_backoff_then_deactivated"
    ),
    "waitForPodsReady.recoveryTimeout": (
        PODS_READY + "test_a_job_that_loses_readiness_is_evicted_after_the_recovery_timeout"
    ),
    "clientConnection.*": EVERY_ACTED_FIELD,
    "integrations": EVERY_ACTED_FIELD,
    "integrations.frameworks": EVERY_ACTED_FIELD,
    "integrations.labelKeysToCopy": (
        "tests/controller/test_label_keys_to_copy.py::"
        "test_a_jobs_workload_is_made_with_its_labels_of_the_keys_once"
    ),
    "multiKueue": SECTIONS + "test_every_multikueue_field_reaches_the_check_controller",
    "multiKueue.origin": SECTIONS + "test_every_multikueue_field_reaches_the_check_controller",
    "multiKueue.gcInterval": (
        MULTIKUEUE + "test_copies_whose_workload_is_gone_are_collected_every_gc_interval"
    ),
    "multiKueue.workerLostTimeout": (
        MULTIKUEUE + "test_a_lost_worker_is_inactive_and_its_workload_runs_elsewhere"
    ),
    "multiKueue.dispatcherName": MULTIKUEUE
    + "test_the_incremental_dispatcher_nominates_step_by_step",
    "multiKueue.incrementalDispatcherConfig.*": (
        MULTIKUEUE + "test_the_incremental_dispatcher_nominates_step_by_step"
    ),
    "multiKueue.clusterProfile": CLUSTER_PROFILE
    + "test_the_configurations_access_providers_reach_the_check_controller",
    "multiKueue.clusterProfile.*": CLUSTER_PROFILE
    + "test_the_configurations_access_providers_reach_the_check_controller",
    "fairSharing": EVERY_ACTED_FIELD,
    "admissionFairSharing.*": (
        "tests/controller/test_admission_fair_sharing.py::test_the_local_queue_that_used_less_goes_first"
    ),
    "admissionFairSharing.resourceWeights": (
        SECTIONS + "test_every_admission_fair_sharing_field_reaches_the_scheduler"
    ),
    "resources": RESOURCE_POLICY,
    "resources.excludeResourcePrefixes": RESOURCE_POLICY,
    "resources.transformations.*": RESOURCE_POLICY,
    "resources.deviceClassMappings.*": (
        "tests/controller/test_dra.py::"
        "test_kueues_dra_example_runs_eight_jobs_on_eight_gpus_and_the_ninth_waits"
    ),
    "resources.deviceClassMappings.sources.*": (
        "tests/unit/core/config/test_device_classes.py::"
        "test_counter_sources_are_refused_naming_what_tower_does_instead"
    ),
    "fairSharing.preemptionStrategies": (
        "tests/unit/core/scheduling/test_fair_preemption_policy.py::test_each_strategy_alone"
    ),
    "resources.quotaCheckStrategy": (
        "tests/unit/core/scheduling/test_quota_check_strategy.py::"
        "test_a_request_for_an_undeclared_resource"
    ),
    "objectRetentionPolicies.*": (
        RETENTION + "test_a_finished_workload_is_deleted_after_its_retention_and_its_job_stays"
    ),
    "objectRetentionPolicies.workloads.afterDeactivatedByKueue": (
        RETENTION + "test_the_job_of_a_workload_tower_deactivated_is_deleted_after_its_retention"
    ),
    "featureGates": "tests/unit/kube/test_feature_gates_config.py::test_gates_reach_the_controllers_settings",
    "visibilityServer.*": (
        CONFIG_FILE + "test_the_visibility_server_section_is_where_the_visibility_api_listens"
    ),
}

# A value for each field the warned walk sets (one a field; a list's item is built whole).
SAMPLE: dict[str, Any] = {
    "namespace": "team-system",
    "webhook.port": 9443,
    "webhook.host": "0.0.0.0",
    "webhook.certDir": "/certs",
    "metrics.customLabels.name": "team",
    "metrics.customLabels.sourceLabelKey": "team",
    "metrics.customLabels.sourceAnnotationKey": "team",
    "metrics.customLabels.sourceKind": "LocalQueue",  # a Workload's needs trackedValues
    "metrics.customLabels.trackedValues": ["a"],
    "health.healthProbeBindAddress": ":8081",
    "health.readinessEndpointName": "readyz",
    "health.livenessEndpointName": "healthz",
    "pprofBindAddress": ":8083",
    "controller.groupKindConcurrency": {"Job.batch": 5},
    "controller.cacheSyncTimeout": 120_000_000_000,
    "tls.minVersion": "VersionTLS12",
    "tls.cipherSuites": ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"],
    "tls.curvePreferences": [23],
    "internalCertManagement.enable": False,
    "internalCertManagement.webhookServiceName": "svc",
    "internalCertManagement.webhookSecretName": "sec",
    "integrations.externalFrameworks": ["Foo.v1.example.com"],
    "multiKueue.externalFrameworks.name": "Foo.v1.example.com",
    "multiKueue.clusterProfile.accessProviders.name": "secretreader",
    "multiKueue.clusterProfile.accessProviders.execConfig": {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": "/bin/secretreader",
    },
    "multiKueue.clusterProfile.credentialsProviders": [
        {
            "name": "secretreader",
            "execConfig": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": "/bin/secretreader",
            },
        }
    ],
    "fairSharing.preemptionStrategies": ["LessThanInitialShare"],
    "resources.quotaCheckStrategy": "IgnoreUndeclared",
    "resources.deviceClassMappings.name": "example.com/gpu",
    "resources.deviceClassMappings.deviceClassNames": ["gpu.example.com"],
    "resources.deviceClassMappings.sources.counter.name": "memory",
    "resources.deviceClassMappings.sources.counter.driver": "gpu.example.com",
    "resources.deviceClassMappings.sources.counter.deviceSelector": {"cel": {"expression": "true"}},
    "resources.deviceClassMappings.sources.capacity.name": "memory",
    "resources.deviceClassMappings.sources.capacity.driver": "gpu.example.com",
    "resources.deviceClassMappings.sources.capacity.deviceSelector": {
        "cel": {"expression": "true"}
    },
    "objectRetentionPolicies.workloads.afterFinished": "1h",
    "objectRetentionPolicies.workloads.afterDeactivatedByKueue": "1h",
}
# Lists of objects: the walk sets one item, whole where Kueue requires more of it.
ITEMS: dict[str, dict[str, Any]] = {
    "metrics.customLabels": {"name": "team"},
    "multiKueue.externalFrameworks": {"name": "Foo.v1.example.com"},
    "multiKueue.clusterProfile.accessProviders": {},
    "resources.transformations": {},
    "resources.deviceClassMappings": {
        "name": "example.com/gpu",
        "deviceClassNames": ["gpu.example.com"],
    },
    "resources.deviceClassMappings.sources": {},
}


def kueue_fields() -> list[str]:
    return FIELDS_FILE.read_text().split()


def warned_by(path: str) -> Unacted | None:
    """The UNACTED entry a field is under (itself or a field above it), if any."""
    for entry in config_fields.UNACTED:
        if path == entry.path or path.startswith(entry.path + "."):
            return entry
    return None


def acted_by(path: str) -> str | None:
    """The test FIELD_TESTS names for a field: its own row, or the nearest `X.*` above it."""
    if path in FIELD_TESTS:
        return FIELD_TESTS[path]
    parts = path.split(".")
    for n in range(len(parts), 0, -1):
        test = FIELD_TESTS.get(".".join(parts[:n]) + ".*")
        if test is not None:
            return test
    return None


def setting(path: str) -> dict[str, Any]:
    """A Configuration that sets the field (through its first sampled field below it)."""
    fields = kueue_fields()
    leaf = next(f for f in fields if (f == path or f.startswith(path + ".")) and f in SAMPLE)
    doc: dict[str, Any] = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
    node, parts = doc, leaf.split(".")
    for n, part in enumerate(parts, 1):
        here = ".".join(parts[:n])
        if n == len(parts):
            node[part] = SAMPLE[leaf]
        elif here in ITEMS:
            item = dict(ITEMS[here])
            node[part] = [item]
            node = item
        else:
            node = node.setdefault(part, {})
    return doc


def test_every_configuration_field_is_acted_on_or_warned():
    fields = kueue_fields()
    assert len(fields) == 107  # Kueue v0.19.2's Configuration, every field at every depth
    assert len(set(fields)) == len(fields)
    stale = sorted({row.removesuffix(".*") for row in FIELD_TESTS} - set(fields))
    assert stale == [], f"rows for fields Kueue's Configuration does not have: {stale}"
    acted, warned, neither = [], [], []
    for path in fields:
        if warned_by(path) is not None:
            warned.append(path)
        elif acted_by(path) is not None:
            acted.append(path)
        else:
            neither.append(path)
    print(
        f"\nConfiguration fields: acted on {len(acted)}, warned {len(warned)}, neither {len(neither)}"
    )
    assert neither == [], (
        f"fields neither warned (fields.py UNACTED) nor named with their test (FIELD_TESTS): "
        f"{neither}"
    )


@pytest.mark.parametrize("path", [p for p in kueue_fields() if warned_by(p) is None])
def test_an_acted_fields_test_exists(path):
    test = acted_by(path)
    assert test is not None, f"{path}: acted on, but no test named in FIELD_TESTS"
    file, _, function = test.partition("::")
    assert (ROOT / file).is_file(), f"{path}: {file} does not exist"
    assert function in functions_of(file), f"{path}: {test} is not a test"


@pytest.mark.parametrize("path", [p for p in kueue_fields() if warned_by(p) is not None])
def test_a_configuration_setting_a_warned_field_says_so(path):
    entry = warned_by(path)
    assert entry is not None
    said = parse(setting(path)).warnings("kueue.yaml")
    assert any(line.startswith(f"Configuration kueue.yaml: {entry.path} (") for line in said), (
        f"{path} set, and no warning about {entry.path}: {said}"
    )


# ----- Kueue's feature gates ------------------------------------------------------------------

GATES_FILE = ROOT / "tests" / "data" / "kueue-features" / "kube_features.go"
REFUSED_AT_START = (
    "tests/controller/test_runtime_feature_gates.py::"
    "test_a_gate_that_cannot_be_stops_the_start_in_one_line"
)
NODE_FAILURE = "tests/controller/test_node_failure.py::"
TAS_CHECK = "tests/unit/core/tas/test_tas_check.py::"
PODS = "tests/controller/test_pods.py::"

# The test that shows Tower doing what each gate it acts on turns on (an implemented gate, or
# one Tower follows at Kueue's default `true`).
GATE_TESTS: dict[str, str] = {
    "WorkloadIdentifierAnnotations": (
        "tests/unit/core/jobframework/test_workload_identifiers.py::"
        "test_a_statefulsets_pod_is_told_its_group_where_the_gate_says"
    ),
    "MultiKueueManagerQuotaAutomation": (
        "tests/controller/test_multikueue_quota.py::"
        "test_the_managers_quota_is_the_sum_of_its_workers"
    ),
    "MultiKueueOrchestratedPreemption": (
        "tests/controller/test_multikueue_orchestrated_preemption.py::"
        "test_a_high_priority_job_preempts_on_one_worker_only"
    ),
    "ConcurrentAdmission": (
        "tests/controller/test_concurrent_admission.py::"
        "test_the_job_migrates_to_the_preferred_flavor_once_it_has_room"
    ),
    "FailureRecoveryPolicy": (
        "tests/controller/test_failure_recovery.py::"
        "test_a_pod_stuck_terminating_on_an_unreachable_node_is_failed_and_deleted"
    ),
    "CustomMetricLabels": (
        "tests/controller/test_custom_metric_labels.py::"
        "test_the_configuration_file_adds_the_entries_keys_only_with_the_gate"
    ),
    "PartialAdmission": JOB_PARALLELISM,
    "SparkApplicationIntegration": (
        "tests/controller/test_spark.py::"
        "test_the_integration_without_its_feature_gate_is_refused_at_start"
    ),
    "ElasticJobsViaWorkloadSlices": (
        "tests/controller/test_elastic.py::test_with_the_gate_off_a_resized_elastic_job_is_queued_again"
    ),
    "KueueDRAIntegration": (
        "tests/controller/test_dra.py::test_with_the_integration_off_claims_are_not_counted"
    ),
    "KueueDRARejectWorkloadsWhenDRADisabled": (
        "tests/unit/core/jobframework/test_dra.py::"
        "test_with_the_integration_off_claims_are_refused_or_ignored"
    ),
    "FlavorFungibility": "tests/unit/core/scheduling/test_cycle.py::test_fungibility_when_can_borrow",
    "FlavorFungibilityPreserveScanProgress": (
        "tests/unit/core/scheduling/test_scan_progress.py::"
        "test_schedule_for_preserve_flavor_scan_progress"
    ),
    "VisibilityOnDemand": (
        "tests/controller/test_visibility_served.py::"
        "test_the_running_controller_answers_kueues_pending_workloads_to_whom_may_see_them"
    ),
    "DisableWaitForPodsReady": (
        "tests/unit/kube/test_feature_gates_config.py::"
        "test_disable_wait_for_pods_ready_turns_the_files_wait_for_pods_ready_off"
    ),
    "FairSharingPreemptWithinNominal": (
        "tests/unit/core/scheduling/test_fair_preemption_policy.py::"
        "test_within_nominal_of_one_flavor_outweighs_a_high_share"
    ),
    "QuotaCheckStrategy": "tests/unit/kube/test_config_scheduling.py::test_the_scheduler_is_told",
    "PrioritySortingWithinCohort": (
        "tests/conformance/test_schedule.py::"
        "test_workload_requiring_reclaimation_prioritized_over_wl_in_another_full_cq"
    ),
    "MultiKueue": MULTIKUEUE + "test_a_job_runs_on_the_worker_that_admits_it",
    "TopologyAwareScheduling": TOPOLOGY
    + "test_kueues_required_example_is_placed_in_one_rack_and_its_pods_pinned",
    "LocalQueueMetrics": METRICS_CONFIG + "test_the_flag_turns_a_metrics_gate_the_file_left_on_off",
    "TASProfileMixed": "tests/conformance/test_tas_cache_more.py::test_kueue_sorted_domains",
    "HierarchicalCohorts": (
        "tests/conformance/test_schedule.py::"
        "test_hierarchical_cohort_allows_borrowing_up_to_lending_limit"
    ),
    "AdmissionFairSharing": (
        "tests/controller/test_admission_fair_sharing.py::test_the_local_queue_that_used_less_goes_first"
    ),
    "TASFailedNodeReplacement": TOPOLOGY
    + "test_a_failed_host_is_replaced_within_the_rack_then_the_workload_evicted",
    "TASFailedNodeReplacementFailFast": TAS_CHECK
    + "test_a_failed_host_is_replaced_within_the_rack_or_the_workload_evicted",
    "TASReplaceNodeOnPodTermination": NODE_FAILURE
    + "test_a_notready_node_whose_pods_still_run_moves_nothing_past_the_old_45s",
    "SkipReassignmentForPodOwnedWorkloads": (
        "tests/unit/core/tas/test_node_failure.py::"
        "test_a_host_is_judged_as_kueues_node_controller_judges_it"
    ),
    "TASReplaceNodeDueToNotReadyOverFixedTime": NODE_FAILURE
    + "test_the_fixed_time_gate_moves_a_notready_nodes_pods_after_30s",
    "ManagedJobsNamespaceSelectorAlwaysRespected": FIELD_TESTS["managedJobsNamespaceSelector"],
    "PropagateBatchJobLabelsToWorkload": (
        "tests/unit/kube/test_kube_objects.py::test_workload_is_owned_by_its_job_and_keeps_the_template"
    ),
    "SkipFinalizersForPodsSuspendedByParent": PODS
    + "test_a_deployments_pods_are_queued_one_by_one",
    "MultiKueueWaitForWorkloadAdmitted": MULTIKUEUE
    + "test_a_job_runs_on_the_worker_that_admits_it",
    "MultiKueueRedoAdmissionOnEvictionInWorker": (
        MULTIKUEUE + "test_a_copy_evicted_on_its_worker_sends_the_workload_back"
    ),
    "TASReplaceNodeOnNodeTaints": (
        "tests/unit/core/tas/test_node_failure.py::"
        "test_taints_are_classified_over_every_podset_placed_there"
    ),
    "AssignQueueLabelsForPods": TOY_KIND,
    "SchedulingEquivalenceHashing": (
        "tests/unit/core/scheduling/test_queues.py::"
        "test_a_workload_s_class_head_is_the_first_of_its_equivalence_class"
    ),
    "AdmissionGatedBy": STANDS[(K + "admission-gated-by", "Annotation")].test,
    "FinishOrphanedWorkloads": (
        "tests/controller/test_faults.py::test_a_job_deleted_with_orphan_propagation_frees_its_quota_at_once"
    ),
    "MultiKueueClusterProfile": CLUSTER_PROFILE
    + "test_a_profile_worker_is_reached_through_the_configured_plugin",
    "MultiKueueIncrementalDispatcherConfig": (
        MULTIKUEUE + "test_the_incremental_dispatcher_nominates_step_by_step"
    ),
    "MultiKueueIncrementalDispatcherRespectConfigOrder": (
        MULTIKUEUE + "test_the_incremental_dispatcher_nominates_step_by_step"
    ),
    "MetricForWorkloadCreationLatency": (
        "tests/unit/kube/test_metrics.py::test_the_gates_take_families_out_as_kueue_registers_them"
    ),
    "MetricsForCohorts": (
        "tests/unit/kube/test_metrics.py::test_the_gates_take_families_out_as_kueue_registers_them"
    ),
    "CleanupProvisioningRequestsOnEviction": (
        "tests/controller/test_provisioning.py::"
        "test_a_failed_request_is_retried_then_rejected_past_the_limit"
    ),
    "TASHandleOverlappingFlavors": "tests/conformance/test_tas_cache_more.py::test_kueue_sorted_domains",
    "TASRecomputeAssignmentWithinSchedulingCycle": (
        TAS_CHECK + "test_a_higher_priority_workload_preempts_to_get_a_rack"
    ),
    "LWSImmutableGroupSize": GROUPS + "test_a_leaderworkersets_groups_keep_their_shape",
    "SkipAncestorCheckForDeletedWorkloads": (
        "tests/unit/kube/test_reconcilers.py::test_a_workload_whose_job_is_gone_is_deleted"
    ),
    "ObjectRetentionPolicies": FIELD_TESTS["objectRetentionPolicies.*"],
    "ReclaimablePods": (
        "tests/controller/test_reclaimable_pods.py::"
        "test_finished_pods_give_their_quota_to_a_waiting_job"
    ),
    "WorkloadPriorityClassDefaulting": (
        "tests/controller/test_priority_class_defaulting.py::"
        "test_a_job_without_a_class_is_given_the_default_and_its_priority"
    ),
    "PodIntegrationValidateGroupOwner": GROUPS
    + "test_a_member_belongs_to_its_group_by_its_role_and_the_annotation_wins",
}


def kueue_gate_names() -> list[str]:
    text = GATES_FILE.read_text()
    return re.findall(r'^\t\w+ featuregate\.Feature = "(\w+)"', text, re.M)


def gate_stand(gate: FeatureGate) -> str:
    """acted (Tower does what the gate asks, at Kueue's default or either way), refused (asked
    on, Tower says it cannot), or internal (either value, nothing a user sees)."""
    if gate.stand is GateStand.INTERNAL:
        return "internal"
    if gate.stand is GateStand.IMPLEMENTED or (gate.stand is GateStand.ALWAYS and gate.default):
        return ACTED
    return "refused"


def refusal(name: str, value: bool) -> str | None:
    """resolve's one line for asking the gate `value`, or None when it is taken."""
    try:
        resolve({name: value})
    except ConfigError as err:
        return str(err)
    return None


def test_every_feature_gate_is_acted_on_or_refused_when_asked():
    names = kueue_gate_names()
    assert len(names) > 80  # the parse found Kueue's const block
    missing = [n for n in names if n not in BY_NAME]
    assert missing == [], f"gates of Kueue's missing from feature_gates.py: {missing}"
    by: dict[str, list[str]] = {"acted": [], "refused": [], "internal": []}
    for name in names:
        by[gate_stand(BY_NAME[name])].append(name)
    unnamed = [n for n in by[ACTED] if n not in GATE_TESTS]
    on_by_default = [n for n in by["refused"] if BY_NAME[n].default]
    print(
        f"\nfeature gates: acted on {len(by[ACTED])}, refused when asked on "
        f"{len(by['refused'])} (of them on by default in Kueue: {len(on_by_default)}, "
        f"{', '.join(on_by_default)}), internal {len(by['internal'])}, neither {len(unnamed)}"
    )
    assert unnamed == [], f"gates Tower acts on with no test named in GATE_TESTS: {unnamed}"
    stale = sorted(set(GATE_TESTS) - set(by[ACTED]))
    assert stale == [], f"GATE_TESTS rows for gates Tower does not act on: {stale}"


@pytest.mark.parametrize("name", sorted(GATE_TESTS))
def test_an_acted_gates_test_exists_and_asking_it_away_is_refused(name):
    file, _, function = GATE_TESTS[name].partition("::")
    assert (ROOT / file).is_file(), f"{name}: {file} does not exist"
    assert function in functions_of(file), f"{name}: {GATE_TESTS[name]} is not a test"
    gate = BY_NAME[name]
    if gate.stand is GateStand.ALWAYS:  # Tower cannot do otherwise: asking it is one line
        said = refusal(name, not gate.default)
        assert said is not None, f"{name}={not gate.default} is taken"
        assert name in said, said


@pytest.mark.parametrize(
    "name", [n for n in kueue_gate_names() if gate_stand(BY_NAME[n]) == "refused"]
)
def test_a_gate_tower_cannot_turn_on_is_refused_in_one_line(name):
    said = refusal(name, True)
    assert said is not None, f"{name}=true is taken, and Tower does not do it"
    assert name in said, said
    assert "\n" not in said, said
    path, _, function = REFUSED_AT_START.partition("::")
    assert function in functions_of(path)  # where such a line stops the start, exit 2


@pytest.mark.parametrize(
    "name", [n for n in kueue_gate_names() if gate_stand(BY_NAME[n]) == "internal"]
)
def test_an_internal_gate_is_taken_either_way(name):
    assert (refusal(name, True), refusal(name, False)) == (None, None)
