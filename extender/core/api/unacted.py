"""Kueue's fields that Tower accepts but does not act on, and what each does to admission.

A manifest written for Kueue applies unchanged, but a field that would change who is admitted
is never ignored silently: a ClusterQueue that uses one is inactive and admits nothing (as
Kueue's is with a missing AdmissionCheck), a Workload that uses one waits, and both say
which field it is. A field that is only a hint is accepted and listed here as such. The
webhook warns at apply time, the simulator reports them, and docs/kueue-fields.md lists them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Effect(StrEnum):
    INACTIVE = "makes its ClusterQueue inactive"
    WAITS = "makes the workload wait"
    HINT = "accepted, not acted on"


def _is_set(value: Any) -> bool:
    return value is not None and value != [] and value != {} and value != ""


@dataclass(frozen=True, slots=True)
class Unacted:
    """One field Tower does not act on: where it is, what using it does, and why."""

    kind: str
    path: str  # as in the manifest: spec.preemptionGates
    effect: Effect
    feature: str  # Kueue's name for what the field is for
    advice: str = ""  # what to do instead, when Tower has something
    label: str = ""  # how a message names the field, when its path is too long to read
    counts: Callable[[Any], bool] = _is_set  # whether a value found there uses the feature
    gate: str = ""  # the Kueue feature gate with which Tower acts on it after all
    # The path split once: its names, and the map key it ends in (an annotation's), if any.
    parts: tuple[str, ...] = field(init=False, repr=False, compare=False)
    key: str | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        path, key = self.path, None
        if path.endswith('"]'):
            path, key = path[:-2].split('["')
        object.__setattr__(self, "parts", tuple(path.split(".")))
        object.__setattr__(self, "key", key)

    def message(self, name: str) -> str:
        """One line for a user: the object, the field, and what follows from it."""
        what = self.label or self.path
        line = f"{self.kind} {name}: {what} ({self.feature}) is not acted on by Tower"
        if self.gate:
            line += f" without the {self.gate} feature gate"
        if self.effect is Effect.INACTIVE and self.kind == "ResourceFlavor":
            line += "; ClusterQueues using this flavor admit nothing while it is set"
        elif self.effect is Effect.INACTIVE:
            line += "; the ClusterQueue admits nothing while it is set"
        elif self.effect is Effect.WAITS:
            line += "; the workload waits while it is set"
        return line + (f"; {self.advice}" if self.advice else "")


UNACTED: tuple[Unacted, ...] = (
    Unacted(
        "ClusterQueue",
        "spec.concurrentAdmissionPolicy",
        Effect.INACTIVE,
        "concurrent admission for flavor migration",
        gate="ConcurrentAdmission",
    ),
    Unacted(
        "Workload",
        "spec.preemptionGates",
        Effect.WAITS,
        "preemption gates",
    ),
)


def _values(obj: Any, parts: tuple[str, ...]) -> list[Any]:
    """Every value at a dotted path, `[]` stepping into each element of a list."""
    if not parts:
        return [obj]
    head, rest = parts[0], parts[1:]
    many = head.endswith("[]")
    value = obj.get(head[:-2] if many else head) if isinstance(obj, Mapping) else None
    if many:
        items = value if isinstance(value, list) else []
        return [v for item in items for v in _values(item, rest)]
    return _values(value, rest)


def _in_use(entry: Unacted, obj: Mapping[str, Any]) -> bool:
    values = _values(obj, entry.parts)
    if entry.key is not None:  # one key of a map: an annotation
        values = [m.get(entry.key) for m in values if isinstance(m, Mapping)]
    return any(entry.counts(v) for v in values)


_BY_KIND: dict[str, tuple[Unacted, ...]] = {}
for _entry in UNACTED:
    _BY_KIND[_entry.kind] = (*_BY_KIND.get(_entry.kind, ()), _entry)


def used(kind: str, obj: Mapping[str, Any]) -> tuple[Unacted, ...]:
    """The fields of `UNACTED` that this manifest of `kind` sets."""
    return tuple(f for f in _BY_KIND.get(kind, ()) if _in_use(f, obj))


def blocking(kind: str, obj: Mapping[str, Any]) -> tuple[str, ...]:
    """The paths of the fields it sets that stop admission."""
    return tuple(f.path for f in used(kind, obj) if f.effect in (Effect.INACTIVE, Effect.WAITS))


def warnings(
    kind: str, obj: Mapping[str, Any], name: str, gates: Mapping[str, bool] | None = None
) -> list[str]:
    """What the webhook says at apply time: one line for each field set that Tower does not
    act on (with these feature gates) and that changes what happens (a hint is only
    documented)."""
    on = gates or {}
    return [
        f.message(name)
        for f in used(kind, obj)
        if f.effect is not Effect.HINT and not (f.gate and on.get(f.gate))
    ]
