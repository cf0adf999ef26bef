"""Mutation fuzz: any field of a valid manifest replaced by any JSON value is parsed or refused
with a ManifestError naming a field; never another exception."""

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.core.api import parse
from extender.core.jobframework.jobs import workload_for
from extender.core.jobframework.workloads import workload

V2 = "kueue.x-k8s.io/v1beta2"
POD = {
    "spec": {
        "containers": [
            {"name": "c", "resources": {"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}}}
        ],
        "initContainers": [
            {"name": "i", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}
        ],
        "nodeSelector": {"pool": "a"},
        "overhead": {"cpu": "100m"},
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}
                    ]
                }
            }
        },
    }
}
META = {"name": "x", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "q"}}
VALID = {
    "ClusterQueue": (
        {
            "apiVersion": V2,
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "cohortName": "c",
                "namespaceSelector": {
                    "matchLabels": {"a": "b"},
                    "matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}],
                },
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "flavorFungibility": {"whenCanBorrow": "TryNextFlavor"},
                "fairSharing": {"weight": "2"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {
                                "name": "f",
                                "resources": [
                                    {
                                        "name": "cpu",
                                        "nominalQuota": 4,
                                        "borrowingLimit": 1,
                                        "lendingLimit": 2,
                                    }
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        parse.cluster_queue,
    ),
    "ResourceFlavor": (
        {
            "apiVersion": V2,
            "kind": "ResourceFlavor",
            "metadata": {"name": "f"},
            "spec": {
                "nodeLabels": {"a": "b"},
                "nodeTaints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
                "tolerations": [{"key": "k", "operator": "Equal", "value": "v"}],
            },
        },
        parse.resource_flavor,
    ),
    "LocalQueue": (
        {
            "apiVersion": V2,
            "kind": "LocalQueue",
            "metadata": {"name": "q"},
            "spec": {"clusterQueue": "cq"},
        },
        parse.local_queue,
    ),
    "Cohort": (
        {
            "apiVersion": V2,
            "kind": "Cohort",
            "metadata": {"name": "c"},
            "spec": {"parentName": "p", "resourceGroups": []},
        },
        parse.cohort,
    ),
    "WorkloadPriorityClass": (
        {"apiVersion": V2, "kind": "WorkloadPriorityClass", "metadata": {"name": "w"}, "value": 3},
        parse.workload_priority_class,
    ),
    "Workload": (
        {
            "apiVersion": V2,
            "kind": "Workload",
            "metadata": {"name": "w"},
            "spec": {
                "queueName": "q",
                "priority": 1,
                "podSets": [{"name": "main", "count": 2, "template": POD}],
            },
        },
        workload,
    ),
    "Job": (
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": META,
            "spec": {"parallelism": 2, "completions": 3, "template": POD},
        },
        lambda o: workload_for(o, uid="u", creation_time=0),
    ),
    "JobSet": (
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": META,
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "w",
                        "replicas": 2,
                        "template": {"spec": {"parallelism": 2, "template": POD}},
                    }
                ]
            },
        },
        lambda o: workload_for(o, uid="u", creation_time=0),
    ),
}


def paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from paths(v, (*prefix, i))


ALL = [(kind, p) for kind, (obj, _) in VALID.items() for p in paths(obj) if p]
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False)
    | st.text(max_size=6)
    | st.sampled_from(["-1", "1Gi", "In", "Always", "NoSchedule"]),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=10,
)


def test_the_valid_manifests_parse():
    for obj, parser in VALID.values():
        parser(copy.deepcopy(obj))


@settings(max_examples=2500, deadline=None)
@given(target=st.sampled_from(ALL), value=json_values)
def test_any_field_replaced_by_any_value(target, value):
    kind, path = target
    obj, parser = VALID[kind]
    obj = copy.deepcopy(obj)
    node = obj
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    try:
        parser(obj)
    except parse.ManifestError as err:
        assert err.path  # noqa: PT017 - parsing may succeed; only a field error may escape
