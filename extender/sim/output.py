"""Renders a simulation as JSON or as a timeline plus the tables kubectl would print."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import orjson

from extender.core.scheduling.cycle import ClusterState
from extender.sim.engine import Simulation


def to_json(
    sim: Simulation, pending: list[dict[str, Any]], not_acted_on: Sequence[str] = ()
) -> str:
    """One JSON object: {"events": [...], "pending": [...]} (and "notActedOn": the fields
    Tower does not act on, when the scenario sets any), as `json.dumps(indent=2)` spells
    it. orjson writes the same text twenty times faster, except for non-ASCII text (which
    json escapes) and floats Python spells with an exponent (1e-06 against 1e-6); where
    either occurs, json writes it."""
    data: dict[str, Any] = {"events": sim.events, "pending": pending}
    if not_acted_on:
        data["notActedOn"] = list(not_acted_on)
    if all(t == 0 or 1e-4 <= abs(t) < 1e16 for t in (e["time"] for e in sim.events)):
        text = orjson.dumps(data, option=orjson.OPT_INDENT_2).decode()
        if text.isascii():
            return text
    return json.dumps(data, indent=2, sort_keys=False)


def human_duration(seconds: float) -> str:
    """kubectl's AGE spelling (HumanDuration): 46s, 5m3s, 2h10m, 3d."""
    s = int(seconds)
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
    return f"{hours // 24}d"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns as kubectl aligns them: padded to the widest cell, three spaces apart."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(lines)


def cluster_queue_rows(state: ClusterState) -> list[list[Any]]:
    """`kubectl get clusterqueue -o wide`: NAME COHORT STRATEGY PENDING ADMITTED."""
    rows = []
    for name in state.cluster_queue_names():
        cq = state.cluster_queue(name)
        assert cq is not None
        active, inadmissible = state.pending_in(name)
        admitted = sum(1 for _ in state.admitted_in(name))
        rows.append(
            [name, cq.cohort or "", cq.queueing_strategy.value, active + inadmissible, admitted]
        )
    return rows


def workload_rows(sim: Simulation, namespace: str) -> list[list[Any]]:
    """`kubectl get workloads -n NS`: NAME QUEUE RESERVED IN ADMITTED FINISHED AGE."""
    created: dict[str, float] = {}
    admitted: dict[str, str] = {}
    finished: set[str] = set()
    queue: dict[str, str] = {}
    for event in sim.events:
        if event["namespace"] != namespace or event["workload"] is None:
            continue
        name = event["workload"]
        if event["event"] == "Created":
            created.setdefault(name, event["time"])
        elif event["event"] == "Admitted":
            admitted[name] = event["clusterQueue"]
        elif event["event"] == "Evicted":
            admitted.pop(name, None)
        elif event["event"] == "Finished":
            finished.add(name)
    for key, job in sim.jobs.items():
        if job.namespace == namespace:
            workload = sim.state.workload(key)
            queue[key.split("/", 1)[1]] = (
                workload.queue_name if workload is not None else _queue_label(job.obj)
            )
    rows = []
    for name in sorted(created):
        rows.append(
            [
                name,
                queue.get(name, ""),
                admitted.get(name, ""),
                "True" if name in admitted else "",
                "True" if name in finished else "",
                human_duration(sim.end_time - created[name]),
            ]
        )
    return rows


def _queue_label(obj: dict[str, Any]) -> str:
    if obj.get("kind") == "Workload":
        return str((obj.get("spec") or {}).get("queueName", ""))
    return str(
        ((obj.get("metadata") or {}).get("labels") or {}).get("kueue.x-k8s.io/queue-name", "")
    )


def _describe(event: dict[str, Any]) -> str:
    kind = event["event"]
    if kind == "Admitted":
        flavors = "; ".join(
            f"{ps}: " + ", ".join(f"{r}={f}" for r, f in res.items())
            for ps, res in event["flavors"].items()
        )
        placed = ""
        if event.get("placement"):
            placed = "; on " + ", ".join(
                f"{node}" + (f" x{count}" if count > 1 else "")
                for nodes in event["placement"].values()
                for node, count in nodes.items()
            )
        return f"in {event['clusterQueue']} ({flavors}){placed}"
    if kind == "Evicted":
        why = event.get("preemptionReason")
        whom = f" [room made for {event['preemptor']}]" if event.get("preemptor") else ""
        return f"{event['reason']}{f' ({why})' if why else ''}: {event['message']}{whom}"
    if kind == "Pending":
        return f"{event['reason']}: {event['message']}"
    if kind == "Finished":
        return str(event.get("reason", ""))
    if kind == "Created" and event.get("managed") is False:
        return "not queued: no kueue.x-k8s.io/queue-name label, runs as plain Kubernetes would"
    return ""


def to_table(
    sim: Simulation, pending: list[dict[str, Any]], not_acted_on: Sequence[str] = ()
) -> str:
    """What Tower does not act on (if anything), a human timeline, then the ClusterQueue and
    Workload tables at the end."""
    out = []
    if not_acted_on:
        out.append("Not acted on by Tower (docs/kueue-fields.md):")
        out.extend(f"  {line}" for line in not_acted_on)
        out.append("")
    out.append("Timeline (virtual seconds):")
    rows = []
    for event in sim.events:
        where = f"{event['namespace']}/" if event["namespace"] else ""
        who = f"{event['kind']} {where}{event['name']}"
        rows.append([f"{event['time']:.1f}s", event["event"], who, _describe(event)])
    out.append(table(["TIME", "EVENT", "JOB", "DETAILS"], rows))
    out.append("")
    out.append(f"At the end (t={sim.end_time:.1f}s):")
    out.append("$ kubectl get clusterqueue -o wide")
    out.append(
        table(
            ["NAME", "COHORT", "STRATEGY", "PENDING WORKLOADS", "ADMITTED WORKLOADS"],
            cluster_queue_rows(sim.state),
        )
    )
    for namespace in sorted({job.namespace for job in sim.jobs.values()}):
        out.append("")
        out.append(f"$ kubectl get workloads -n {namespace}")
        out.append(
            table(
                ["NAME", "QUEUE", "RESERVED IN", "ADMITTED", "FINISHED", "AGE"],
                workload_rows(sim, namespace),
            )
        )
    if pending:
        out.append("")
        out.append("Never admitted:")
        out.append(
            table(
                ["WORKLOAD", "REASON", "MESSAGE"],
                [[f"{p['namespace']}/{p['workload']}", p["reason"], p["message"]] for p in pending],
            )
        )
    return "\n".join(out) + "\n"
