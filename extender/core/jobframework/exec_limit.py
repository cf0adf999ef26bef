"""A job's max-exec-time-seconds label, as Kueue's webhook checks it and its reconciler reads it."""

from __future__ import annotations

import re
from collections.abc import Mapping

# The job's label; its Workload's spec.maximumExecutionTimeSeconds is read from it at creation.
LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
LABEL_PATH = f'metadata.labels["{LABEL}"]'

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
# What Go's strconv.Atoi reads: an optional sign, then decimal digits (no spaces, no '_').
_DECIMAL = re.compile(r"[+-]?[0-9]+")


def label_problem(value: str) -> str | None:
    """Kueue's create-time check of the label's value: a whole number above 0. The message
    is Kueue's (field.Invalid: the value, then why)."""
    if not _DECIMAL.fullmatch(value):
        return f'Invalid value: "{value}": strconv.Atoi: parsing "{value}": invalid syntax'
    number = int(value)
    if abs(number) > _INT64_MAX:
        return f'Invalid value: "{value}": strconv.Atoi: parsing "{value}": value out of range'
    if number <= 0:
        return f"Invalid value: {number}: should be greater than 0"
    return None


def label_change_problem(old: str | None, new: str | None, suspended: bool) -> str | None:
    """Kueue's update-time rule: the label may change only while the job is suspended, before
    and after the update (`suspended` says both were)."""
    if suspended or (old or "") == (new or ""):
        return None
    return f'Invalid value: "{new or ""}": field is immutable'


def limit_of(labels: Mapping[str, object]) -> int | None:
    """The Workload's spec.maximumExecutionTimeSeconds for a job with these labels: None when
    the label is absent or not a positive 32-bit number, as Kueue reads it."""
    value = labels.get(LABEL)
    if not isinstance(value, str) or not _DECIMAL.fullmatch(value):
        return None
    number = int(value)
    return number if 0 < number <= _INT32_MAX else None
