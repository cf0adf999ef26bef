"""deploy/rbac/ grants exactly what Tower uses: every request the controller (and its
certificate bootstrap) makes is allowed, every verb granted is used, the rules on jobs are
the registry's, the webhook needs none, and the manifests match Kubernetes' schemas."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest
from kubernetes import config as k8s_config

from certs import kube as certs_kube
from certs import pki
from extender.core.jobframework import registry
from extender.kube.api import resources as r
from extender.kube.generators import rbac
from tests import yamlc
from tests.apidouble import Fault
from tests.apidouble import resource as dra_api
from tests.controller.conftest import CONTROLLER_USER, CRDS, ROOT, controller_process, eventually
from tests.controller.test_faults import stop
from tests.controller.test_jobset import JOBSET_CRD, replicated
from tests.controller.test_kubeflow import DATA, MPIJOB_CRD, MPIJOB_EXAMPLE
from tests.controller.test_preemption import (
    cluster_queue,
    local_queue,
    priority_preemption_setup,
)
from tests.controller.workers import name_worker, worker_cluster, worker_tower
from tests.scrape import metrics_port, scrape
from tests.waiting import wait_until

PR_CRD = ROOT / "tests" / "data" / "autoscaler" / "autoscaling.x-k8s.io_provisioningrequests.yaml"
RAY_CRDS = sorted((DATA / "kuberay").glob("ray.io_*.yaml"))
RAY_EXAMPLES = [
    DATA / "kueue-v0.19.2" / "examples" / "ray" / f"ray-{k}-sample.yaml"
    for k in ("job", "cluster", "service")
]


CLUSTER_RUNTIMES = r.Resource(
    "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "ClusterTrainingRuntime", False
)
MULTIKUEUE = "kueue.x-k8s.io/multikueue"


# The status each kind's operator writes on the worker, copied to the manager's job.
def _running(kind: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True",
        "reason": "Running",
        "message": "running on the worker",
        "lastTransitionTime": "2026-12-01T00:00:00Z",
    }


WORKER_STATUS = {
    "MPIJob": {"conditions": [_running("Running")]},
    "RayJob": {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"},
    "RayCluster": {"state": "ready"},
    "RayService": {"conditions": [_running("Ready")]},
    "AppWrapper": {"phase": "Running"},
    "TrainJob": {"conditions": [_running("Created")]},
    "Pod": {"phase": "Running", "conditions": [_running("PodScheduled")]},
}


def multikueue_kinds() -> list[dict[str, Any]]:
    """Kueue's example of each kind MultiKueue runs (besides Job and JobSet), in the
    MultiKueue queue, handed to MultiKueue as the webhook hands it."""
    bodies = [
        yamlc.safe_load(MPIJOB_EXAMPLE.read_text()),
        *(next(d for d in yamlc.safe_load_all(e.read_text()) if d) for e in RAY_EXAMPLES),
        yamlc.safe_load(AW_EXAMPLE.read_text()),
        trainjob("mk-train", "torch-distributed", "ClusterTrainingRuntime", "mk-queue"),
        # A pod has no managedBy: it is copied, the manager's left gated.
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "pod"},
            "spec": {
                "containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                ]
            },
        },
    ]
    out = []
    for body in bodies:
        adapter = registry.for_object(body)
        assert adapter is not None
        body["metadata"]["name"] = "mk-" + body["metadata"]["name"].removeprefix("mk-")
        body["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "mk-queue"
        out.append(jsonpatch.apply_patch(body, adapter.managed_by_ops(body, MULTIKUEUE)))
    return out


def trainjob(name: str, runtime: str, kind: str, queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {
            "runtimeRef": {"name": runtime, "kind": kind},
            "trainer": {"resourcesPerNode": {"requests": {"cpu": "1"}}},
        },
    }


SERVING_SAMPLES = [
    (
        r.Resource("apps", "v1", "statefulsets", "StatefulSet", True),
        DATA / "kueue-v0.19.2" / "examples" / "serving" / "sample-statefulset.yaml",
    ),
    (
        r.Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", True),
        DATA / "kueue-v0.19.2" / "examples" / "serving" / "sample-leaderworkerset.yaml",
    ),
]


def copy_on_worker(cluster: Any, worker: Any, resource: r.Resource, sample: Path) -> None:
    """Kueue's sample, in the MultiKueue queue: copied to the worker once admitted there;
    deleted on the manager, its copy goes."""
    body = yamlc.safe_load(sample.read_text())
    body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "mk-queue"
    name = body["metadata"]["name"]
    cluster.admin.create(resource, body, "default")
    eventually(
        lambda: worker.get(resource.plural, name, "default"),
        timeout=30,
        what=f"the {resource.kind} copied to the worker",
    )
    cluster.admin.delete(resource, name, "default", propagation="Background")
    eventually(
        lambda: worker.get(resource.plural, name, "default") is None,
        timeout=30,
        what=f"the worker's {resource.kind} removed",
    )


def run_on_worker(cluster: Any, worker: Any, body: dict[str, Any]) -> None:
    """The job made on the manager runs on the worker; the worker's status is copied to
    the manager's (its /status patched); deleted, its copies on the worker go too."""
    adapter = registry.for_object(body)
    assert adapter is not None
    resource = r.resource_of(adapter)
    name = body["metadata"]["name"]
    cluster.admin.create(resource, body, "default")
    eventually(
        lambda: worker.get(resource.plural, name, "default"),
        timeout=30,
        what=f"the {adapter.kind} made on the worker",
    )
    status = WORKER_STATUS[adapter.kind]
    worker.admin.patch(resource, name, {"status": status}, "default", subresource="status")
    want = worker.get(resource.plural, name, "default")["status"]
    eventually(
        lambda: cluster.get(resource.plural, name, "default").get("status") == want,
        timeout=30,
        what=f"the manager's {adapter.kind} taking the worker's status",
    )
    cluster.admin.delete(resource, name, "default", propagation="Background")
    eventually(
        lambda: worker.get(resource.plural, name, "default") is None,
        timeout=30,
        what=f"the worker's {adapter.kind} removed",
    )


def started_by_tower(cluster: Any, plural: str, name: str) -> bool:
    """Started by the controller (its ClusterQueue noted at start): with its webhook hooks
    removed, a job is created unsuspended, so `suspend: false` alone would not say so."""
    job = cluster.get(plural, name, "default") or {}
    return "tower.dev/cluster-queue" in (job.get("metadata", {}).get("annotations") or {})


TRAINER_CRDS = sorted((DATA / "trainer").glob("trainer.kubeflow.org_*.yaml"))
TORCH_RUNTIME = DATA / "trainer" / "runtimes" / "torch_distributed.yaml"
AW_CRD = DATA / "appwrapper" / "workload.codeflare.dev_appwrappers.yaml"
LWS_CRD = DATA / "lws" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
AW_EXAMPLE = DATA / "kueue-v0.19.2" / "examples" / "appwrapper" / "pytorch-sample.yaml"

RBAC = Path(__file__).resolve().parents[2] / "deploy" / "rbac"
BUNDLE_FILES = ("ca.crt", "tls.crt", "tls.key", "ca.key")

# What Kubernetes grants every authenticated user (the system:basic-user ClusterRole).
BASIC_USER = [
    {
        "apiGroups": ["authentication.k8s.io"],
        "resources": ["selfsubjectreviews"],
        "verbs": ["create"],
    },
    {
        "apiGroups": ["authorization.k8s.io"],
        "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
        "verbs": ["create"],
    },
]


KUEUES_WORKLOAD = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Workload",
    "metadata": {"name": "from-kueue", "finalizers": ["kueue.x-k8s.io/resource-in-use"]},
    "spec": {
        "queueName": "user-queue",
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


def documents():
    return [d for p in sorted(RBAC.glob("*.yaml")) for d in yamlc.safe_load_all(p.read_text()) if d]


@pytest.mark.parametrize(
    "document", documents(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}"
)
def test_the_manifests_match_kubernetes_schemas(document):
    kubernetes_validate.validate(document, "1.32.0", strict=True)


def request_attributes(method, path, query):
    """(apiGroup, resource[/subresource], verb, namespace, name) as RBAC sees a request."""
    parts = [p for p in path.strip("/").split("/") if p]
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) == 3 else "")
    name = rest[1] if len(rest) >= 2 else None
    if method == "GET":
        verb = "get" if name else ("watch" if query.get("watch") in ("1", "true") else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
    return group, resource, verb, namespace, name


def granted(rules, namespace=None):
    """(group, resource, verb, namespace) of every grant; names where a rule names them."""
    out = {}
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    out[(group, resource, verb, namespace)] = set(rule.get("resourceNames") or ())
    return out


# Kubernetes' own Roles the controller is bound to, as kube-apiserver bootstraps them: they
# grant more than Tower uses (list, watch), so they count as granted but need not be used.
KUBERNETES_ROLES = {
    ("kube-system", "extension-apiserver-authentication-reader"): [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "verbs": ["get", "list", "watch"],
            "resourceNames": ["extension-apiserver-authentication"],
        }
    ],
}


def bound_to_controller(docs):
    """The grants of the controller's bindings but its own ClusterRole's and Role's: Tower's
    other roles (to be used), and Kubernetes' own (KUBERNETES_ROLES)."""
    own, kubernetes = {}, {}
    for binding in docs:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        ref = binding["roleRef"]
        if ref["name"] == "tower-controller" or not any(
            s["name"] == "tower-controller" for s in binding["subjects"]
        ):
            continue
        namespace = binding["metadata"].get("namespace")
        if (namespace, ref["name"]) in KUBERNETES_ROLES:
            kubernetes.update(granted(KUBERNETES_ROLES[namespace, ref["name"]], namespace))
            continue
        [role] = [
            d for d in docs if d["kind"] == ref["kind"] and d["metadata"]["name"] == ref["name"]
        ]
        own.update(granted(role["rules"], namespace))
    return own, kubernetes


def test_every_verb_granted_is_used_and_every_verb_used_is_granted(cluster, webhook):
    """The controller through admission, preemption, a JobSet, a deleted Job and refused
    writes (each object read again after a 409), plus its certificate bootstrap (creating the
    Secret, then renewing it): the set of (group, resource, verb) it used is exactly the set
    deploy/rbac/ grants."""
    cluster.admin.create(CRDS, JOBSET_CRD)
    cluster.admin.create(CRDS, yamlc.safe_load(MPIJOB_CRD.read_text()))
    for crd in RAY_CRDS + TRAINER_CRDS:
        cluster.admin.create(CRDS, yamlc.safe_load(crd.read_text()))
    cluster.admin.create(CRDS, yamlc.safe_load(PR_CRD.read_text()))
    cluster.admin.create(CRDS, yamlc.safe_load(AW_CRD.read_text()))
    cluster.admin.create(CRDS, yamlc.safe_load(LWS_CRD.read_text()))
    dra_api.serve(cluster.api)  # resource.k8s.io/v1 (DRA), as from Kubernetes v1.34
    cluster.apply(*priority_preemption_setup())
    # A ClusterQueue with Kueue's ProvisioningRequest check: its config, check and queue.
    cluster.admin.create(
        r.PROVISIONING_REQUEST_CONFIGS,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ProvisioningRequestConfig",
            "metadata": {"name": "prov-config"},
            "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io"},
        },
    )
    prov_cq = cluster_queue("prov-cq", 4)
    prov_cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov"}]}
    cluster.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": "prov"},
            "spec": {
                "controllerName": "kueue.x-k8s.io/provisioning-request",
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "ProvisioningRequestConfig",
                    "name": "prov-config",
                },
            },
        },
        prov_cq,
        local_queue("prov-queue", "prov-cq"),
    )
    cluster.api.gc_delay = 30.0  # the controller, not the garbage collector, deletes the Workload
    for method, plural, sub in (
        ("PATCH", "jobs", ""),
        ("PATCH", "jobsets", ""),
        ("PATCH", "workloads", "status"),
        ("PATCH", "clusterqueues", "status"),
        ("PATCH", "localqueues", "status"),
        # A start refused once: the job is read again (get) before the patch is retried.
        ("PATCH", "mpijobs", ""),
        ("PATCH", "rayjobs", ""),
        ("PATCH", "rayclusters", ""),
        ("PATCH", "rayservices", ""),
        ("PATCH", "appwrappers", ""),
        ("PATCH", "trainjobs", ""),
        ("PATCH", "pods", ""),
    ):
        cluster.api.faults.append(Fault(method, plural, sub, first_attempt_only=True))
    # The bootstrap as the controller: the Secret created (with a CA of its own)...
    # With Kueue's Configuration, as deploy/ runs it: the webhooks' namespaces are set too.
    config = cluster.tmp / "controller_manager_config.yaml"
    config.write_text(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "manageJobsWithoutQueueName: true\n"
        "integrations: {frameworks: [batch/job, jobset.x-k8s.io/jobset, pod]}\n"
    )
    bootstrap = [sys.executable, "-m", "certs", "bootstrap", "--config", str(config)]
    subprocess.run(
        [*bootstrap, "--kubeconfig", cluster.controller_config], cwd=ROOT, check=True, timeout=60
    )
    # ...replaced by the test webhook's own certificates (the admin, as for a migration)...
    certs = webhook.certs
    certs_kube.write_secret(
        cluster.admin.api_client,
        "tower-system",
        certs_kube.SECRET,
        pki.Bundle(*(p.read_bytes() for p in (certs / f for f in BUNDLE_FILES))),
    )
    # ...then renewed a year later, under that CA, and its caBundle injected again.
    controller_api = k8s_config.new_client_from_config(config_file=cluster.controller_config)
    certs_kube.bootstrap(controller_api, now=datetime.now(UTC) + timedelta(days=364))
    proc = controller_process(
        cluster, "--lease-duration", "2", "--renew-deadline", "1.5", "--retry-period", "0.2"
    )
    try:
        # Scraped: its metrics server reviews the scraper's token and access.
        scrape(metrics_port(proc))
        low = cluster.job(
            "low", "4", duration="600s", labels={"kueue.x-k8s.io/priority-class": "low"}
        )
        eventually(lambda: cluster.get("jobs", "low", "default")["spec"]["suspend"] is False)
        cluster.job("high", "4", duration="0.5s", labels={"kueue.x-k8s.io/priority-class": "high"})
        eventually(
            lambda: (
                cluster.get("jobs", "low", "default")["spec"]["suspend"] is False
                and bool(
                    (cluster.get("jobs", "high", "default").get("status") or {}).get("succeeded")
                )
            ),
            timeout=20,
            what="the preemptor to finish and the preempted job to run again",
        )
        cluster.admin.delete(r.JOBS, "low", "default", propagation="Background")
        wait_until(
            lambda: conditions_of(cluster.workload_of(low)),
            lambda conditions: conditions is None,
            what="the deleted Job's Workload to be deleted by the controller",
        )
        # A Workload Kueue admitted before a migration, with Kueue's finalizer, deleted.
        cluster.admin.create(r.WORKLOADS, KUEUES_WORKLOAD, "default")
        cluster.admin.delete(r.WORKLOADS, "from-kueue", "default")
        eventually(
            lambda: cluster.get("workloads", "from-kueue", "default") is None,
            what="Kueue's finalizer released",
        )
        cluster.admin.create(
            r.JOBSETS,
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": {
                    "name": "train",
                    "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
                },
                "spec": {"replicatedJobs": [replicated("workers", 1, "1")]},
            },
            "default",
        )
        eventually(
            lambda: cluster.get("jobsets", "train", "default")["spec"]["suspend"] is False,
            what="the JobSet to start",
        )
        # Deleted, so that the kinds below find the queue's quota free.
        cluster.admin.delete(r.JOBSETS, "train", "default", propagation="Background")
        # A plain pod: ungated (its first patch refused, so it is read again), then
        # preempted by a higher-priority Job (deleted), and its finalizer taken off once it
        # has stopped.
        pod_body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "plain",
                "labels": {
                    "kueue.x-k8s.io/queue-name": "user-queue",
                    "kueue.x-k8s.io/priority-class": "low",
                },
            },
            "spec": {
                "containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "4"}}}
                ]
            },
        }
        made = cluster.admin.create(r.PODS, pod_body, "default")
        assert made["spec"]["schedulingGates"] == [
            {"name": "kueue.x-k8s.io/admission"},
            {"name": "kueue.x-k8s.io/topology"},
        ]

        def plain() -> dict[str, Any]:
            return cluster.get("pods", "plain", "default") or {}

        eventually(
            lambda: not (plain().get("spec") or {}).get("schedulingGates"),
            what="the pod ungated",
        )
        cluster.admin.patch(r.PODS, "plain", {"spec": {"nodeName": "node-1"}}, "default")
        cluster.admin.patch(
            r.PODS, "plain", {"status": {"phase": "Running"}}, "default", subresource="status"
        )
        cluster.job(
            "urgent", "4", duration="0.5s", labels={"kueue.x-k8s.io/priority-class": "high"}
        )
        eventually(
            lambda: plain().get("metadata", {}).get("deletionTimestamp"),
            what="the preempted pod deleted",
        )
        cluster.admin.patch(
            r.PODS, "plain", {"status": {"phase": "Failed"}}, "default", subresource="status"
        )
        eventually(lambda: not plain(), what="the pod gone, its finalizer off")
        eventually(
            lambda: bool(
                (cluster.get("jobs", "urgent", "default").get("status") or {}).get("succeeded")
            ),
            what="the urgent Job to finish",
        )
        # Kueue's MPIJob example, the one kind of Kubeflow's on by default: started, then
        # finished as mpi-operator would say it.
        mpijobs = r.resource_of(registry.ADAPTERS["kubeflow.org/mpijob"])
        cluster.admin.create(mpijobs, yamlc.safe_load(MPIJOB_EXAMPLE.read_text()), "default")
        eventually(lambda: started_by_tower(cluster, "mpijobs", "pi"), what="the MPIJob to start")
        succeeded = {"type": "Succeeded", "status": "True", "message": "MPIJob pi succeeded"}
        cluster.admin.patch(
            mpijobs, "pi", {"status": {"conditions": [succeeded]}}, "default", subresource="status"
        )
        # Kueue's Ray examples, on by default: each started; the RayJob finished as KubeRay
        # would say it, the cluster and the service deleted.
        for example in RAY_EXAMPLES:
            [ray] = [d for d in yamlc.safe_load_all(example.read_text()) if d]
            adapter = registry.for_object(ray)
            assert adapter is not None
            resource = r.resource_of(adapter)
            cluster.admin.create(resource, ray, "default")
            name = ray["metadata"]["name"]
            eventually(
                lambda resource=resource, name=name: started_by_tower(
                    cluster, resource.plural, name
                ),
                what=f"the {adapter.kind} to start",
            )
            if adapter.kind == "RayJob":
                status = {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}
                cluster.admin.patch(
                    resource, name, {"status": status}, "default", subresource="status"
                )
            else:
                cluster.admin.delete(resource, name, "default", propagation="Background")
        # Kueue's AppWrapper sample, on by default: started, then succeeded as the appwrapper
        # controller would say it.
        appwrappers = r.resource_of(registry.ADAPTERS["workload.codeflare.dev/appwrapper"])
        wrapped = yamlc.safe_load(AW_EXAMPLE.read_text())
        cluster.admin.create(appwrappers, wrapped, "default")
        aw_name = wrapped["metadata"]["name"]
        eventually(
            lambda: started_by_tower(cluster, "appwrappers", aw_name),
            what="the AppWrapper to start",
        )
        cluster.admin.patch(
            appwrappers,
            aw_name,
            {"status": {"phase": "Succeeded"}},
            "default",
            subresource="status",
        )
        # TrainJobs on trainer's torch runtime, cluster-wide and namespaced: each runtime read,
        # each job started, then complete as trainer would say it.
        runtime = yamlc.safe_load(TORCH_RUNTIME.read_text())
        trainer_api = "trainer.kubeflow.org", "v1alpha1"
        cluster.admin.create(CLUSTER_RUNTIMES, runtime)
        local = {**runtime, "kind": "TrainingRuntime", "metadata": {"name": "torch-local"}}
        cluster.admin.create(
            r.Resource(*trainer_api, "trainingruntimes", "TrainingRuntime", True), local, "default"
        )
        trainjobs = r.resource_of(registry.ADAPTERS["trainer.kubeflow.org/trainjob"])
        for kind, runtime_name in (
            ("ClusterTrainingRuntime", "torch-distributed"),
            ("TrainingRuntime", "torch-local"),
        ):
            name = f"train-{runtime_name}"
            cluster.admin.create(
                trainjobs, trainjob(name, runtime_name, kind, "user-queue"), "default"
            )
            eventually(
                lambda name=name: started_by_tower(cluster, "trainjobs", name),
                what=f"TrainJob {name} to start",
            )
            complete = {
                "type": "Complete",
                "status": "True",
                "reason": "Done",
                "message": "done",
                "lastTransitionTime": "2026-12-01T00:00:00Z",
            }
            cluster.admin.patch(
                trainjobs,
                name,
                {"status": {"conditions": [complete]}},
                "default",
                subresource="status",
            )
        # A Job whose capacity is provisioned: the request made, Provisioned, the Job runs and
        # finishes, and its request is deleted.
        provisioned = cluster.job("provisioned", "1", queue="prov-queue", duration="0.5s")
        wl = eventually(lambda: cluster.workload_of(provisioned), what="its Workload")
        request = f"{wl['metadata']['name']}-prov-1"
        eventually(
            lambda: cluster.get("provisioningrequests", request, "default"),
            what="the ProvisioningRequest",
        )
        condition = {
            "type": "Provisioned",
            "status": "True",
            "reason": "Provisioned",
            "message": "",
            "lastTransitionTime": "2026-12-01T00:00:00Z",
        }
        cluster.admin.patch(
            r.PROVISIONING_REQUESTS,
            request,
            {"status": {"conditions": [condition]}},
            "default",
            subresource="status",
        )
        eventually(
            lambda: cluster.get("provisioningrequests", request, "default") is None,
            timeout=20,
            what="the finished Job's ProvisioningRequest deleted",
        )
        # MultiKueue: a JobSet of a queue with a MultiKueue check runs on a worker cluster
        # (the worker's kubeconfig Secret read, the cluster's Active condition written), and
        # takes the worker's status when it completes there.
        worker_crds = [
            yamlc.safe_load(crd.read_text())
            for crd in (MPIJOB_CRD, *RAY_CRDS, *TRAINER_CRDS, AW_CRD, LWS_CRD)
        ]
        with worker_cluster(cluster.tmp / "worker", webhook, JOBSET_CRD, *worker_crds) as worker:
            worker.apply(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "ResourceFlavor",
                    "metadata": {"name": "pool-a"},
                },
                cluster_queue("mk-cq", 4),
                local_queue("mk-queue", "mk-cq"),
            )
            name_worker(cluster, worker, "worker-1", "worker-1-secret")
            mk_cq = cluster_queue("mk-cq", 4)
            mk_cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "mk"}]}
            cluster.apply(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "MultiKueueConfig",
                    "metadata": {"name": "mk-config"},
                    "spec": {"clusters": ["worker-1"]},
                },
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "AdmissionCheck",
                    "metadata": {"name": "mk"},
                    "spec": {
                        "controllerName": "kueue.x-k8s.io/multikueue",
                        "parameters": {
                            "apiGroup": "kueue.x-k8s.io",
                            "kind": "MultiKueueConfig",
                            "name": "mk-config",
                        },
                    },
                },
                mk_cq,
                local_queue("mk-queue", "mk-cq"),
            )
            with worker_tower(worker):
                cluster.admin.create(
                    r.JOBSETS,
                    {
                        "apiVersion": "jobset.x-k8s.io/v1alpha2",
                        "kind": "JobSet",
                        "metadata": {
                            "name": "remote",
                            "labels": {"kueue.x-k8s.io/queue-name": "mk-queue"},
                        },
                        "spec": {
                            "managedBy": "kueue.x-k8s.io/multikueue",
                            "replicatedJobs": [replicated("workers", 1, "1")],
                        },
                    },
                    "default",
                )
                eventually(
                    lambda: (
                        (worker.get("jobsets", "remote", "default") or {})
                        .get("spec", {})
                        .get("suspend")
                        is False
                    ),
                    timeout=30,
                    what="the JobSet started on the worker",
                )
                completed = {
                    "type": "Completed",
                    "status": "True",
                    "reason": "AllJobsCompleted",
                    "message": "jobset completed successfully",
                    "lastTransitionTime": "2026-12-01T00:00:00Z",
                }
                worker.admin.patch(
                    r.JOBSETS,
                    "remote",
                    {"status": {"conditions": [completed]}},
                    "default",
                    subresource="status",
                )
                eventually(
                    lambda: any(
                        c["type"] == "Completed"
                        for c in (
                            cluster.get("jobsets", "remote", "default").get("status") or {}
                        ).get("conditions")
                        or []
                    ),
                    timeout=30,
                    what="the manager's JobSet completed as the worker's",
                )
                # Every other kind MultiKueue runs: its status copied from the worker's.
                worker.admin.create(CLUSTER_RUNTIMES, runtime)
                for body in multikueue_kinds():
                    run_on_worker(cluster, worker, body)
                # A StatefulSet and a LeaderWorkerSet: read whole, and copied.
                for resource, sample in SERVING_SAMPLES:
                    copy_on_worker(cluster, worker, resource, sample)
    finally:
        stop(proc)

    used: dict[tuple, set] = {}
    for method, path, query, user in cluster.api.calls:
        if user != CONTROLLER_USER or not path.startswith(("/api/", "/apis/")):
            continue
        if len([p for p in path.split("/") if p]) <= (2 if path.startswith("/api/") else 3):
            continue  # discovery
        group, resource, verb, namespace, name = request_attributes(method, path, query)
        used.setdefault((group, resource, verb, namespace), set()).add(name)

    enabled = registry.enabled()
    docs = documents()
    cluster_role = next(
        d
        for d in docs
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "tower-controller"
    )
    role = next(d for d in docs if d["kind"] == "Role")
    own, kubernetes = bound_to_controller(docs)
    grants = {**granted(cluster_role["rules"]), **granted(role["rules"], "tower-system"), **own}
    basic = granted(BASIC_USER)

    def grant_for(group, resource, verb, namespace):
        for key in ((group, resource, verb, namespace), (group, resource, verb, None)):
            if key in grants or key in kubernetes:
                return key
        return None

    not_granted = []
    for (group, resource, verb, namespace), names in sorted(used.items(), key=str):
        if (group, resource, verb, None) in basic:
            continue
        key = grant_for(group, resource, verb, namespace)
        named = grants.get(key, kubernetes.get(key))
        if key is None or (named and not names <= named):
            not_granted.append((group, resource, verb, namespace, sorted(map(str, names))))
    assert not_granted == []
    used_grants = {grant_for(*k) for k in used}
    # Every registered kind of job is granted (as Kueue's role grants every integration);
    # the controller here runs Kueue's default set, so the others' grants go unused.
    idle = {
        (group, resource)
        for entry in rbac.job_rules(a for a in registry.ADAPTERS.values() if a not in enabled)
        for group in entry["apiGroups"]
        for resource in entry["resources"]
    }
    unused = set(grants) - used_grants
    left = sorted((k for k in unused if k[:2] not in idle), key=str)
    assert left == []


def test_the_rules_on_jobs_are_the_registrys():
    """Whatever the ClusterRole grants on a kind of job is what the registry's adapters
    generate, in one place: a new adapter not regenerated, or a job rule edited by hand,
    fails here."""
    kinds = {(a.group, a.plural) for a in registry.ADAPTERS.values()}
    kinds |= {
        (g, plural) for a in registry.ADAPTERS.values() for g, _, plural in a.referenced_kinds
    }
    kinds |= {(p.group, p.plural) for p in registry.group_parents()}
    cluster_role = next(d for d in documents() if d["kind"] == "ClusterRole")
    # (Placement's own rule, list and watch on nodes and pods, also names pods: a rule is one
    # on jobs when every resource it names is a kind of job.)
    on_jobs = [
        rule
        for rule in cluster_role["rules"]
        if all(
            (group, resource.split("/")[0]) in kinds
            for group in rule["apiGroups"]
            for resource in rule["resources"]
        )
    ]
    assert on_jobs == rbac.job_rules(), f"run {rbac.COMMAND}"


def conditions_of(workload):
    """(type, status, reason) of a Workload's conditions; None when there is no Workload."""
    if workload is None:
        return None
    return [
        (c["type"], c["status"], c.get("reason"))
        for c in (workload.get("status") or {}).get("conditions") or []
    ]


def test_the_webhook_may_only_read_where_a_queue_leads():
    """Its one read (webhook/routes.py): a job's LocalQueue, ClusterQueue and their
    AdmissionChecks, to hand a MultiKueue queue's jobs to MultiKueue. Nothing else, and
    nothing written."""
    docs = documents()
    account = next(
        d
        for d in docs
        if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == "tower-webhook"
    )
    assert account["automountServiceAccountToken"] is True
    bound = [
        (d["kind"], d["roleRef"]["name"])
        for d in docs
        if d["kind"] in ("RoleBinding", "ClusterRoleBinding")
        for s in d["subjects"]
        if s["name"] == "tower-webhook"
    ]
    assert bound == [("ClusterRoleBinding", "tower-webhook")]
    [role] = [
        d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "tower-webhook"
    ]
    assert role["rules"] == [
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["localqueues", "clusterqueues", "admissionchecks"],
            "verbs": ["get"],
        }
    ]
