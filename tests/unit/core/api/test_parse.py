import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.core.api import parse
from extender.core.api.models import QueueingStrategy
from extender.core.api.parse import ManifestError

V2 = "kueue.x-k8s.io/v1beta2"


def cq(spec, version=V2):
    return {"apiVersion": version, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec}


def group(*resources, flavor="default", covered=("cpu",)):
    return {
        "coveredResources": list(covered),
        "flavors": [{"name": flavor, "resources": list(resources)}],
    }


SEED = cq(
    {
        "namespaceSelector": {},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [
            group(
                {"name": "cpu", "nominalQuota": 4},
                {"name": "memory", "nominalQuota": "8Gi"},
                covered=("cpu", "memory"),
            )
        ],
    }
)


def test_the_seed_cluster_queue_parses():
    got = parse.cluster_queue(SEED)
    assert got.name == "cq"
    assert got.queueing_strategy is QueueingStrategy.BEST_EFFORT_FIFO
    assert got.quotas[("default", "cpu")].nominal == 4000
    assert got.quotas[("default", "memory")].nominal == 8 * 2**30
    assert got.namespace_selector is not None
    assert got.namespace_selector.matches({})


def test_v1beta1_cohort_becomes_cohort_name_and_aliases_are_understood():
    got = parse.cluster_queue(
        cq(
            {
                "cohort": "team",
                "flavorFungibility": {"whenCanBorrow": "Borrow"},
                "resourceGroups": [group({"name": "cpu", "nominalQuota": 1})],
            },
            version="kueue.x-k8s.io/v1beta1",
        )
    )
    assert got.cohort == "team"
    assert got.flavor_fungibility.when_can_borrow.value == "MayStopSearch"


def test_missing_namespace_selector_selects_nothing():
    got = parse.cluster_queue(cq({"resourceGroups": [group({"name": "cpu", "nominalQuota": 1})]}))
    assert got.namespace_selector is None


BAD = [
    (
        "flavor lists other resources than coveredResources",
        cq({"resourceGroups": [group({"name": "gpu", "nominalQuota": 1})]}),
        "spec.resourceGroups[0].flavors[0].resources",
        "must list exactly the coveredResources",
    ),
    (
        "negative quota",
        cq({"resourceGroups": [group({"name": "cpu", "nominalQuota": -1})]}),
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
        "greater than or equal to 0",
    ),
    (
        "quota that is not a quantity",
        cq({"resourceGroups": [group({"name": "cpu", "nominalQuota": "four"})]}),
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
        "not a Kubernetes quantity",
    ),
    (
        "missing nominalQuota",
        cq({"resourceGroups": [group({"name": "cpu"})]}),
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
        "is required",
    ),
    (
        "borrowingLimit without a cohort",
        cq({"resourceGroups": [group({"name": "cpu", "nominalQuota": 1, "borrowingLimit": 1})]}),
        "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit",
        "no cohort",
    ),
    (
        "lendingLimit above nominalQuota",
        cq(
            {
                "cohortName": "c",
                "resourceGroups": [group({"name": "cpu", "nominalQuota": 1, "lendingLimit": 2})],
            }
        ),
        "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit",
        "less than or equal",
    ),
    (
        "a resource in two groups",
        cq(
            {
                "resourceGroups": [
                    group({"name": "cpu", "nominalQuota": 1}),
                    group({"name": "cpu", "nominalQuota": 1}, flavor="other"),
                ]
            }
        ),
        "spec.resourceGroups[1].coveredResources",
        "one group only",
    ),
    (
        "unknown queueing strategy",
        cq({"queueingStrategy": "LIFO"}),
        "spec.queueingStrategy",
        "must be one of",
    ),
    ("v1beta1 field name in a v1beta2 object", cq({"cohort": "c"}), "spec.cohort", "cohortName"),
    (
        "reclaim Never with borrowWithinCohort",
        cq({"preemption": {"borrowWithinCohort": {"policy": "LowerPriority"}}}),
        "spec.preemption",
        "cannot be combined",
    ),
    ("wrong apiVersion", {**SEED, "apiVersion": "kueue.x-k8s.io/v1"}, "apiVersion", "v1beta2"),
    (
        "name that is not a DNS subdomain",
        {**SEED, "metadata": {"name": "Cluster_Queue"}},
        "metadata.name",
        "RFC 1123",
    ),
]


@pytest.mark.parametrize(
    ("manifest", "want_path", "want_message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_invalid_cluster_queues_name_the_field(manifest, want_path, want_message):
    with pytest.raises(ManifestError) as err:
        parse.cluster_queue(manifest)
    assert err.value.path == want_path
    assert want_message in err.value.message


def test_local_queue_needs_a_cluster_queue():
    with pytest.raises(ManifestError) as err:
        parse.local_queue(
            {"apiVersion": V2, "kind": "LocalQueue", "metadata": {"name": "q"}, "spec": {}}
        )
    assert err.value.path == "spec.clusterQueue"


def test_local_queue_defaults_to_the_default_namespace():
    got = parse.local_queue(
        {
            "apiVersion": V2,
            "kind": "LocalQueue",
            "metadata": {"name": "q"},
            "spec": {"clusterQueue": "cq"},
        }
    )
    assert got.key == "default/q"


@pytest.mark.parametrize(
    ("spec", "want_path"),
    [
        ({"nodeLabels": {f"k{i}": "v" for i in range(9)}}, "spec.nodeLabels"),
        ({"nodeTaints": [{"key": "k", "effect": "Sometimes"}]}, "spec.nodeTaints[0].effect"),
        ({"nodeTaints": [{"key": "k"}]}, "spec.nodeTaints[0].effect"),
    ],
    ids=["more than 8 labels", "unknown taint effect", "taint without effect"],
)
def test_invalid_resource_flavors(spec, want_path):
    with pytest.raises(ManifestError) as err:
        parse.resource_flavor(
            {"apiVersion": V2, "kind": "ResourceFlavor", "metadata": {"name": "f"}, "spec": spec}
        )
    assert err.value.path == want_path


def test_cohort_and_priority_class():
    co = parse.cohort(
        {
            "apiVersion": V2,
            "kind": "Cohort",
            "metadata": {"name": "root"},
            "spec": {"fairSharing": {"weight": "2"}},
        }
    )
    assert co.parent is None
    assert co.fair_weight == 2
    wpc = parse.workload_priority_class(
        {
            "apiVersion": V2,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        }
    )
    assert wpc.value == 1000


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.text(max_size=8)
    | st.sampled_from(["4", "8Gi", "-1", "cpu", "memory", "Never", "Any", "f"]),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "name",
                    "spec",
                    "metadata",
                    "resourceGroups",
                    "coveredResources",
                    "flavors",
                    "resources",
                    "nominalQuota",
                    "borrowingLimit",
                    "lendingLimit",
                    "cohortName",
                    "namespaceSelector",
                    "matchLabels",
                    "matchExpressions",
                    "key",
                    "operator",
                    "values",
                    "preemption",
                    "flavorFungibility",
                    "nodeLabels",
                    "nodeTaints",
                    "tolerations",
                    "effect",
                    "clusterQueue",
                    "value",
                    "parentName",
                    "fairSharing",
                    "weight",
                    "podSets",
                    "template",
                    "count",
                    "queueName",
                    "containers",
                    "resources",
                    "requests",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=25,
)

PARSERS = {
    "ClusterQueue": parse.cluster_queue,
    "LocalQueue": parse.local_queue,
    "ResourceFlavor": parse.resource_flavor,
    "Cohort": parse.cohort,
    "WorkloadPriorityClass": parse.workload_priority_class,
}


@settings(max_examples=1500, deadline=None)
@given(
    kind=st.sampled_from([*sorted(PARSERS), "Workload"]),
    spec=json_values,
    top=st.dictionaries(st.sampled_from(["value", "metadata"]), json_values, max_size=2),
)
def test_any_shape_is_parsed_or_rejected_with_a_field_error(kind, spec, top):
    from extender.core.jobframework.workloads import workload

    obj = {"apiVersion": V2, "kind": kind, "metadata": {"name": "x"}, "spec": spec, **top}
    try:
        (workload if kind == "Workload" else PARSERS[kind])(obj)
    except ManifestError as err:
        assert err.path  # noqa: PT017 - parsing may succeed; only a field error may escape
