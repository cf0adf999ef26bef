"""A podSet's topology request from Kueue's pod-template annotations, checked as Kueue does.

`kueue.x-k8s.io/podset-required-topology: <level>` (or preferred, or unconstrained), with
optional slices (`podset-slice-required-topology` + `podset-slice-size`, or the multi-layer
`podset-slice-required-topology-constraints`) and a leader/worker group (`podset-group-name`),
become the Workload's spec.podSets[].topologyRequest, with the index labels the kind gives its
pods (a Job's completion index). A bad annotation is refused with Kueue's wording, named by
its path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from extender.core.api.parse import ManifestError
from extender.core.api.topology import (
    IMPLICIT,
    PREFERRED,
    REQUIRED,
    UNCONSTRAINED,
    SliceLayer,
    TopologyRequest,
)
from extender.core.jobframework.adapter import PodSetTemplate

PREFIX = "kueue.x-k8s.io/"
REQUIRED_ANNOTATION = PREFIX + "podset-required-topology"
PREFERRED_ANNOTATION = PREFIX + "podset-preferred-topology"
UNCONSTRAINED_ANNOTATION = PREFIX + "podset-unconstrained-topology"
SLICE_ANNOTATION = PREFIX + "podset-slice-required-topology"
SLICE_SIZE_ANNOTATION = PREFIX + "podset-slice-size"
LAYERS_ANNOTATION = PREFIX + "podset-slice-required-topology-constraints"
GROUP_ANNOTATION = PREFIX + "podset-group-name"
# On a template whose pods number from 1 in their podSet (Kueue's webhook marks a worker of a
# LeaderWorkerSet with a leader, of an MPIJob whose launcher runs as a worker): the topology
# ungater ranks each pod by its index less this offset.
POD_INDEX_OFFSET = PREFIX + "pod-index-offset"
# The scheduling gate a topology-placed pod waits behind until it is given its domain.
TOPOLOGY_GATE = PREFIX + "topology"
# The labels Kubernetes and JobSet number pods with (Kueue's podIndexLabel, subGroupIndexLabel).
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
TOPOLOGY_ANNOTATIONS = (
    REQUIRED_ANNOTATION,
    PREFERRED_ANNOTATION,
    UNCONSTRAINED_ANNOTATION,
    SLICE_ANNOTATION,
    LAYERS_ANNOTATION,
)
"""Any of these makes a pod a topology-aware one (Kueue's IsTAS)."""

_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _label_name_problem(value: str) -> str | None:
    """Kubernetes' qualified-name rule for a node label's key, or None when it holds."""
    prefix, _, name = value.rpartition("/")
    if "/" in value and (not prefix or len(prefix) > 253 or not _PREFIX.match(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name or len(name) > 63 or not _QUALIFIED.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character"
        )
    return None


def _int(value: str) -> int | None:
    try:
        return int(value, 10)
    except ValueError:
        return None


def request_of(
    template: Mapping[str, Any],
    path: str,
    count: int,
    *,
    pod_index_label: str | None = None,
    sub_group_index_label: str | None = None,
    sub_group_count: int | None = None,
) -> TopologyRequest | None:
    """The topology request of a podSet whose pod template is at `path`; None when it asks for
    nothing and its kind gives no index label. Raises ManifestError as Kueue's webhook would."""
    meta = template.get("metadata") if isinstance(template, Mapping) else None
    raw = meta.get("annotations") if isinstance(meta, Mapping) else None
    annotations: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    at = f"{path}.metadata.annotations" if path else "metadata.annotations"

    def where(key: str) -> str:
        return f"{at}[{key}]"

    def text(key: str) -> str | None:
        value = annotations.get(key)
        return None if value is None else str(value)

    modes = [
        k
        for k in (REQUIRED_ANNOTATION, PREFERRED_ANNOTATION, UNCONSTRAINED_ANNOTATION)
        if k in annotations
    ]
    if len(modes) > 1:
        named = ", ".join(
            f'"{k}"' for k in (REQUIRED_ANNOTATION, PREFERRED_ANNOTATION, UNCONSTRAINED_ANNOTATION)
        )
        raise ManifestError(at, f"must not contain more than one topology annotation: [{named}]")
    for key in (REQUIRED_ANNOTATION, PREFERRED_ANNOTATION, SLICE_ANNOTATION):
        value = text(key)
        if value is not None and (problem := _label_name_problem(value)) is not None:
            raise ManifestError(where(key), f"{value!r}: {problem}")
    group = text(GROUP_ANNOTATION)
    if group is not None:
        if group.isdigit():
            raise ManifestError(where(GROUP_ANNOTATION), f"{group!r}: must not be a number")
        for other in (SLICE_SIZE_ANNOTATION, SLICE_ANNOTATION):
            if other in annotations:
                raise ManifestError(
                    where(GROUP_ANNOTATION), f"may not be set when '{other}' is specified"
                )
        if REQUIRED_ANNOTATION not in annotations and PREFERRED_ANNOTATION not in annotations:
            raise ManifestError(
                where(GROUP_ANNOTATION),
                f"may not be set when neither '{PREFERRED_ANNOTATION}' nor "
                f"'{REQUIRED_ANNOTATION}' is specified",
            )
    unconstrained = text(UNCONSTRAINED_ANNOTATION)
    if unconstrained is not None and unconstrained not in _TRUE + _FALSE:
        raise ManifestError(
            where(UNCONSTRAINED_ANNOTATION), f"{unconstrained!r}: must be a boolean value"
        )
    slices = _slices(annotations, where, count)

    mode, level = IMPLICIT, None
    if (level := text(REQUIRED_ANNOTATION)) is not None:
        mode = REQUIRED
    elif (level := text(PREFERRED_ANNOTATION)) is not None:
        mode = PREFERRED
    elif unconstrained in _TRUE:
        mode = UNCONSTRAINED
    if mode == IMPLICIT and not slices and not pod_index_label and not sub_group_index_label:
        return None
    return TopologyRequest(
        mode,
        level,
        slices,
        group if mode in (REQUIRED, PREFERRED) else None,
        pod_index_label,
        sub_group_index_label,
        sub_group_count,
    )


def _slices(annotations: Mapping[str, Any], where: Any, count: int) -> tuple[SliceLayer, ...]:
    level = annotations.get(SLICE_ANNOTATION)
    size_text = annotations.get(SLICE_SIZE_ANNOTATION)
    size: int | None = None
    if size_text is not None:
        size = _int(str(size_text))
        if size is None:
            raise ManifestError(
                where(SLICE_SIZE_ANNOTATION), f"{size_text!r}: must be a numeric value"
            )
        if size < 1:
            raise ManifestError(
                where(SLICE_SIZE_ANNOTATION), f"{size}: must be greater than or equal to 1"
            )
        if level is None:
            raise ManifestError(
                where(SLICE_SIZE_ANNOTATION),
                f"may not be set when '{SLICE_ANNOTATION}' is not specified",
            )
        if size > count:
            raise ManifestError(
                where(SLICE_SIZE_ANNOTATION),
                f"{size}: must not be greater than pod set count {count}",
            )
    elif level is not None:
        raise ManifestError(
            where(SLICE_SIZE_ANNOTATION), f"must be set when '{SLICE_ANNOTATION}' is specified"
        )
    layers_text = annotations.get(LAYERS_ANNOTATION)
    if layers_text is None:
        return (SliceLayer(str(level), size),) if level is not None and size is not None else ()
    field = where(LAYERS_ANNOTATION)
    for other in (SLICE_ANNOTATION, SLICE_SIZE_ANNOTATION):
        if other in annotations:
            raise ManifestError(field, f"may not be set when '{other}' is specified")
    try:
        layers = json.loads(str(layers_text))
    except ValueError as err:
        raise ManifestError(field, f"must be a valid JSON array: {err}") from None
    if not isinstance(layers, list) or not 1 <= len(layers) <= 3:
        raise ManifestError(field, "topology constraints must contain between 1 and 3 entries")
    out: list[SliceLayer] = []
    for i, layer in enumerate(layers):
        if not isinstance(layer, Mapping):
            raise ManifestError(f"{field}[{i}]", "must be an object with topology and size")
        topology, size = str(layer.get("topology") or ""), layer.get("size")
        if (problem := _label_name_problem(topology)) is not None:
            raise ManifestError(f"{field}[{i}].topology", f"{topology!r}: {problem}")
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ManifestError(
                f"{field}[{i}].size", f"{size!r}: must be greater than or equal to 1"
            )
        if any(prior.level == topology for prior in out):
            raise ManifestError(f"{field}[{i}].topology", f"Duplicate value: {topology}")
        if out and out[-1].size % size:
            raise ManifestError(
                f"{field}[{i}].size",
                f"{size}: must evenly divide the parent layer size {out[-1].size}",
            )
        out.append(SliceLayer(topology, size))
    if out[0].size > count:
        raise ManifestError(field, f"{out[0].size}: must not be greater than pod set count {count}")
    return tuple(out)


def template_topology(template: PodSetTemplate) -> TopologyRequest | None:
    """The topology request of a job's podSet, with its kind's index labels."""
    return request_of(
        template.template,
        template.path,
        template.count,
        pod_index_label=template.pod_index_label,
        sub_group_index_label=template.sub_group_index_label,
        sub_group_count=template.sub_group_count,
    )


def request_json(request: TopologyRequest) -> dict[str, Any]:
    """A topology request as the Workload's spec.podSets[].topologyRequest (v1beta2)."""
    out: dict[str, Any] = {}
    if request.mode == REQUIRED:
        out["required"] = request.level
    elif request.mode == PREFERRED:
        out["preferred"] = request.level
    elif request.mode == UNCONSTRAINED:
        out["unconstrained"] = True
    if request.pod_index_label:
        out["podIndexLabel"] = request.pod_index_label
    if request.sub_group_index_label:
        out["subGroupIndexLabel"] = request.sub_group_index_label
    if request.sub_group_count is not None:
        out["subGroupCount"] = request.sub_group_count
    if request.group:
        out["podSetGroupName"] = request.group
    if len(request.slices) == 1:
        out["podSetSliceRequiredTopology"] = request.slices[0].level
        out["podSetSliceSize"] = request.slices[0].size
    elif request.slices:
        out["podsetSliceRequiredTopologyConstraints"] = [
            {"topology": s.level, "size": s.size} for s in request.slices
        ]
    return out
