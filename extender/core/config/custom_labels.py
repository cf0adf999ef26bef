"""Kueue's metrics.customLabels (feature gate CustomMetricLabels): checked, and read from objects.

Each entry names a label or an annotation of a ClusterQueue, LocalQueue, Cohort or Workload
whose value Kueue adds to its metrics as the Prometheus label `custom_<name>`. A value not
among an entry's trackedValues (when it has some) is reported as Kueue's untracked mark, so a
label cannot grow a metric's series without bound. Entries of kind Workload also name what a
job's Workload is made with: their label keys join integrations.labelKeysToCopy, and their
annotation keys are copied the same way (Kueue's getLabelsAndAnnotationsToCopy).

Checked as Kueue v0.19.2 checks them (pkg/config/validation.go validateCustomLabels), the
first error in its words: at most 20 entries; a name matching ^[a-zA-Z][a-zA-Z0-9_]*$, once;
sourceLabelKey and sourceAnnotationKey not both; the key read (the name when neither is set)
a valid label key; for a Workload 1 to 12 trackedValues, else at most 16; no value twice; at
most 2 entries of kind Workload and 6 of each other kind.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.core.config.device_classes import label_key_errors
from extender.core.config.schema import ConfigError

PATH = "metrics.customLabels"
GATE = "CustomMetricLabels"
COHORT, LOCAL_QUEUE, CLUSTER_QUEUE, WORKLOAD = "Cohort", "LocalQueue", "ClusterQueue", "Workload"
DEFAULT_SOURCE_KIND = CLUSTER_QUEUE
UNTRACKED = "kueue.x-k8s.io/_UNTRACKED_VALUE_"  # Kueue's UntrackedCustomLabelValue
MAX_ENTRIES = 20
MAX_TRACKED = 16
MAX_TRACKED_WORKLOAD = 12
MAX_PER_KIND = {WORKLOAD: 2, LOCAL_QUEUE: 6, CLUSTER_QUEUE: 6, COHORT: 6}
_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]*$")


@dataclass(frozen=True, slots=True)
class CustomLabel:
    """One entry: where its value is read, and the metric label it becomes."""

    name: str
    source_kind: str = DEFAULT_SOURCE_KIND
    source_label_key: str = ""
    source_annotation_key: str = ""
    tracked_values: tuple[str, ...] = ()  # empty: any value (not for a Workload)

    @property
    def metric_label(self) -> str:
        return f"custom_{self.name}"

    @property
    def from_annotation(self) -> bool:
        return bool(self.source_annotation_key)

    @property
    def source_key(self) -> str:
        """The label or annotation key read: the name when the entry names neither."""
        return self.source_annotation_key or self.source_label_key or self.name

    def value(self, labels: Mapping[str, str], annotations: Mapping[str, str]) -> str:
        """The metric label's value for an object with these labels and annotations: "" when
        it has none, Kueue's untracked mark for a value not tracked."""
        found = (annotations if self.from_annotation else labels).get(self.source_key, "")
        if self.tracked_values and found not in self.tracked_values:
            return UNTRACKED
        return found


@dataclass(frozen=True, slots=True)
class CustomLabels:
    """The checked entries, in the file's order, and what the gate lets Tower do with them."""

    entries: tuple[CustomLabel, ...] = ()
    enabled: bool = False  # the CustomMetricLabels gate

    def of_kind(self, kind: str) -> tuple[CustomLabel, ...]:
        return tuple(e for e in self.entries if e.source_kind == kind) if self.enabled else ()

    def label_names(self, kind: str) -> tuple[str, ...]:
        """The extra Prometheus labels of a metric about an object of this kind."""
        return tuple(e.metric_label for e in self.of_kind(kind))

    def values(
        self, kind: str, labels: Mapping[str, str], annotations: Mapping[str, str]
    ) -> tuple[str, ...]:
        """The extra labels' values for one object of this kind, in label_names' order."""
        return tuple(e.value(labels, annotations) for e in self.of_kind(kind))

    def workload_label_keys(self) -> tuple[str, ...]:
        """Label keys a job's Workload is made with, beyond integrations.labelKeysToCopy."""
        return tuple(e.source_key for e in self.of_kind(WORKLOAD) if not e.from_annotation)

    def workload_annotation_keys(self) -> tuple[str, ...]:
        """Annotation keys a job's Workload is made with."""
        return tuple(e.source_key for e in self.of_kind(WORKLOAD) if e.from_annotation)

    def label_keys_to_copy(self, configured: Collection[str]) -> tuple[str, ...]:
        """integrations.labelKeysToCopy with the Workload entries' label keys, once each."""
        return tuple(dict.fromkeys((*configured, *self.workload_label_keys())))


def _invalid(path: str, value: Any, detail: str) -> ConfigError:
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    return ConfigError(f"{path}: Invalid value: {shown}: {detail}")


def _entry(index: int, raw: Mapping[str, Any], seen: set[str]) -> CustomLabel:
    path = f"{PATH}[{index}]"
    name = str(raw.get("name") or "")
    if not _NAME.match(name):
        raise _invalid(f"{path}.name", name, "must match ^[a-zA-Z][a-zA-Z0-9_]*$")
    if name in seen:
        raise ConfigError(f'{path}.name: Duplicate value: "{name}"')
    seen.add(name)
    label_key = str(raw.get("sourceLabelKey") or "")
    annotation_key = str(raw.get("sourceAnnotationKey") or "")
    if label_key and annotation_key:
        raise _invalid(path, name, "sourceLabelKey and sourceAnnotationKey are mutually exclusive")
    field, key = (
        ("sourceLabelKey", label_key)
        if label_key
        else ("sourceAnnotationKey", annotation_key)
        if annotation_key
        else ("name", name)
    )
    errors = label_key_errors(key)
    if errors:
        raise _invalid(f"{path}.{field}", key, "; ".join(errors))
    kind = str(raw.get("sourceKind") or DEFAULT_SOURCE_KIND)
    tracked = tuple(str(v) for v in raw.get("trackedValues") or ())
    if kind == WORKLOAD:
        if not tracked:
            raise _invalid(
                f"{path}.trackedValues", [], "must not be empty when sourceKind is 'Workload'"
            )
        if len(tracked) > MAX_TRACKED_WORKLOAD:
            raise _invalid(
                f"{path}.trackedValues",
                list(tracked),
                f"must not be greater than {MAX_TRACKED_WORKLOAD} when sourceKind is 'Workload'",
            )
    elif len(tracked) > MAX_TRACKED:
        raise ConfigError(
            f"{path}.trackedValues: Too many: {len(tracked)}: must have at most {MAX_TRACKED} items"
        )
    if len(set(tracked)) < len(tracked):
        raise _invalid(f"{path}.trackedValues", list(tracked), "must not contain duplicates")
    return CustomLabel(name, kind, label_key, annotation_key, tracked)


def parse(raw: Sequence[Mapping[str, Any]] | None, *, enabled: bool) -> CustomLabels:
    """The entries of metrics.customLabels (the schema has checked their types), or
    ConfigError with Kueue's first complaint. Checked whether the gate is on or not, as
    Kueue does; acted on only when it is."""
    items = list(raw or ())
    if len(items) > MAX_ENTRIES:
        raise ConfigError(f"{PATH}: Too many: {len(items)}: must have at most {MAX_ENTRIES} items")
    seen: set[str] = set()
    entries = tuple(_entry(i, item, seen) for i, item in enumerate(items))
    counts: dict[str, int] = {}
    for entry in entries:
        counts[entry.source_kind] = counts.get(entry.source_kind, 0) + 1
    for kind in sorted(counts):
        limit = MAX_PER_KIND.get(kind)
        if limit is None:
            raise ConfigError(f"{PATH}: Invalid value: unknown source kind: {kind}")
        if counts[kind] > limit:
            raise ConfigError(
                f"{PATH}: Invalid value: too many custom labels for source kind {kind}: "
                f"found {counts[kind]}, expected <= {limit}"
            )
    return CustomLabels(entries, enabled)
