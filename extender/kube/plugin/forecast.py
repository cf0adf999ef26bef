"""`kubectl tower forecast`: when each pending workload should start.

From the running jobs' deadlines and expected durations (extender/sim/forecast.py).
"""

from __future__ import annotations

import argparse
import math
from datetime import UTC, datetime
from typing import Any

from extender.core.api.models import QUEUE_NAME_LABEL
from extender.kube.api.client import KubeClient
from extender.kube.api.snapshot import Snapshot, load
from extender.kube.plugin.connect import Invocation
from extender.kube.plugin.kinds import find, job_kinds
from extender.kube.plugin.output import CliError, emit, rounded_age, table
from extender.sim.forecast import Duration, duration_of, forecast, runtimes

Obj = dict[str, Any]


def command_forecast(
    client: KubeClient,
    snapshot: Snapshot,
    args: argparse.Namespace,
    now: float,
    default_namespace: str = "default",
) -> list[Obj]:
    """Estimated start times of the pending workloads (all, a namespace's, or one job's)."""
    state = snapshot.state
    jobs: dict[str, Obj] = {}  # Workload key -> its job, of whatever kind
    for _, resource in job_kinds(client):
        listed, _ = client.list(resource, label_selector=QUEUE_NAME_LABEL)
        for job in listed:
            key = snapshot.by_job_uid.get(str((job.get("metadata") or {}).get("uid")))
            if key:
                jobs[key] = job
    history = runtimes(snapshot.finished.values())

    def duration(key: str) -> Duration:
        obj = snapshot.objects[key]
        queue = f"{obj['metadata']['namespace']}/{(obj.get('spec') or {}).get('queueName')}"
        return duration_of(jobs.get(key), queue, history)

    running = []
    for holder in state.admitted_workloads():
        key = holder.workload.key
        elapsed = max(0.0, now - holder.reserved_at)
        running.append((snapshot.objects[key], holder.admission, elapsed, duration(key)))
    waiting = [workload.key for workload, _ in state.pending()]
    estimates = forecast(state, running, [(snapshot.objects[k], duration(k)) for k in waiting], now)
    only = None
    if args.name:
        found, _kind = find(client, snapshot, args.name, args.namespace or default_namespace)
        meta = found.get("metadata") or {}
        only = snapshot.by_job_uid.get(str(meta.get("uid"))) or (
            f"{meta.get('namespace')}/{meta.get('name')}"
        )
        if only not in estimates:
            raise CliError(f"{args.name} is not pending (kubectl tower why {args.name})")
    rows = []
    for key in sorted(estimates, key=lambda k: (estimates[k].start or math.inf, k)):
        namespace, name = key.split("/", 1)
        if (only and key != only) or (args.namespace and not only and namespace != args.namespace):
            continue
        estimate = estimates[key]
        own = duration(key)
        rows.append(
            {
                "namespace": namespace,
                "workload": name,
                "start": _rfc3339(estimate.start) if estimate.start is not None else None,
                "startsIn": rounded_age(estimate.start - now)
                if estimate.start is not None
                else None,
                "atTheLatest": estimate.at_latest,
                "basis": list(estimate.basis),
                "duration": None if math.isinf(own.seconds) else own.seconds,
                "durationSource": own.source,
            }
        )
    return rows


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(round(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def render_forecast(rows: list[Obj]) -> str:
    if not rows:
        return "No pending workloads."
    lines = []
    for r in rows:
        if r["start"] is None:
            when = "unknown"
        else:
            when = f"{r['start']} (in {r['startsIn']})"
            if r["atTheLatest"]:
                when += " at the latest"
        basis = "; ".join(r["basis"]) or "fits now"
        lines.append([f"{r['namespace']}/{r['workload']}", when, basis, r["durationSource"]])
    return table(["WORKLOAD", "STARTS", "BECAUSE OF", "ITS OWN DURATION"], lines)


def run(inv: Invocation, args: argparse.Namespace) -> str:
    snapshot = load(inv.client, inv.now)
    rows = command_forecast(inv.client, snapshot, args, inv.now, inv.namespace)
    return emit(rows, args.output, render_forecast)


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    forecast_p = sub.add_parser(
        "forecast", parents=[common], help="when each pending workload should start"
    )
    forecast_p.add_argument("name", nargs="?", help="a job of a managed kind, or a Workload")
    forecast_p.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    forecast_p.set_defaults(run=run)
