"""Every label and annotation key Kueue v0.19.2 documents is acted on by Tower or warned about.

The keys are Kueue's own list (tests/data/kueue-keys/, see its SOURCE). Each has one row here:
`acted`, naming the test that shows Tower reading or writing it, or `warned`, naming the test
that asserts the line a user is told. The walk checks that every named test exists and that
its module speaks of the key, so a row cannot point at nothing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
import yaml

from extender.core.api import unread_keys

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
    (K + "elastic-job", "Annotation"): warned(
        WARNINGS + "test_an_elastic_job_is_told_it_is_not_elastic"
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
    (K + "pod-index-offset", "Annotation"): warned(
        WARNINGS + "test_kueues_own_marks_on_a_job_are_warned"
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
    (K + "safe-to-forcefully-delete", "Annotation"): warned(
        WARNINGS + "test_a_pod_opting_in_to_forced_deletion_is_told_there_is_none"
    ),
    (K + "stopping", "Annotation"): warned(WARNINGS + "test_kueues_own_marks_on_a_job_are_warned"),
    (K + "workload", "Annotation"): acted(
        "tests/unit/kube/test_kube_objects.py::"
        "test_a_placed_workloads_pods_name_it_and_may_go_to_the_extenders_scheduler",
        "written on the pods of a placed Workload",
    ),
    (K + "workload-slice-name", "Annotation"): warned(
        WARNINGS + "test_a_workloads_unread_key_is_warned"
    ),
    (K + "workload-slice-replacement-for", "Annotation"): warned(
        WARNINGS + "test_a_workloads_unread_key_is_warned"
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
