"""deploy/crds/ is generated from extender/kube/generators/crds.py and says what Kueue's CRDs say."""

from __future__ import annotations

from pathlib import Path

import pytest

from extender.kube.generators.crds import custom_resource_definitions, rendered
from tests import yamlc

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "crds"


def test_files_on_disk_match_the_source_of_truth():
    want = rendered()
    have = {p.name: p.read_text() for p in DEPLOY.glob("*.yaml")}
    assert have == want, "run `python -m extender crds --out deploy/crds`"


def by_kind():
    return {crd["spec"]["names"]["kind"]: crd for crd in custom_resource_definitions()}


@pytest.mark.parametrize(
    ("kind", "scope", "short", "status"),
    [
        ("ResourceFlavor", "Cluster", ["flavor", "flavors", "rf"], False),
        ("ClusterQueue", "Cluster", ["cq"], True),
        ("Cohort", "Cluster", ["co"], True),
        ("LocalQueue", "Namespaced", ["queue", "queues", "lq"], True),
        ("Workload", "Namespaced", ["kwl", "kueueworkload", "kueueworkloads"], True),
        ("WorkloadPriorityClass", "Cluster", ["wpc"], False),
    ],
)
def test_names_scopes_and_subresources_are_kueues(kind, scope, short, status):
    crd = by_kind()[kind]
    assert crd["spec"]["scope"] == scope
    assert crd["spec"]["names"]["shortNames"] == short
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    assert versions["v1beta2"]["storage"] is True
    assert versions["v1beta1"]["storage"] is False
    assert versions["v1beta1"]["served"] is True
    assert ("status" in versions["v1beta2"].get("subresources", {})) is status


def test_printer_columns_match_kueues():
    crds = by_kind()

    def columns(kind):
        version = next(v for v in crds[kind]["spec"]["versions"] if v["name"] == "v1beta2")
        return [
            (c["name"], c["jsonPath"], c.get("priority", 0))
            for c in version["additionalPrinterColumns"]
        ]

    assert columns("ClusterQueue") == [
        ("Cohort", ".spec.cohortName", 0),
        ("Strategy", ".spec.queueingStrategy", 1),
        ("Pending Workloads", ".status.pendingWorkloads", 0),
        ("Admitted Workloads", ".status.admittedWorkloads", 1),
    ]
    assert [c[0] for c in columns("Workload")] == [
        "Queue",
        "Reserved in",
        "Admitted",
        "Finished",
        "Age",
    ]
    assert [c[0] for c in columns("LocalQueue")] == [
        "ClusterQueue",
        "Pending Workloads",
        "Admitted Workloads",
    ]


def test_conversion_goes_to_the_webhook_where_schemas_differ():
    crds = by_kind()
    for kind in ("ClusterQueue", "LocalQueue", "Workload", "Cohort"):
        conversion = crds[kind]["spec"]["conversion"]
        assert conversion["strategy"] == "Webhook"
        assert conversion["webhook"]["clientConfig"]["service"]["path"] == "/convert"
    assert "conversion" not in crds["ResourceFlavor"]["spec"]


def test_the_files_are_what_kubectl_apply_reads(cluster):
    """Creating the files' objects makes the seed's manifests accepted, defaults applied."""
    for path in sorted(DEPLOY.glob("*.yaml")):
        assert yamlc.safe_load(path.read_text())["kind"] == "CustomResourceDefinition"
    from tests.controller.test_seed import CQ

    cluster.apply(CQ)
    stored = cluster.get("clusterqueues", "cluster-queue")
    assert stored["spec"]["flavorFungibility"] == {
        "whenCanBorrow": "MayStopSearch",
        "whenCanPreempt": "TryNextFlavor",
    }
    assert stored["spec"]["preemption"]["withinClusterQueue"] == "Never"
    assert stored["spec"]["stopPolicy"] == "None"


def test_a_v1beta1_manifest_works_unchanged(cluster, start_controller):
    """Served at v1beta1, stored at v1beta2 (cohort → cohortName), admitted by the controller."""
    from extender.kube.api.resources import Resource
    from tests.controller.conftest import eventually
    from tests.controller.test_seed import FLAVOR, LQ

    v1beta1 = Resource("kueue.x-k8s.io", "v1beta1", "clusterqueues", "ClusterQueue", False)
    cluster.admin.create(
        v1beta1,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": "cluster-queue"},
            "spec": {
                "cohort": "team",
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": "default-flavor",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": 4},
                                    {"name": "memory", "nominalQuota": "8Gi"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
    )
    stored = cluster.get("clusterqueues", "cluster-queue")
    assert stored["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert stored["spec"]["cohortName"] == "team"
    assert "cohort" not in stored["spec"]
    assert cluster.admin.get(v1beta1, "cluster-queue")["spec"]["cohort"] == "team"
    cluster.apply(FLAVOR, LQ)
    start_controller()
    cluster.job("old-style", "1", duration="600s")
    eventually(
        lambda: cluster.get("jobs", "old-style", "default")["spec"]["suspend"] is False,
        what="the job to start",
    )


def test_a_bad_cluster_queue_is_refused_by_the_webhook_naming_the_field(cluster):
    """The double calls the real validating webhook for Kueue's kinds, as kube-apiserver does."""
    import pytest

    from extender.kube.api.client import ApiError
    from extender.kube.api.resources import CLUSTER_QUEUES

    with pytest.raises(ApiError) as refused:
        cluster.admin.create(
            CLUSTER_QUEUES,
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": "lender"},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {
                                    "name": "f",
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": 4, "lendingLimit": 2}
                                    ],
                                }
                            ],
                        }
                    ],
                },
            },
        )
    assert refused.value.status in (400, 403)
    assert "lendingLimit" in refused.value.message
    assert refused.value.message.startswith('admission webhook "')
    assert cluster.get("clusterqueues", "lender") is None


def test_an_output_directory_that_cannot_be_made_is_one_line_and_exit_2(tmp_path, capsys):
    from extender.__main__ import main

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["crds", "--out", str(blocker / "crds")]) == 2
    assert capsys.readouterr().err == f"error: --out {blocker / 'crds'}: Not a directory\n"
