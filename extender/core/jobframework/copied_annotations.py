"""The annotations a job's Workload is made with: those metrics.customLabels of kind Workload read.

With Kueue's CustomMetricLabels gate on, an entry of sourceKind Workload that reads an
annotation has it copied from the job to its Workload when the Workload is made, as
labelKeysToCopy's labels are. A pod group's members may each carry the annotation or not;
those that do must agree, else the group gets no Workload (Kueue's "constructing workload:
pods have different annotation values").
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from extender.core.jobframework import copied_labels


def from_members(
    members: Iterable[tuple[str, Any]], keys: Collection[str]
) -> tuple[dict[str, str], str | None]:
    """The annotations a pod group's Workload gets from its members, given as (name,
    annotations), or why it gets none: the first key two members give different values."""
    return copied_labels.from_members(members, keys, "annotation", "metrics.customLabels")
