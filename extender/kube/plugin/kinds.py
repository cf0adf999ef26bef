"""The kinds of job the plugin finds by name, and the labels that select each one's pods.

By name: `why NAME`, `--for KIND/NAME`. The pods' labels are those Kueue's integration for
the kind gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extender.core.jobframework import registry
from extender.core.jobframework.groups import GROUP_NAME
from extender.kube.api.client import ApiError, KubeClient
from extender.kube.api.resources import Resource, resource_of
from extender.kube.api.snapshot import Snapshot
from extender.kube.plugin.connect import PluginClient
from extender.kube.plugin.output import CliError

Obj = dict[str, Any]

_KUBEFLOW_JOB = "training.kubeflow.org/job-name"
_KUBEFLOW_OPERATOR = "training.kubeflow.org/operator-name"
_JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
_RAY_CLUSTER = "ray.io/cluster"


def job_kinds(client: KubeClient) -> list[tuple[str, Resource]]:
    """Every kind of job Tower has an adapter for that the API server serves, Job first
    (one discovery call per group/version; a name is looked for in each, in this order)."""
    out: list[tuple[str, Resource]] = []
    served: dict[str, frozenset[str] | None] = {}
    for adapter in registry.ADAPTERS.values():
        resource = resource_of(adapter)
        if resource.api_version not in served:
            served[resource.api_version] = client.served(resource.api_version)
        if resource.plural in (served[resource.api_version] or ()):
            out.append((adapter.kind, resource))
    return out


def _named(word: str, kind: str, resource: Resource) -> bool:
    """kubectl's ways to name a kind: job, jobs, Job, job.batch, jobs.batch/v1 ..."""
    base, _, group = word.lower().partition(".")
    group = group.split("/", 1)[0]
    if group and group != resource.group and not resource.group.startswith(group):
        return False
    return base in (kind.lower(), resource.plural, resource.plural[:-1])


def find(client: KubeClient, snapshot: Snapshot, name: str, namespace: str) -> tuple[Obj, str]:
    """The job (Job, JobSet, ... or KIND/NAME) or Workload asked about, and its kind."""
    kinds = job_kinds(client)
    if "/" in name:  # KIND/NAME, as kubectl takes it: pod/x, jobs/y, rayjob.ray.io/z
        wanted, name = name.split("/", 1)
        kinds = [(k, r) for k, r in kinds if _named(wanted, k, r)]
        if not kinds:
            raise CliError(f"{wanted}: not a kind of job Tower manages here")
    for kind, resource in kinds:
        try:
            return client.get(resource, name, namespace), kind
        except ApiError as err:
            if not err.not_found:
                raise
    key = f"{namespace}/{name}"
    if key in snapshot.objects or key in snapshot.finished:
        return snapshot.objects.get(key) or snapshot.finished[key], "Workload"
    names = ", ".join(kind for kind, _ in kinds)
    raise CliError(f"no {names} or Workload named {name} in namespace {namespace}")


def for_kind(client: KubeClient, text: str) -> tuple[str, Resource, str]:
    """`--for TYPE[.API-GROUP]/NAME`: the kind, its resource and the name (jobs Tower
    manages and the parents whose pods it queues: Deployment, StatefulSet, ...)."""
    wanted, slash, name = text.partition("/")
    if not slash or not wanted or not name or "/" in name:
        raise CliError(
            f"--for {text}: must be TYPE[.API-GROUP]/NAME (e.g. job/sample-job, "
            "jobset.jobset.x-k8s.io/my-set)"
        )
    candidates = list(job_kinds(client))
    for parent in registry.PARENTS.values():
        candidates.append(
            (parent.kind, Resource(parent.group, parent.version, parent.plural, parent.kind, True))
        )
    for kind, resource in candidates:
        if _named(wanted, kind, resource):
            return kind, resource, name
    raise CliError(f"--for {text}: {wanted} is not a kind of job Tower manages here")


def pod_selector(kind: str, obj: Mapping[str, Any]) -> str:
    """The label selector of a job's pods, as Kueue's integration for the kind gives it;
    "" for a kind Kueue gives none (its pods cannot be listed this way)."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    status = obj.get("status") or {}
    operators = {
        "PyTorchJob": "pytorchjob-controller",
        "TFJob": "tfjob-controller",
        "XGBoostJob": "xgboostjob-controller",
        "PaddleJob": "paddlejob-controller",
        "JAXJob": "jaxjob-controller",
        "MPIJob": "mpi-operator",
    }
    if kind == "Job":
        return f"batch.kubernetes.io/job-name={name}"
    if kind in ("JobSet", "TrainJob"):
        return f"{_JOBSET_NAME}={name}"
    if kind in operators:
        return f"{_KUBEFLOW_JOB}={name},{_KUBEFLOW_OPERATOR}={operators[kind]}"
    if kind == "RayCluster":
        return f"{_RAY_CLUSTER}={name}"
    if kind == "RayJob":
        cluster = status.get("rayClusterName")
        return f"{_RAY_CLUSTER}={cluster}" if cluster else ""
    if kind == "RayService":
        cluster = (status.get("activeServiceStatus") or {}).get("rayClusterName")
        return f"{_RAY_CLUSTER}={cluster}" if cluster else ""
    if kind == "Pod":
        group = (meta.get("labels") or {}).get(GROUP_NAME)
        return f"{GROUP_NAME}={group}" if group else ""
    if any(p.kind == kind for p in registry.PARENTS.values()):
        # Kueue lists no pods for these; Tower selects them as their controller does.
        labels = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    return ""


def find_for(client: PluginClient, text: str, namespace: str | None) -> tuple[str, Obj | None]:
    """The kind `--for` names and its object in the namespace (None: the first in any), or
    None when there is no such object."""
    kind, resource, name = for_kind(client, text)
    listed = client.list_selected(resource, namespace, field_selector=f"metadata.name={name}")
    found = [o for o in listed["items"] if (o.get("metadata") or {}).get("name") == name]
    return kind, (found[0] if found else None)
