"""Kueue's annotation keys that Tower does not read, and the line the webhook says of each.

A manifest written for Kueue may carry one of Kueue's keys for a feature Tower does not have
yet (priority boost) or one of Kueue's own internal marks. It
is accepted unchanged, but never silently: the webhook warns at apply time, naming the key and
what follows from Tower not reading it. tests/test_kueue_keys.py walks every key Kueue
documents and holds each to a test that shows Tower acting on it or warning about it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

WORKLOAD = "Workload"


def _any_value(value: str) -> bool:
    return True


def _true(value: str) -> bool:
    return value == "true"


@dataclass(frozen=True, slots=True)
class UnreadKey:
    """One annotation key of Kueue's that Tower does not read, and on what it is warned."""

    key: str
    kinds: tuple[str, ...]  # the kinds it is warned on; () for every kind of job, a Pod included
    feature: str  # what Kueue uses the key for
    consequence: str  # what a user sees instead, Tower not reading it
    counts: Callable[[str], bool] = _any_value  # whether a value found uses the feature

    def applies_to(self, kind: str) -> bool:
        return kind in self.kinds if self.kinds else kind != WORKLOAD

    def message(self, kind: str, name: str) -> str:
        """One line for a user: the object, the key, and what follows from it."""
        return (
            f"{kind} {name}: metadata.annotations[{self.key}] ({self.feature}) is not acted on "
            f"by Tower; {self.consequence}"
        )


UNREAD: tuple[UnreadKey, ...] = (
    UnreadKey(
        "kueue.x-k8s.io/priority-boost",
        (WORKLOAD,),
        "priority boost, Kueue's PriorityBoost gate, alpha and off by default",
        "the workload's priority is its priority class's",
    ),
    UnreadKey(
        "kueue.x-k8s.io/stopping",
        ("Job",),
        "Kueue's own mark while it stops a Job",
        "Tower stops and resumes a Job by its spec.suspend alone",
    ),
)


def _annotation_maps(obj: Any) -> Iterator[Mapping[str, Any]]:
    """The object's annotations and those of every pod template in its spec, where a key
    Kueue reads from a pod is written by a job's author."""
    if not isinstance(obj, Mapping):
        return
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    if isinstance(annotations, Mapping):
        yield annotations
    for name, value in obj.items():
        if name in ("metadata", "status"):
            continue
        if isinstance(value, Mapping):
            yield from _annotation_maps(value)
        elif isinstance(value, list):
            for item in value:
                yield from _annotation_maps(item)


def warnings(kind: str, obj: Mapping[str, Any], name: str) -> list[str]:
    """What the webhook says at apply time: one line for each of these keys the manifest of
    `kind` sets (on itself, or on a pod template in its spec)."""
    entries = [e for e in UNREAD if e.applies_to(kind)]
    if not entries:
        return []
    found: dict[str, bool] = {}
    for found_on in _annotation_maps(obj):
        for entry in entries:
            value = found_on.get(entry.key)
            if isinstance(value, str) and entry.counts(value):
                found[entry.key] = True
    return [e.message(kind, name) for e in entries if e.key in found]
