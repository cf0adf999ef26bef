"""The kinds of job Tower can manage, under Kueue's integration names, and which are on.

Adding a kind is one adapter module and one row in `ADAPTERS`. The webhook's paths and
configurations, the controller's RBAC and watches, and the simulator all read this table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from extender.core.jobframework.adapter import JobAdapter, register_kind
from extender.core.jobframework.appwrapper import ADAPTERS as APPWRAPPER
from extender.core.jobframework.batch_job import BatchJob
from extender.core.jobframework.jobset import JobSetAdapter
from extender.core.jobframework.kubeflow import ADAPTERS as KUBEFLOW
from extender.core.jobframework.parent import PARENTS as TEMPLATE_PARENTS
from extender.core.jobframework.parent import TemplateParent
from extender.core.jobframework.pod import ADAPTERS as PODS
from extender.core.jobframework.pod import IMPLICIT_POD
from extender.core.jobframework.ray import ADAPTERS as RAY
from extender.core.jobframework.serving import PARENTS as SERVING_PARENTS
from extender.core.jobframework.spark import ADAPTERS as SPARK
from extender.core.jobframework.trainer import ADAPTERS as TRAINER

# Every integration of Kueue v0.19.2 (its `integrations.frameworks` values); the ones with
# an adapter are managed, the others are refused by name (see `unknown`).
KUEUE_FRAMEWORKS: tuple[str, ...] = (
    "batch/job",
    "kubeflow.org/mpijob",
    "ray.io/rayjob",
    "ray.io/raycluster",
    "ray.io/rayservice",
    "jobset.x-k8s.io/jobset",
    "workload.codeflare.dev/appwrapper",
    "trainer.kubeflow.org/trainjob",
    "pod",
    "deployment",
    "statefulset",
    "leaderworkerset.x-k8s.io/leaderworkerset",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/tfjob",
    "kubeflow.org/xgboostjob",
    "kubeflow.org/paddlejob",
    "kubeflow.org/jaxjob",
    "sparkoperator.k8s.io/sparkapplication",
)

# Kueue v0.19.2's default file's `integrations.frameworks` (Kubeflow v1 jobs and Spark off).
DEFAULT_FRAMEWORKS: tuple[str, ...] = KUEUE_FRAMEWORKS[:12]

ADAPTERS: dict[str, JobAdapter] = {}


def register(adapter: JobAdapter) -> JobAdapter:
    """Add a kind under its framework name (a test's toy kind comes in the same way)."""
    ADAPTERS[adapter.framework] = adapter
    register_kind(adapter)
    return adapter


for _adapter in (
    BatchJob(),
    JobSetAdapter(),
    *KUBEFLOW,
    *RAY,
    *APPWRAPPER,
    *TRAINER,
    *SPARK,
    *PODS,
):
    register(_adapter)

# Integrations Kueue sets up only when their (alpha) feature gate is on: it refuses to start
# when one is listed with its gate off.
GATED: dict[str, str] = {
    "sparkoperator.k8s.io/sparkapplication": "SparkApplicationIntegration",
}


def gate_refusal(frameworks: Iterable[str], gates: Mapping[str, bool]) -> str | None:
    """Why these integrations cannot be set up with these feature gates (None: they can)."""
    for name in frameworks:
        gate = GATED.get(name)
        if gate is not None and not gates.get(gate, False):
            return (
                f"integration {name} is an alpha feature: enable the {gate} feature gate "
                f"(featureGates: {{{gate}: true}}, or --feature-gates {gate}=true)"
            )
    return None


# Kinds whose pods are queued one by one (Deployment) or as groups (StatefulSet): their
# webhook marks the pod template.
PARENTS: dict[str, TemplateParent] = {p.framework: p for p in (*TEMPLATE_PARENTS, *SERVING_PARENTS)}


PARENTS_BY_KIND: dict[str, TemplateParent] = {p.kind: p for p in PARENTS.values()}


def enabled(frameworks: Iterable[str] | None = None) -> tuple[JobAdapter, ...]:
    """The adapters of these integrations (Kueue's default when None), in the order given;
    names Tower has no adapter for yet are left out (see `unmanaged`)."""
    names = DEFAULT_FRAMEWORKS if frameworks is None else tuple(frameworks)
    out = tuple(ADAPTERS[name] for name in dict.fromkeys(names) if name in ADAPTERS)
    if "pod" not in names and any(name in PARENTS for name in names):
        # Kueue's implicit pod integration (since v0.15): the pods of a Deployment or a
        # StatefulSet are queued without `pod` being named, and only theirs.
        out = (*out, IMPLICIT_POD)
    return out


def enabled_parents(frameworks: Iterable[str] | None = None) -> tuple[TemplateParent, ...]:
    """The kinds of these integrations whose pods are queued by Tower (Deployment,
    StatefulSet)."""
    names = DEFAULT_FRAMEWORKS if frameworks is None else tuple(frameworks)
    return tuple(PARENTS[name] for name in dict.fromkeys(names) if name in PARENTS)


def unmanaged(frameworks: Iterable[str] | None = None) -> tuple[str, ...]:
    """Integrations asked for that Kueue knows and Tower does not manage yet."""
    names = DEFAULT_FRAMEWORKS if frameworks is None else tuple(frameworks)
    known = {*ADAPTERS, *PARENTS}
    return tuple(n for n in dict.fromkeys(names) if n not in known and n in KUEUE_FRAMEWORKS)


def unknown(frameworks: Iterable[str]) -> tuple[str, ...]:
    """Names that are no integration of Kueue's nor of Tower's."""
    known = {*ADAPTERS, *PARENTS, *KUEUE_FRAMEWORKS}
    return tuple(n for n in frameworks if n not in known)


def group_parents(frameworks: Iterable[str] | None = None) -> tuple[TemplateParent, ...]:
    """Of those, the kinds whose pods run as groups, each group one Workload (StatefulSet)."""
    return tuple(p for p in enabled_parents(frameworks) if p.runs_groups)


def by_kind(adapters: Iterable[JobAdapter] | None = None) -> Mapping[tuple[str, str], JobAdapter]:
    """(group, kind) -> adapter, over these adapters (every registered one when None)."""
    pool = ADAPTERS.values() if adapters is None else adapters
    return {(a.group, a.kind): a for a in pool}


def for_object(obj: Mapping[str, object]) -> JobAdapter | None:
    """The adapter of an object by its apiVersion and kind (None for no managed kind)."""
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    return by_kind().get((group, str(obj.get("kind") or "")))


def webhook_path(adapter: JobAdapter | TemplateParent, verb: str) -> str:
    """Kueue's webhook path for a kind: /mutate-batch-v1-job, /validate-…."""
    group = adapter.group.replace(".", "-")
    prefix = f"{group}-" if group else "-"
    return f"/{verb}-{prefix}{adapter.version}-{adapter.kind.lower()}"
