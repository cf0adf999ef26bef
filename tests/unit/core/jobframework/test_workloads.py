import pytest

from extender.core.api.parse import ManifestError
from extender.core.jobframework.workloads import workload

TEMPLATE = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}


def manifest(version, spec_extra):
    return {
        "apiVersion": f"kueue.x-k8s.io/{version}",
        "kind": "Workload",
        "metadata": {
            "name": "job-a-12345",
            "namespace": "team",
            "uid": "u-1",
            "creationTimestamp": "2026-11-29T10:00:00Z",
            "ownerReferences": [{"kind": "Job", "name": "a", "controller": True}],
        },
        "spec": {
            "queueName": "user-queue",
            "priority": 100,
            "podSets": [{"name": "main", "count": 3, "template": TEMPLATE}],
            **spec_extra,
        },
    }


def test_v1beta2_workload():
    got = workload(
        manifest(
            "v1beta2",
            {
                "priorityClassRef": {
                    "group": "kueue.x-k8s.io",
                    "kind": "WorkloadPriorityClass",
                    "name": "high",
                }
            },
        )
    )
    assert got.key == "team/job-a-12345"
    assert got.pod_sets[0].totals == {"cpu": 6000}
    assert (got.priority, got.priority_class_name, got.priority_class_source) == (
        100,
        "high",
        "kueue.x-k8s.io/workloadpriorityclass",
    )
    assert got.creation_time == 1795946400.0
    assert (got.owner_kind, got.owner_name) == ("Job", "a")


def test_v1beta1_workload_names_its_priority_class_directly():
    got = workload(
        manifest(
            "v1beta1",
            {"priorityClassName": "high", "priorityClassSource": "scheduling.k8s.io/priorityclass"},
        )
    )
    assert (got.priority_class_name, got.priority_class_source) == (
        "high",
        "scheduling.k8s.io/priorityclass",
    )


@pytest.mark.parametrize(
    ("spec", "want_path"),
    [
        ({"podSets": []}, "spec.podSets"),
        (
            {"podSets": [{"name": "main", "count": -1, "template": TEMPLATE}]},
            "spec.podSets[0].count",
        ),
        ({"queueName": ""}, "spec.queueName"),
        (
            {"podSets": [{"name": "a", "template": TEMPLATE}, {"name": "a", "template": TEMPLATE}]},
            "spec.podSets[1].name",
        ),
        (
            {"podSets": [{"name": "main", "count": 3, "minCount": "2", "template": TEMPLATE}]},
            "spec.podSets[0].minCount",
        ),
        (
            {"podSets": [{"name": "main", "count": 3, "minCount": 0, "template": TEMPLATE}]},
            "spec.podSets[0].minCount",
        ),
    ],
    ids=[
        "no pod sets",
        "negative count",
        "no queue",
        "duplicate pod set",
        "min count a string",
        "min count zero",
    ],
)
def test_invalid_workloads(spec, want_path):
    with pytest.raises(ManifestError) as err:
        workload(manifest("v1beta2", spec))
    assert err.value.path == want_path
