"""Kueue's fields that Tower does not act on: accepted, never silently ignored."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender.core.api import parse
from extender.core.api.models import QUEUE_NAME_LABEL, LocalQueue
from extender.core.api.unacted import UNACTED, blocking, used
from extender.core.jobframework.jobs import workload_for
from extender.core.jobframework.workloads import workload as parse_workload
from extender.core.scheduling.cycle import ClusterState
from webhook.mutate import mutate
from webhook.settings import Settings
from webhook.validate import validate_kueue

CQ: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {"name": "team"},
    "spec": {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 4}]}],
            }
        ],
    },
}
FLAVOR: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ResourceFlavor",
    "metadata": {"name": "default"},
    "spec": {},
}
WORKLOAD: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Workload",
    "metadata": {"name": "job", "namespace": "default", "uid": "u1"},
    "spec": {
        "queueName": "lq",
        "podSets": [
            {
                "name": "main",
                "count": 1,
                "template": {
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                },
            }
        ],
    },
}


def with_spec(obj: dict[str, Any], **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["spec"].update(spec)
    return out


def with_pod_set(obj: dict[str, Any], **fields: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["spec"]["podSets"][0].update(fields)
    return out


CASES = [
    ("no such field", "ClusterQueue", CQ, ()),
    (
        "admission checks are acted on",
        "ClusterQueue",
        with_spec(CQ, admissionChecksStrategy={"admissionChecks": [{"name": "prov"}]}),
        (),
    ),
    (
        "concurrent admission",
        "ClusterQueue",
        with_spec(CQ, concurrentAdmissionPolicy={"migration": {"mode": "TryPreferredFlavors"}}),
        ("spec.concurrentAdmissionPolicy",),
    ),
    (
        "usage-based admission fair sharing is acted on",
        "ClusterQueue",
        with_spec(CQ, admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"}),
        (),
    ),
    (
        "admission fair sharing switched off says what Tower does",
        "ClusterQueue",
        with_spec(CQ, admissionScope={"admissionMode": "NoAdmissionFairSharing"}),
        (),
    ),
    ("an empty list sets nothing", "ClusterQueue", with_spec(CQ, admissionChecks=[]), ()),
    (
        "a required topology is acted on",
        "Workload",
        with_pod_set(WORKLOAD, topologyRequest={"required": "cloud.com/rack"}),
        (),
    ),
    (
        "index labels alone constrain nothing",
        "Workload",
        with_pod_set(WORKLOAD, topologyRequest={"podIndexLabel": "idx", "unconstrained": True}),
        (),
    ),
    (
        "preemption gates",
        "Workload",
        with_spec(WORKLOAD, preemptionGates=[{"name": "example.com/gate"}]),
        ("spec.preemptionGates",),
    ),
    (
        "maximum execution time is acted on (extender/kube/controller/exec_time.py)",
        "Workload",
        with_spec(WORKLOAD, maximumExecutionTimeSeconds=600),
        (),
    ),
    (
        "a LocalQueue's fairSharing is a hint",
        "LocalQueue",
        {"spec": {"clusterQueue": "team", "fairSharing": {"weight": 2}}},
        (),
    ),
]


@pytest.mark.parametrize(("case", "kind", "obj", "expected"), CASES, ids=[c[0] for c in CASES])
def test_which_fields_stop_admission(
    case: str, kind: str, obj: dict[str, Any], expected: tuple[str, ...]
) -> None:
    assert blocking(kind, obj) == expected


def test_a_local_queues_fair_sharing_weight_is_acted_on() -> None:
    lq = {"spec": {"clusterQueue": "team", "fairSharing": {"weight": 2}}}
    assert used("LocalQueue", lq) == ()


def test_every_message_fits_a_kubernetes_warning() -> None:
    # kube-apiserver may truncate a warning longer than 256 characters.
    for field in UNACTED:
        assert len(field.message("x" * 40)) <= 256, field.path


def state(
    cq: dict[str, Any], flavor: dict[str, Any] = FLAVOR, topology: dict[str, Any] | None = None
) -> ClusterState:
    s = ClusterState()
    s.configure(
        flavors=[parse.resource_flavor(flavor)],
        cluster_queues=[parse.cluster_queue(cq)],
        cohorts=[],
        local_queues=[LocalQueue("default", "lq", "team")],
        topologies=[parse.topology(topology)] if topology else [],
    )
    return s


def run(s: ClusterState, wl: dict[str, Any]) -> None:
    s.add_workload(parse_workload(wl))
    for _ in range(5):
        if not s.schedule(0.0).progressed:
            return


def test_a_cluster_queue_whose_admission_check_is_missing_is_inactive_as_in_kueue() -> None:
    s = state(with_spec(CQ, admissionChecksStrategy={"admissionChecks": [{"name": "prov"}]}))
    run(s, WORKLOAD)
    assert not s.is_admitted("default/job")
    active, reason, message = s.cluster_queue_active("team")
    assert (active, reason) == (False, "AdmissionCheckNotFound")
    assert message == "Can't admit new workloads: references missing AdmissionCheck(s): prov."
    assert "references missing AdmissionCheck(s): prov" in s.pending_status("default/job").message


def test_removing_the_field_lets_the_queue_admit() -> None:
    s = state(
        with_spec(CQ, concurrentAdmissionPolicy={"migration": {"mode": "TryPreferredFlavors"}})
    )
    run(s, WORKLOAD)
    assert s.cluster_queue_active("team")[:2] == (False, "UnsupportedField")
    s.configure(
        flavors=[parse.resource_flavor(FLAVOR)],
        cluster_queues=[parse.cluster_queue(CQ)],
        cohorts=[],
        local_queues=[LocalQueue("default", "lq", "team")],
    )
    for _ in range(3):
        s.schedule(0.0)
    assert s.is_admitted("default/job")
    assert s.cluster_queue_active("team")[:2] == (True, "Ready")


def test_a_flavor_naming_a_missing_topology_makes_its_queues_inactive_as_kueue() -> None:
    tas = with_spec(FLAVOR, nodeLabels={"gpu": "a100"}, topologyName="default-topology")
    s = state(CQ, tas)
    run(s, WORKLOAD)
    assert s.cluster_queue_active("team") == (
        False,
        "TopologyNotFound",
        'Can\'t admit new workloads: there is no Topology "default-topology" for TAS flavor '
        '"default".',
    )
    topology = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
                "metadata": {"name": "default-topology"},
                "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}}  # fmt: skip
    assert state(CQ, tas, topology).cluster_queue_active("team")[:2] == (True, "Ready")


def test_a_workload_with_preemption_gates_waits_and_says_why() -> None:
    s = state(CQ)
    run(s, with_spec(WORKLOAD, preemptionGates=[{"name": "example.com/gate"}]))
    assert not s.is_admitted("default/job")
    message = s.pending_status("default/job").message
    assert "spec.preemptionGates" in message
    assert "Tower does not act on" in message


def review(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return {
        "uid": "1",
        "operation": "CREATE",
        "kind": {"group": "kueue.x-k8s.io", "kind": kind},
        "object": obj,
    }


def test_the_webhook_accepts_the_field_and_warns() -> None:
    cq = with_spec(CQ, concurrentAdmissionPolicy={"migration": {"mode": "TryPreferredFlavors"}})
    answer = validate_kueue(review(cq, "ClusterQueue"), "ClusterQueue")
    assert answer["allowed"] is True
    assert answer["warnings"] == [
        "ClusterQueue team: spec.concurrentAdmissionPolicy (concurrent admission for flavor "
        "migration) is not acted on by Tower without the ConcurrentAdmission feature gate; the "
        "ClusterQueue admits nothing while it is set"
    ]
    with_gate = validate_kueue(
        review(cq, "ClusterQueue"), "ClusterQueue", {"ConcurrentAdmission": True}
    )
    assert with_gate["allowed"] is True
    assert "warnings" not in with_gate, with_gate  # acted on: nothing to say
    plain = validate_kueue(review(CQ, "ClusterQueue"), "ClusterQueue")
    assert "warnings" not in plain
    lq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
          "metadata": {"name": "lq", "namespace": "default"},
          "spec": {"clusterQueue": "team", "fairSharing": {"weight": 2}}}  # fmt: skip
    assert "warnings" not in validate_kueue(review(lq, "LocalQueue"), "LocalQueue")


def test_min_count_is_acted_on_so_not_warned_about() -> None:
    wl = with_pod_set(WORKLOAD, count=4, minCount=2)
    assert used("Workload", wl) == ()
    answer = validate_kueue(review(wl, "Workload"), "Workload")
    assert answer["allowed"] is True
    assert "warnings" not in answer


JOB: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "train", "namespace": "default", "labels": {QUEUE_NAME_LABEL: "lq"}},
    "spec": {
        "template": {
            "metadata": {
                "annotations": {"kueue.x-k8s.io/podset-required-topology": "cloud.com/rack"}
            },
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        }
    },
}


def test_a_job_asking_for_a_topology_is_not_warned_and_its_workload_asks_for_it() -> None:
    assert blocking("Job", JOB) == ()
    workload = workload_for(JOB, uid="u", creation_time=0.0)
    assert workload.unacted == ()
    request = workload.pod_sets[0].topology
    assert request is not None
    assert (request.mode, request.level, request.pod_index_label) == (
        "required",
        "cloud.com/rack",
        "batch.kubernetes.io/job-completion-index",
    )
    review = {"uid": "1", "operation": "CREATE", "namespace": "default",
              "kind": {"group": "batch", "kind": "Job"}, "object": JOB}  # fmt: skip
    answer = mutate(review, Settings(), ("batch", "Job"))
    assert answer["allowed"] is True
    assert "warnings" not in answer
