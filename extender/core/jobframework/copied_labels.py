"""Kueue's integrations.labelKeysToCopy: which of a job's labels its Workload is made with.

Kueue copies them once, when it makes the Workload, and never again (a label changed later
stays behind). A key the job does not carry is left out. A pod group's members may each carry
a key or not; those that do must agree, else the group gets no Workload (Kueue's
"constructing workload: pods have different label values"). A StatefulSet's Workload gets
none: Kueue makes it without them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any


def copied(labels: Any, keys: Collection[str]) -> dict[str, str]:
    """The labels among `keys` that a job carries, as its Workload gets them."""
    if not keys or not isinstance(labels, Mapping):
        return {}
    return {k: str(labels[k]) for k in sorted(keys) if k in labels}


def from_members(
    members: Iterable[tuple[str, Any]],
    keys: Collection[str],
    what: str = "label",
    setting: str = "integrations.labelKeysToCopy",
) -> tuple[dict[str, str], str | None]:
    """The labels (or annotations: `what`) a pod group's Workload gets from its members, given
    as (name, labels), or why it gets none: the first key two members give different values."""
    out: dict[str, str] = {}
    first: dict[str, str] = {}  # which member gave each key its value
    for name, labels in members:
        for key, value in copied(labels, keys).items():
            if key in out and out[key] != value:
                return {}, (
                    f"pods {first[key]} and {name} have different values of {what} {key}: "
                    f"{out[key]}!={value} ({setting})"
                )
            out.setdefault(key, value)
            first.setdefault(key, name)
    return out, None
