"""Kueue's CustomResourceDefinitions, rendered from the API schema (extender/core/api/schema.py).

That description holds every field's schema; this module adds what only a CRD has: names,
scopes, short names, printer columns, subresources, the served and stored versions (v1beta2
stored, v1beta1 served and converted by the webhook's /convert) and the conversion webhook.
deploy/crds/ is its output. Pod templates inside Workloads are kept as opaque objects
(x-kubernetes-preserve-unknown-fields) instead of Kueue's copy of the full PodTemplateSpec
schema: the API server stores them as sent, and Tower reads only what it needs.
"""

from __future__ import annotations

from typing import Any

from extender.core.api import schema
from extender.kube.api import yaml_text
from extender.kube.api.resources import KUEUE_GROUP

CONVERSION_SERVICE = {"name": "tower-webhook", "namespace": "tower-system", "path": "/convert"}
CA_INJECTION = "cert-manager.io/inject-ca-from"


def _column(
    name: str, path: str, kind: str = "string", priority: int = 0, description: str = ""
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "jsonPath": path, "type": kind}
    if description:
        out["description"] = description
    if priority:
        out["priority"] = priority
    return out


def _cluster_queue_columns(cohort_path: str) -> list[dict[str, Any]]:
    return [
        _column("Cohort", cohort_path, description="Cohort that this ClusterQueue belongs to"),
        _column(
            "Strategy",
            ".spec.queueingStrategy",
            priority=1,
            description="The queueing strategy used to prioritize workloads",
        ),
        _column(
            "Pending Workloads",
            ".status.pendingWorkloads",
            "integer",
            description="Number of pending workloads",
        ),
        _column(
            "Admitted Workloads",
            ".status.admittedWorkloads",
            "integer",
            1,
            "Number of admitted workloads that haven't finished yet",
        ),
    ]


_KINDS: list[dict[str, Any]] = [
    {
        "kind": "ResourceFlavor",
        "plural": "resourceflavors",
        "scope": "Cluster",
        "shortNames": ["flavor", "flavors", "rf"],
        "status": False,
        "conversion": False,
        "columns": [],
    },
    {
        "kind": "ClusterQueue",
        "plural": "clusterqueues",
        "scope": "Cluster",
        "shortNames": ["cq"],
        "status": True,
        "conversion": True,
        "columns": {
            "v1beta2": _cluster_queue_columns(".spec.cohortName"),
            "v1beta1": _cluster_queue_columns(".spec.cohort"),
        },
    },
    {
        "kind": "Cohort",
        "plural": "cohorts",
        "scope": "Cluster",
        "shortNames": ["co"],
        "status": True,
        "conversion": True,
        "columns": [],
    },
    {
        "kind": "LocalQueue",
        "plural": "localqueues",
        "scope": "Namespaced",
        "shortNames": ["queue", "queues", "lq"],
        "status": True,
        "conversion": True,
        "columns": [
            _column("ClusterQueue", ".spec.clusterQueue", description="Backing ClusterQueue"),
            _column(
                "Pending Workloads",
                ".status.pendingWorkloads",
                "integer",
                description="Number of pending workloads",
            ),
            _column(
                "Admitted Workloads",
                ".status.admittedWorkloads",
                "integer",
                description="Number of admitted workloads that haven't finished yet.",
            ),
        ],
    },
    {
        "kind": "Workload",
        "plural": "workloads",
        "scope": "Namespaced",
        "shortNames": ["kwl", "kueueworkload", "kueueworkloads"],
        "status": True,
        "conversion": True,
        "selectable": {"v1beta2": [{"jsonPath": ".status.admission.clusterQueue"}]},
        "columns": [
            _column(
                "Queue",
                ".spec.queueName",
                description="Name of the queue this workload was submitted to",
            ),
            _column(
                "Reserved in",
                ".status.admission.clusterQueue",
                description="Name of the ClusterQueue where the workload is reserving quota",
            ),
            _column(
                "Admitted",
                ".status.conditions[?(@.type=='Admitted')].status",
                description="Admission status",
            ),
            _column(
                "Finished",
                ".status.conditions[?(@.type=='Finished')].status",
                description="Workload finished",
            ),
            _column(
                "Age",
                ".metadata.creationTimestamp",
                "date",
                description="Time this workload was created",
            ),
        ],
    },
    {
        "kind": "WorkloadPriorityClass",
        "plural": "workloadpriorityclasses",
        "scope": "Cluster",
        "shortNames": ["wpc"],
        "status": False,
        "empty_subresources": True,
        "conversion": False,
        "columns": [
            _column(
                "Value",
                ".value",
                "integer",
                description="Value of workloadPriorityClass's Priority",
            )
        ],
    },
    {
        "kind": "AdmissionCheck",
        "plural": "admissionchecks",
        "scope": "Cluster",
        "shortNames": ["ac"],
        "status": True,
        "conversion": False,
        "columns": [],
    },
    {
        "kind": "ProvisioningRequestConfig",
        "plural": "provisioningrequestconfigs",
        "scope": "Cluster",
        "shortNames": ["prc"],
        "status": False,
        "conversion": False,
        "columns": [],
    },
    {
        "kind": "Topology",
        "plural": "topologies",
        "scope": "Cluster",
        "shortNames": ["topo"],
        "status": False,
        "conversion": False,
        "columns": [],
    },
    {
        "kind": "MultiKueueConfig",
        "plural": "multikueueconfigs",
        "scope": "Cluster",
        "shortNames": ["mkconf"],
        "status": False,
        "conversion": False,
        "columns": [],
    },
    {
        "kind": "MultiKueueCluster",
        "plural": "multikueueclusters",
        "scope": "Cluster",
        "shortNames": ["mkc"],
        "status": True,
        "conversion": True,
        "columns": [
            _column(
                "Connected",
                ".status.conditions[?(@.type=='Active')].status",
                description="MultiKueueCluster is connected",
            ),
            _column(
                "Age",
                ".metadata.creationTimestamp",
                "date",
                description="Time this workload was created",
            ),
        ],
    },
]


def custom_resource_definitions() -> list[dict[str, Any]]:
    """Every CRD Tower serves, as the API server would be given it."""
    out = []
    for spec in _KINDS:
        versions = []
        for version in ("v1beta2", "v1beta1"):
            columns = spec["columns"]
            if isinstance(columns, dict):
                columns = columns[version]
            entry: dict[str, Any] = {
                "name": version,
                "served": True,
                "storage": version == "v1beta2",
                "schema": {"openAPIV3Schema": schema.schema(spec["kind"], version)},
            }
            if version == "v1beta1":
                entry["deprecated"] = True
                entry["deprecationWarning"] = "This version is deprecated. Use v1beta2 instead."
            if columns:
                entry["additionalPrinterColumns"] = columns
            if spec["status"]:
                entry["subresources"] = {"status": {}}
            elif spec.get("empty_subresources"):
                entry["subresources"] = {}  # as Kueue's WorkloadPriorityClass declares it
            selectable = spec.get("selectable", {}).get(version)
            if selectable:
                entry["selectableFields"] = selectable
            versions.append(entry)
        crd: dict[str, Any] = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{spec['plural']}.{KUEUE_GROUP}"},
            "spec": {
                "group": KUEUE_GROUP,
                "names": {
                    "kind": spec["kind"],
                    "listKind": f"{spec['kind']}List",
                    "plural": spec["plural"],
                    "singular": spec["kind"].lower(),
                    "shortNames": spec["shortNames"],
                    "categories": ["kueue"],
                },
                "scope": spec["scope"],
                "versions": versions,
            },
        }
        if spec["conversion"]:
            # With cert-manager (deploy/cert-manager, or the chart's certManager.enabled), its
            # cainjector fills the caBundle; without it, `python -m certs bootstrap` does and
            # the annotation does nothing.
            crd["metadata"]["annotations"] = {CA_INJECTION: "tower-system/tower-webhook"}
            crd["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"service": dict(CONVERSION_SERVICE)},
                },
            }
        out.append(crd)
    return out


def rendered() -> dict[str, str]:
    """File name → YAML text, exactly as written under deploy/crds/."""
    header = "# Generated by `python -m extender crds --out deploy/crds`; do not edit.\n"
    return {
        f"{crd['spec']['names']['plural']}.yaml": header
        + yaml_text.dump(crd, sort_keys=False, width=100)
        for crd in custom_resource_definitions()
    }
