"""What `kubectl tower` prints: kubectl's tables, ages and name lines, JSON and YAML."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from extender.kube.api import yaml_text

Obj = dict[str, Any]


class CliError(Exception):
    """One line for the user."""


def one_line(text: str) -> str:
    """A server's message, or any other, on one line."""
    return " ".join(str(text).split())


def human_duration(seconds: float) -> str:
    """kubectl's AGE spelling (apimachinery's HumanDuration): 46s, 5m3s, 2h10m, 3d4h, 2y."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def rounded_age(seconds: float) -> str:
    """An age in its largest whole unit (46s, 5m, 3h, 2d): Tower's own tables (queue,
    forecast), which name a time to the minute."""
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def seconds_of(stamp: Any) -> float | None:
    """An RFC 3339 timestamp as seconds since the epoch; None when absent or unreadable."""
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def age(obj: Mapping[str, Any], now: float) -> str:
    """The AGE column of an object: since its creationTimestamp."""
    created = seconds_of((obj.get("metadata") or {}).get("creationTimestamp"))
    return "<unknown>" if created is None else human_duration(now - created)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns as kubectl aligns them: padded to the widest cell, three spaces apart."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )


def condition_true(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """The object's condition of this type when its status is True."""
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return condition if condition.get("status") == "True" else None
    return None


def emit(data: Any, output: str, render: Callable[[Any], str]) -> str:
    """`-o json|yaml` for scripts, else the rendered text."""
    if output == "json":
        return json.dumps(data, indent=2)
    if output == "yaml":
        return yaml_text.dump(data, sort_keys=False).rstrip()
    return str(render(data))


def name_of(obj: Mapping[str, Any]) -> str:
    """`clusterqueue.kueue.x-k8s.io/NAME`, as kubectl's name printer spells an object."""
    api_version = str(obj.get("apiVersion") or "")
    group = api_version.rpartition("/")[0]
    kind = str(obj.get("kind") or "").lower()
    name = (obj.get("metadata") or {}).get("name")
    return f"{kind}.{group}/{name}" if group else f"{kind}/{name}"


def printed(obj: Obj, output: str | None, operation: str, dry_run: str) -> str:
    """What kueuectl prints after a write: the name line (`... created (server dry run)`),
    the bare name with `-o name`, or the object with `-o json|yaml`."""
    if output in ("json", "yaml"):
        return emit(obj, output, str)
    if output == "name":
        return name_of(obj)
    words = [name_of(obj), operation]
    if dry_run != "none":
        words.append(f"({dry_run} dry run)")
    return " ".join(w for w in words if w)
