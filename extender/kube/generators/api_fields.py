"""The page docs/kueue-fields.md: every field of Tower's Kueue CRDs, and what Tower does with it.

Written from the API description (extender/core/api/schema.py) and the table of fields Tower does
not act on (extender/core/api/unacted.py), so the page cannot drift from either:
`python -m extender fields > docs/kueue-fields.md`, checked by
tests/unit/core/api/test_kueue_schema.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from extender.core.api import schema
from extender.core.api.unacted import UNACTED, Effect
from extender.core.config import fields as config_fields

KINDS = schema.KINDS  # the page's sections, in this order
# What "honoured" means where it needs a word more.
NOTES = {
    ("ClusterQueue", "spec.cohort"): "honoured: v1beta1's name for spec.cohortName",
    ("ClusterQueue", "spec.fairSharing"): "honoured when fair sharing is on (--fair-sharing)",
    ("Cohort", "spec.fairSharing"): "honoured when fair sharing is on (--fair-sharing)",
    ("ResourceFlavor", "spec.tolerations"): "honoured (flavor fit, and placement on nodes)",
    ("Workload", "spec.podSets[].minCount"): (
        "honoured: partial admission, as Kueue's (the largest count down to minCount that "
        "fits, once the whole count did not fit even with preemption)"
    ),
    ("Workload", "spec.podSets[].template"): (
        "honoured: the containers' requests, nodeSelector, required node affinity and "
        "tolerations are read; the rest is kept as written"
    ),
    ("Workload", "spec.priorityClassName"): "honoured: v1beta1's priorityClassRef.name",
    ("Workload", "spec.priorityClassSource"): "honoured: v1beta1's priorityClassRef.kind",
    ("WorkloadPriorityClass", "description"): "for people (Kueue does not act on it either)",
    ("ClusterQueue", "spec.admissionChecks"): (
        "honoured: v1beta1's list, each check for every flavor (converted to "
        "spec.admissionChecksStrategy)"
    ),
    ("ClusterQueue", "spec.admissionChecksStrategy"): (
        "honoured: quota is reserved first, and the Workload is admitted once every check "
        "that applies to its flavors is Ready (docs/admission-checks.md)"
    ),
    ("ClusterQueue", "spec.admissionScope"): (
        "honoured with the Configuration's admissionFairSharing (operations.md, Admission fair "
        "sharing)"
    ),
    ("LocalQueue", "spec.fairSharing"): (
        "honoured with the Configuration's admissionFairSharing: it divides the LocalQueue's usage"
    ),
    ("AdmissionCheck", "spec.controllerName"): (
        "honoured: `kueue.x-k8s.io/provisioning-request` is Tower's own controller; a check "
        "of any other controller is left to it (it keeps the Active condition and the states)"
    ),
    ("AdmissionCheck", "spec.parameters"): (
        "read by the check's controller (Tower's reads a ProvisioningRequestConfig)"
    ),
    ("AdmissionCheck", "spec.retryDelayMinutes"): (
        "v1beta1 only, deprecated: dropped as Kueue's v1beta2 drops it"
    ),
    ("Topology", "spec.levels"): (
        "stored and listed; acted on only through a ResourceFlavor's spec.topologyName"
    ),
    ("ProvisioningRequestConfig", "spec"): (
        "honoured by Tower's ProvisioningRequest controller (docs/admission-checks.md)"
    ),
    ("MultiKueueConfig", "spec.clusters"): (
        "honoured: the workers a `kueue.x-k8s.io/multikueue` check dispatches to "
        "(docs/multikueue.md)"
    ),
    ("MultiKueueConfig", "spec.quotaManagement"): (
        "accepted and kept; Tower's manager reserves quota itself (Kueue's default)"
    ),
    ("MultiKueueCluster", "spec.kubeConfig"): (
        "v1beta1's place for spec.clusterSource.kubeConfig (converted)"
    ),
    ("MultiKueueCluster", "spec.clusterProfileRef"): (
        "v1beta1's place for spec.clusterSource.clusterProfileRef (converted)"
    ),
    ("MultiKueueCluster", "spec.clusterSource.kubeConfig"): (
        "honoured: a Secret in Tower's namespace (key `kubeconfig`) or a path on its host"
    ),
    ("MultiKueueCluster", "spec.clusterSource.clusterProfileRef"): (
        "honoured with Kueue's MultiKueueClusterProfile gate (off by default, the cluster "
        "then stays Active=False and says so): the ClusterProfile in Tower's namespace, "
        "reached through the Configuration's multiKueue.clusterProfile.accessProviders"
    ),
}


def _paths(schema: dict[str, Any], path: str = "") -> Iterator[str]:
    for name, sub in (schema.get("properties") or {}).items():
        here = f"{path}.{name}" if path else name
        yield here
        if sub.get("x-kubernetes-preserve-unknown-fields"):
            continue
        if isinstance(sub.get("items"), dict):
            yield from _paths(sub["items"], here + "[]")
        else:
            yield from _paths(sub, here)


def fields(kind: str) -> list[tuple[str, list[str]]]:
    """(path, versions) of every user-set field of a kind: its spec (or, for a
    WorkloadPriorityClass, its top level); below a field Tower does not act on, only that
    field."""
    stops = [f.path for f in UNACTED if f.kind == kind]
    found: dict[str, list[str]] = {}
    for version in schema.VERSIONS:
        root = schema.schema(kind, version)
        if kind != "WorkloadPriorityClass":
            root = {"properties": {"spec": root["properties"]["spec"]}}
        for path in _paths(root):
            if path in ("apiVersion", "kind", "metadata", "spec"):
                continue
            if any(path.startswith((s + ".", s + "[")) for s in stops):
                continue
            found.setdefault(path, []).append(version)
    return sorted(found.items())


def status_of(kind: str, path: str) -> str:
    for field in UNACTED:
        if field.kind == kind and field.path == path:
            if field.effect is Effect.HINT:
                text = f"accepted, not acted on: {field.feature}"
            else:
                text = f"**{field.effect.value}** ({field.feature})"
            return text + (f"; {field.advice}" if field.advice else "")
    for (k, prefix), note in NOTES.items():
        if k == kind and (path == prefix or path.startswith(prefix + ".")):
            return note
    return "honoured"


def page() -> str:
    out = [
        "# Kueue's fields in Tower",
        "",
        "<!-- Generated by `python -m extender fields`; do not edit. -->",
        "",
        "Tower's CRDs accept every field of Kueue v0.19.2's eleven kinds, at both versions, with",
        "Kueue's types, enums, defaults and list keys",
        "(tests/unit/core/api/test_kueue_schema.py walks Kueue's own schema). A field Tower does",
        "not act on is never ignored silently:",
        "",
        "- **makes its ClusterQueue inactive**: the ClusterQueue shows `Active=False` with the",
        "  reason `UnsupportedField` and a message that names the field, and admits nothing",
        "  until the field is removed;",
        "- **makes the workload wait**: the Workload stays pending with a message naming the",
        "  field;",
        "- in both cases, the webhook's answer carries a warning that `kubectl apply` prints",
        "  (`Warning: ...`), and `python -m extender simulate` lists the field before its",
        "  timeline.",
        "",
        "Status fields: Tower writes those Kueue writes for what Tower acts on; those of",
        "features it does not have (preemption gates) are accepted and kept as written.",
        "",
        "The differences in behaviour where Tower does act are in",
        "[kueue.md](kueue.md).",
    ]
    for kind in KINDS:
        out += ["", f"## {kind}", "", "| field | versions | in Tower |", "|---|---|---|"]
        for path, versions in fields(kind):
            shown = "both" if len(versions) == 2 else ", ".join(versions)
            out.append(f"| `{path}` | {shown} | {status_of(kind, path)} |")
    out += [
        "",
        "## Jobs and JobSets",
        "",
        "Tower reads a Job's or JobSet's pod templates as Kueue does (requests, nodeSelector,",
        "required node affinity, tolerations, priorityClassName). A Job's",
        "`kueue.x-k8s.io/job-min-parallelism` is honoured (partial admission: the Job starts",
        "with `spec.parallelism` set to the admitted count, its completions unchanged unless",
        "`kueue.x-k8s.io/job-completions-equal-parallelism` is true, and a stop puts its own",
        "parallelism back). These of Kueue's annotations it does not act on, and the mutating",
        "webhook warns when it queues them:",
        "",
        "| field | in Tower |",
        "|---|---|",
    ]
    for field in UNACTED:
        if field.kind in ("Job", "JobSet"):
            out.append(f"| {field.kind} `{field.path}` | {status_of(field.kind, field.path)} |")
    return "\n".join(out + _configuration()) + "\n"


def _configuration() -> list[str]:
    """Kueue's Configuration file (`run --config`): what sets a flag, what is only warned."""
    out = [
        "",
        "## Configuration (`python -m extender run --config`)",
        "",
        "Kueue v0.19.2's manager Configuration (`config.kueue.x-k8s.io/v1beta2`; v1beta1 is",
        "converted as Kueue converts it). Every field is checked by type, and Kueue's checks of",
        "its values apply: an unknown field, a wrong type or an invalid value stops the",
        "controller with one line naming the field (exit status 2). Where the file is silent",
        "Kueue's defaults apply; a flag given overrides the file. Each field that is set and not",
        "acted on is one warning line at start.",
        "",
        "| field | in Tower |",
        "|---|---|",
    ]
    for path, flag in config_fields.ACTED.items():
        out.append(f"| `{path}` | acted on: {flag} |")
    for field in config_fields.UNACTED:
        if field.path in config_fields.ACTED:  # said on its acted row
            continue
        line = f"accepted, warned, not acted on: {field.feature}"
        out.append(
            f"| `{field.path}` | {line}" + (f"; {field.advice}" if field.advice else "") + " |"
        )
    return out
