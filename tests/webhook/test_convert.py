"""ConversionReview v1beta1 <-> v1beta2, in the envelope kube-apiserver sends (fixtures/conversion)."""

import copy

import pytest

from tests.fixtures import load
from webhook.convert import convert, convert_object
from webhook.reviews import ReviewError


def envelope(objects, desired):
    """A real captured ConversionReview with its objects replaced by ours."""
    review = copy.deepcopy(
        load("conversion/03-conversionreview.create-at-v1beta1-to-storage-v1beta2.json")["request"][
            "body"
        ]
    )
    review["request"]["desiredAPIVersion"] = desired
    review["request"]["objects"] = objects
    return review


CQ_V1BETA1 = {
    "apiVersion": "kueue.x-k8s.io/v1beta1",
    "kind": "ClusterQueue",
    "metadata": {"name": "cq", "uid": "1", "generation": 1},
    "spec": {
        "cohort": "team",
        "admissionChecks": ["prov"],
        "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "4"}]}],
            }
        ],
    },
    "status": {"pendingWorkloads": 1, "pendingWorkloadsStatus": {"lastChangeTime": "x"}},
}


def test_cluster_queue_up_to_v1beta2():
    review = envelope([CQ_V1BETA1], "kueue.x-k8s.io/v1beta2")
    answer = convert(review)
    assert answer["kind"] == "ConversionReview"
    assert answer["response"]["uid"] == review["request"]["uid"]
    assert answer["response"]["result"] == {"status": "Success"}
    [cq] = answer["response"]["convertedObjects"]
    assert cq["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert cq["spec"]["cohortName"] == "team"
    assert "cohort" not in cq["spec"]
    assert cq["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "prov"}]}
    assert cq["spec"]["flavorFungibility"] == {
        "whenCanBorrow": "MayStopSearch",
        "whenCanPreempt": "MayStopSearch",
    }
    assert cq["status"] == {"pendingWorkloads": 1}
    assert cq["metadata"] == CQ_V1BETA1["metadata"]


def test_cluster_queue_round_trip_keeps_the_cohort():
    up = convert_object(CQ_V1BETA1, "kueue.x-k8s.io/v1beta2")
    down = convert_object(up, "kueue.x-k8s.io/v1beta1")
    assert down["spec"]["cohort"] == "team"
    assert convert_object(down, "kueue.x-k8s.io/v1beta2") == up


@pytest.mark.parametrize(
    ("v1beta1_spec", "v1beta2_ref"),
    [
        (
            {
                "priorityClassName": "high",
                "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass",
            },
            {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"},
        ),
        (
            {
                "priorityClassName": "batch",
                "priorityClassSource": "scheduling.k8s.io/priorityclass",
            },
            {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "batch"},
        ),
    ],
    ids=["WorkloadPriorityClass", "PriorityClass"],
)
def test_workload_priority_class_reference(v1beta1_spec, v1beta2_ref):
    old = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {"queueName": "q", "priority": 5, **v1beta1_spec},
        "status": {"accumulatedPastExexcutionTimeSeconds": 7},
    }
    new = convert_object(old, "kueue.x-k8s.io/v1beta2")
    assert new["spec"]["priorityClassRef"] == v1beta2_ref
    assert new["status"] == {"accumulatedPastExecutionTimeSeconds": 7}
    assert convert_object(new, "kueue.x-k8s.io/v1beta1") == old


def test_local_queue_flavor_usage_is_renamed():
    old = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "LocalQueue",
        "metadata": {"name": "q", "namespace": "default"},
        "spec": {"clusterQueue": "cq"},
        "status": {"flavorUsage": [{"name": "f", "resources": []}]},
    }
    new = convert_object(old, "kueue.x-k8s.io/v1beta2")
    assert new["status"] == {"flavorsUsage": [{"name": "f", "resources": []}]}


def test_objects_of_other_groups_fail_in_the_result_not_with_http_errors():
    review = copy.deepcopy(
        load("conversion/03-conversionreview.create-at-v1beta1-to-storage-v1beta2.json")["request"][
            "body"
        ]
    )
    answer = convert(review)  # Widgets of example.com are not ours to convert
    assert answer["response"]["result"]["status"] == "Failure"
    assert (
        "cannot convert Widget from 'example.com/v1beta1'"
        in answer["response"]["result"]["message"]
    )


def test_not_a_conversion_review():
    with pytest.raises(ReviewError):
        convert({"kind": "AdmissionReview"})


def test_a_local_queues_fair_sharing_status_survives_a_read_at_v1beta1():
    """Kueue v0.19.2 serves status.fairSharing at both versions; reading at v1beta1 and
    writing back must not lose it."""
    new = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "q", "namespace": "default"},
        "spec": {"clusterQueue": "cq"},
        "status": {"fairSharing": {"weightedShare": 3}, "flavorsUsage": []},
    }
    old = convert_object(new, "kueue.x-k8s.io/v1beta1")
    assert old["status"] == {"fairSharing": {"weightedShare": 3}, "flavorUsage": []}
    assert convert_object(old, "kueue.x-k8s.io/v1beta2") == new


def test_a_topology_assignment_is_listed_at_v1beta1_and_compacted_at_v1beta2():
    assignment_v1beta2 = {
        "levels": ["kubernetes.io/hostname"],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [{"individual": {"prefix": "node-", "roots": ["1", "2"]}}],
                "podCounts": {"individual": [3, 1]},
            }
        ],
    }
    new = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {
            "queueName": "q",
            "podSets": [
                {
                    "name": "main",
                    "count": 4,
                    "topologyRequest": {
                        "required": "rack",
                        "podsetSliceRequiredTopologyConstraints": [{"topology": "rack", "size": 2}],
                    },
                }
            ],
        },
        "status": {
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [{"name": "main", "topologyAssignment": assignment_v1beta2}],
            }
        },
    }
    old = convert_object(new, "kueue.x-k8s.io/v1beta1")
    psa = old["status"]["admission"]["podSetAssignments"][0]
    assert psa["topologyAssignment"] == {
        "levels": ["kubernetes.io/hostname"],
        "domains": [{"values": ["node-1"], "count": 3}, {"values": ["node-2"], "count": 1}],
    }
    # v1beta1 has no multi-layer slices: dropped, as Kueue's conversion drops them.
    assert old["spec"]["podSets"][0]["topologyRequest"] == {"required": "rack"}
    back = convert_object(old, "kueue.x-k8s.io/v1beta2")
    assert back["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] == (
        assignment_v1beta2
    )


def test_a_multikueue_clusters_kubeconfig_moves_under_cluster_source():
    """Kueue's v1beta1 setup guide names the worker's Secret at spec.kubeConfig; v1beta2
    keeps it under spec.clusterSource, and a read at v1beta1 puts it back."""
    old = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "MultiKueueCluster",
        "metadata": {"name": "multikueue-test-worker1"},
        "spec": {"kubeConfig": {"locationType": "Secret", "location": "worker1-secret"}},
        "status": {"conditions": []},
    }
    answer = convert(envelope([old], "kueue.x-k8s.io/v1beta2"))
    [new] = answer["response"]["convertedObjects"]
    assert new["spec"] == {
        "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "worker1-secret"}}
    }
    assert convert_object(new, "kueue.x-k8s.io/v1beta1") == old
