"""`kubectl tower`: why a job is pending and where it stands in line, read from the cluster.

A kubectl plugin (the console script `kubectl-tower`). It reads the live cluster through the
current kubeconfig (read access only), builds the core's state the controller decides with
(extender/kube/api/snapshot.py), and asks the core: it re-implements no rule. Output is a table,
or `-o json|yaml` for scripts; every error is one line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from extender.core.admission import multikueue
from extender.core.api.models import QUEUE_NAME_LABEL, ClusterQueue, Workload
from extender.core.api.quantity import format_amount
from extender.core.jobframework import registry
from extender.core.jobframework.groups import UNSTAMPED
from extender.kube.api import yaml_text
from extender.kube.api.client import (
    ApiError,
    ConfigError,
    KubeClient,
    KubeError,
    RequestBudget,
    RestClient,
    load_api_client,
)
from extender.kube.api.resources import KUEUE_GROUP, KUEUE_VERSION, PODS, Resource, resource_of
from extender.kube.api.snapshot import Snapshot, load, queue_order
from extender.sim.forecast import Duration, duration_of, forecast, runtimes

Obj = dict[str, Any]


class CliError(Exception):
    """One line for the user."""


def _age(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def _requests(workload: Workload) -> str:
    totals: dict[str, int] = {}
    for ps in workload.pod_sets:
        for r, v in ps.totals.items():
            totals[r] = totals.get(r, 0) + v
    return ",".join(f"{r}={format_amount(r, v)}" for r, v in sorted(totals.items()) if v)


def _totals(workload: Workload) -> dict[str, int]:
    totals: dict[str, int] = {}
    for ps in workload.pod_sets:
        for r, v in ps.totals.items():
            totals[r] = totals.get(r, 0) + v
    return totals


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [list(map(str, headers))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )


# ----- queue ---------------------------------------------------------------------------------


def queue_rows(snapshot: Snapshot, cq_name: str, now: float) -> list[dict[str, Any]]:
    """The pending workloads of a ClusterQueue, in the order the core tries them."""
    state = snapshot.state
    rows = []
    lq_positions: dict[str, int] = {}
    for position, workload in enumerate(queue_order(state, cq_name), start=1):
        lq = f"{workload.namespace}/{workload.queue_name}"
        lq_positions[lq] = lq_positions.get(lq, 0) + 1
        written = snapshot.reason(workload.key)
        status = state.pending_status(workload.key)
        reason, message = written if written else (status.reason, status.message)
        rows.append(
            {
                "positionInClusterQueue": position,
                "positionInLocalQueue": lq_positions[lq],
                "namespace": workload.namespace,
                "workload": workload.name,
                "job": f"{workload.owner_kind}/{workload.owner_name}"
                if workload.owner_name
                else "",
                "localQueue": workload.queue_name,
                "clusterQueue": cq_name,
                "priority": workload.priority,
                "age": _age(now - workload.creation_time),
                "requests": _requests(workload),
                "reason": reason,
                "message": message,
            }
        )
    return rows


def command_queue(snapshot: Snapshot, args: argparse.Namespace, now: float) -> Any:
    state = snapshot.state
    if args.namespace and args.name:
        lq = state.local_queue(f"{args.namespace}/{args.name}")
        if lq is None:
            raise CliError(f"LocalQueue {args.name} not found in namespace {args.namespace}")
        rows = [
            r
            for r in queue_rows(snapshot, lq.cluster_queue, now)
            if r["namespace"] == lq.namespace and r["localQueue"] == lq.name
        ]
    elif args.name:
        if not state.cluster_queue_known(args.name):
            raise CliError(f"ClusterQueue {args.name} not found")
        rows = queue_rows(snapshot, args.name, now)
    else:
        rows = [r for name in state.cluster_queue_names() for r in queue_rows(snapshot, name, now)]
    return rows


def render_queue(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "No pending workloads."
    return _table(
        ["POSITION", "CLUSTERQUEUE", "WORKLOAD", "JOB", "PRIORITY", "AGE", "REQUESTS", "REASON"],
        [
            [
                f"{r['positionInClusterQueue']} ({r['positionInLocalQueue']} in {r['localQueue']})",
                r["clusterQueue"],
                f"{r['namespace']}/{r['workload']}",
                r["job"],
                r["priority"],
                r["age"],
                r["requests"],
                f"{r['reason']}: {r['message']}" if r["message"] else r["reason"],
            ]
            for r in rows
        ],
    )


# ----- why -----------------------------------------------------------------------------------


def _find(client: KubeClient, snapshot: Snapshot, args: argparse.Namespace) -> tuple[Obj, str]:
    """The Job (or JobSet, or Workload) asked about, and its kind."""
    namespace = args.namespace or "default"
    kinds = _job_kinds(client)
    name = args.name
    if "/" in name:  # KIND/NAME, as kubectl takes it: pod/x, jobs/y, rayjob.ray.io/z
        wanted, name = name.split("/", 1)
        word = wanted.split(".", 1)[0].lower()
        kinds = [(k, r) for k, r in kinds if word in (k.lower(), r.plural, r.plural[:-1])]
        if not kinds:
            raise CliError(f"{wanted}: not a kind of job Tower manages here")
    for kind, resource in kinds:
        try:
            return client.get(resource, name, namespace), kind
        except ApiError as err:
            if not err.not_found:
                raise
    key = f"{namespace}/{name}"
    if key in snapshot.objects or key in snapshot.finished:
        return snapshot.objects.get(key) or snapshot.finished[key], "Workload"
    names = ", ".join(kind for kind, _ in kinds)
    raise CliError(f"no {names} or Workload named {name} in namespace {namespace}")


def _job_kinds(client: KubeClient) -> list[tuple[str, Resource]]:
    """Every kind of job Tower has an adapter for that the API server serves, Job first
    (one discovery call per group/version; a name is looked for in each, in this order)."""
    out: list[tuple[str, Resource]] = []
    served: dict[str, frozenset[str] | None] = {}
    for adapter in registry.ADAPTERS.values():
        resource = resource_of(adapter)
        if resource.api_version not in served:
            served[resource.api_version] = client.served(resource.api_version)
        if resource.plural in (served[resource.api_version] or ()):
            out.append((adapter.kind, resource))
    return out


def _why_parent(
    client: KubeClient, snapshot: Snapshot, args: argparse.Namespace, now: float
) -> Obj | None:
    """`why deployment/NAME`: the kind queues its pods one by one, so each pod's answer."""
    if "/" not in args.name:
        return None
    wanted, name = args.name.split("/", 1)
    word = wanted.split(".", 1)[0].lower()
    parent = next(
        (p for p in registry.PARENTS.values() if word in (p.kind.lower(), p.plural, p.plural[:-1])),
        None,
    )
    if parent is None:
        return None
    namespace = args.namespace or "default"
    resource = Resource(parent.group, parent.version, parent.plural, parent.kind, True)
    try:
        obj = client.get(resource, name, namespace)
    except ApiError as err:
        if err.not_found:
            raise CliError(f"no {parent.kind} named {name} in namespace {namespace}") from None
        raise
    if parent.runs_groups:  # a StatefulSet, a LeaderWorkerSet: one Workload per group
        groups_ = [
            why(client, snapshot, argparse.Namespace(**{**vars(args), "name": wl}), now)
            for wl in parent.workload_names(obj)
            if f"{namespace}/{wl}" in snapshot.objects or f"{namespace}/{wl}" in snapshot.finished
        ]
        counted: dict[str, int] = {}
        for answer in groups_:
            counted[answer.get("state", "")] = counted.get(answer.get("state", ""), 0) + 1
        return {
            "kind": parent.kind,
            "namespace": namespace,
            "name": name,
            "state": ", ".join(f"{n} {s}" for s, n in sorted(counted.items())) or "no Workload",
            "reason": f"its pods run as groups, each one Workload ({len(groups_)} now)",
            "workloads": groups_,
        }
    selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    text = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    pods = client.list(PODS, namespace, label_selector=text)[0] if text else []
    answers = []
    for pod in sorted(pods, key=lambda p: str(p["metadata"]["name"])):
        one = argparse.Namespace(**{**vars(args), "name": f"pod/{pod['metadata']['name']}"})
        answers.append(why(client, snapshot, one, now))
    states: dict[str, int] = {}
    for answer in answers:
        states[answer.get("state", "")] = states.get(answer.get("state", ""), 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "no pods"
    return {
        "kind": parent.kind,
        "namespace": namespace,
        "name": name,
        "state": summary,
        "reason": f"each of its pods is its own Workload ({len(answers)} pods)",
        "pods": answers,
    }


def why(client: KubeClient, snapshot: Snapshot, args: argparse.Namespace, now: float) -> Obj:
    state = snapshot.state
    parent = _why_parent(client, snapshot, args, now)
    if parent is not None:
        return parent
    obj, kind = _find(client, snapshot, args)
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    answer: Obj = {"kind": kind, "namespace": namespace, "name": meta.get("name")}
    if kind == "Workload":
        key = f"{namespace}/{meta.get('name')}"
    else:
        key = snapshot.by_job_uid.get(str(meta.get("uid")), "")
        adapter = registry.for_object({**obj, "kind": kind})
        group = adapter.group_of(obj) if adapter is not None else None
        if not key and group is not None and not group[0].startswith(UNSTAMPED):
            key = f"{namespace}/{group[0]}"  # a member of a group: the group's Workload
        labels = meta.get("labels") or {}
        if not key:
            if QUEUE_NAME_LABEL not in labels:
                answer["state"] = "NotQueued"
                answer["reason"] = (
                    f"not queued: it has no {QUEUE_NAME_LABEL} label, so it runs as plain "
                    "Kubernetes runs it (no quota, no waiting)"
                )
                return answer
            answer["state"] = "NoWorkload"
            answer["reason"] = (
                f"queued to LocalQueue {labels[QUEUE_NAME_LABEL]}, but it has no Workload yet: "
                "is Tower's controller running? (kubectl -n tower-system get pods)"
            )
            return answer
    answer["workload"] = key.split("/", 1)[1]
    if key in snapshot.finished:
        answer["state"] = "Finished"
        return answer
    holder = state.admitted_workload(key)
    if holder is not None:
        answer["state"] = "Admitted"
        answer["clusterQueue"] = holder.admission.cluster_queue
        answer["reason"] = f"admitted in ClusterQueue {holder.admission.cluster_queue}"
        status = (snapshot.objects.get(key) or {}).get("status") or {}
        where = multikueue.whereabouts(holder.admission.cluster_queue, status)
        if where is not None:  # a multi-cluster job: where it was sent, who runs it
            answer["reason"], answer["multiKueue"] = where
            if "admittedBy" not in where[1]:
                answer["state"] = "Dispatched"
        return answer
    workload = state.pending_workload(key)
    if workload is None:
        answer["state"] = "Unknown"
        answer["reason"] = snapshot.invalid.get(f"Workload/{key}", "its Workload is not readable")
        return answer
    written = snapshot.reason(key)
    status = state.pending_status(key)
    reason, message = written if written else (status.reason, status.message)
    answer.update(state="Pending", reason=reason, message=message)
    lq = state.local_queue_of(workload)
    cq = state.cluster_queue(lq.cluster_queue) if lq is not None else None
    if lq is None or cq is None:
        answer["message"] = status.message  # the core's: the LocalQueue or its CQ is missing
        return answer
    answer["clusterQueue"] = cq.name
    rows = queue_rows(snapshot, cq.name, now)
    mine = next(
        (r for r in rows if r["namespace"] == namespace and r["workload"] == workload.name), None
    )
    if mine is not None:
        ahead = rows[: mine["positionInClusterQueue"] - 1]
        answer["positionInClusterQueue"] = f"{mine['positionInClusterQueue']} of {len(rows)}"
        in_lq = [r for r in rows if r["localQueue"] == lq.name and r["namespace"] == lq.namespace]
        answer["positionInLocalQueue"] = f"{mine['positionInLocalQueue']} of {len(in_lq)}"
        answer["ahead"] = [
            {"workload": f"{r['namespace']}/{r['workload']}", "priority": r["priority"],
             "requests": r["requests"]}
            for r in ahead
        ]  # fmt: skip
    answer["holding"] = _holders(snapshot, cq, workload)
    answer["preemption"] = _preemption(snapshot, cq, workload)
    answer["borrowing"] = _borrowing(snapshot, cq, workload)
    return answer


def _holders(snapshot: Snapshot, cq: ClusterQueue, workload: Workload) -> list[Obj]:
    """The admitted workloads of its ClusterQueue that would have to finish (or be preempted)
    before it fits, lowest priority and newest first, until the shortfall is covered."""
    state = snapshot.state
    short: dict[Any, int] = {}
    for resource, need in _totals(workload).items():
        group = cq.group_of.get(resource)
        if group is None or not need:
            continue
        frs = [(f.name, resource) for f in cq.resource_groups[group].flavors]
        lacking = [need - state.available_quota(cq.name, fr) for fr in frs]
        if min(lacking) > 0:  # it fits no flavor of the group: the first flavor's shortfall
            short[frs[0]] = lacking[0]
    holders = sorted(state.admitted_in(cq.name), key=lambda h: (h.priority, -h.reserved_at))
    out = []
    for holder in holders:
        if not any(v > 0 for v in short.values()):
            break
        frees = {fr: holder.usage.get(fr, 0) for fr in short if short[fr] > 0}
        if not any(frees.values()):
            continue
        for fr, amount in frees.items():
            short[fr] -= amount
        out.append(
            {
                "workload": holder.workload.key,
                "priority": holder.priority,
                "holds": ",".join(
                    f"{fr[1]}={format_amount(fr[1], a)} ({fr[0]})" for fr, a in frees.items() if a
                ),
            }
        )
    return out


def _preemption(snapshot: Snapshot, cq: ClusterQueue, workload: Workload) -> str:
    within = cq.preemption.within_cluster_queue.value
    reclaim = cq.preemption.reclaim_within_cohort.value
    if within == "Never" and (cq.cohort is None or reclaim == "Never"):
        return (
            f"cannot help: ClusterQueue {cq.name} preempts nothing "
            f"(withinClusterQueue: {within}"
            + (f", reclaimWithinCohort: {reclaim})" if cq.cohort else ")")
        )
    lower = [
        h.workload.key
        for h in snapshot.state.admitted_in(cq.name)
        if h.priority < workload.priority
    ]
    parts = [f"withinClusterQueue: {within}"]
    if within != "Never":
        parts.append(
            f"{len(lower)} admitted workload(s) of lower priority here" if lower
            else f"nothing admitted here has a lower priority than {workload.priority}"
        )  # fmt: skip
    if cq.cohort:
        parts.append(f"reclaimWithinCohort: {reclaim}")
    return "; ".join(parts)


def _borrowing(snapshot: Snapshot, cq: ClusterQueue, workload: Workload) -> str:
    if cq.cohort is None:
        return f"cannot help: ClusterQueue {cq.name} is in no cohort"
    state = snapshot.state
    usage = state.quota_usage(cq.name)
    parts = []
    for resource, need in sorted(_totals(workload).items()):
        group = cq.group_of.get(resource)
        if group is None or not need:
            continue
        flavor = cq.resource_groups[group].flavors[0].name
        fr = (flavor, resource)
        quota = cq.quotas.get(fr)
        own = max(0, (quota.nominal if quota else 0) - usage.get(fr, 0))
        usable = max(0, state.available_quota(cq.name, fr))  # its own and what it may borrow
        lent = max(0, usable - own)
        parts.append(
            f"{format_amount(resource, lent)} {resource} of {flavor} from cohort {cq.cohort} "
            f"now (with its own {format_amount(resource, own)} free: "
            f"{format_amount(resource, usable)} of the {format_amount(resource, need)} it needs)"
        )
    return (
        f"ClusterQueue {cq.name} may borrow " + "; ".join(parts) if parts else "nothing to borrow"
    )


def render_why(answer: Obj) -> str:
    if "pods" in answer:  # a Deployment: its pods, each in turn
        head = f"{answer['kind']} {answer['namespace']}/{answer['name']}"
        parts = [f"{head}\nState:       {answer['state']} — {answer['reason']}"]
        parts += [render_why(pod) for pod in answer["pods"]]
        return "\n\n".join(parts)
    lines = [f"{answer['kind']} {answer['namespace']}/{answer['name']}"]
    if answer.get("workload"):
        lines[0] += f"  (Workload {answer['workload']})"
    state = answer.get("state", "")
    detail = answer.get("message") or answer.get("reason") or ""
    if state == "Pending":
        detail = f"{answer.get('reason')}: {answer.get('message')}"
    lines.append(f"State:       {state}" + (f" — {detail}" if detail else ""))
    if "positionInClusterQueue" in answer:
        lines.append(
            f"Position:    {answer['positionInClusterQueue']} in ClusterQueue "
            f"{answer['clusterQueue']}; {answer['positionInLocalQueue']} in its LocalQueue"
        )
        ahead = answer.get("ahead") or []
        lines.append("Ahead:       " + ("nobody" if not ahead else ""))
        for a in ahead:
            lines.append(f"  {a['workload']} (priority {a['priority']}): {a['requests']}")
    if "holding" in answer:
        holding = answer["holding"]
        lines.append("Must finish or be preempted first: " + ("nothing" if not holding else ""))
        for h in holding:
            lines.append(f"  {h['workload']} (priority {h['priority']}): holds {h['holds']}")
    if "preemption" in answer:
        lines.append(f"Preemption:  {answer['preemption']}")
        lines.append(f"Borrowing:   {answer['borrowing']}")
    return "\n".join(lines)


# ----- forecast ------------------------------------------------------------------------------


def command_forecast(
    client: KubeClient, snapshot: Snapshot, args: argparse.Namespace, now: float
) -> list[Obj]:
    """Estimated start times of the pending workloads (all, a namespace's, or one job's)."""
    state = snapshot.state
    jobs: dict[str, Obj] = {}  # Workload key -> its job, of whatever kind
    for _, resource in _job_kinds(client):
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
        found, _kind = _find(client, snapshot, args)
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
                "startsIn": _age(estimate.start - now) if estimate.start is not None else None,
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
    table = []
    for r in rows:
        if r["start"] is None:
            when = "unknown"
        else:
            when = f"{r['start']} (in {r['startsIn']})"
            if r["atTheLatest"]:
                when += " at the latest"
        basis = "; ".join(r["basis"]) or "fits now"
        table.append([f"{r['namespace']}/{r['workload']}", when, basis, r["durationSource"]])
    return _table(["WORKLOAD", "STARTS", "BECAUSE OF", "ITS OWN DURATION"], table)


# ----- main ----------------------------------------------------------------------------------


def _kubeconfig(flag: str | None) -> str | None:
    if flag:
        return flag
    env = os.environ.get("KUBECONFIG")
    if env:
        return env.split(os.pathsep)[0]
    default = Path.home() / ".kube" / "config"
    return str(default) if default.exists() else None


def _emit(data: Any, output: str, render: Any) -> str:
    if output == "json":
        return json.dumps(data, indent=2)
    if output == "yaml":
        return yaml_text.dump(data, sort_keys=False).rstrip()
    return str(render(data))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kubectl tower", description="Why is my job pending, and where is it in line?"
    )
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    sub = parser.add_subparsers(dest="command", required=True)
    why_p = sub.add_parser(
        "why", help="why a job (Job, JobSet, MPIJob, ...) or Workload is not running"
    )
    why_p.add_argument("name")
    why_p.add_argument("-n", "--namespace", default=None)
    queue_p = sub.add_parser("queue", help="pending workloads in the order they will be tried")
    queue_p.add_argument("name", nargs="?", help="a ClusterQueue (or, with -n, a LocalQueue)")
    queue_p.add_argument("-n", "--namespace", default=None)
    forecast_p = sub.add_parser("forecast", help="when each pending workload should start")
    forecast_p.add_argument("name", nargs="?", help="a job of a managed kind, or a Workload")
    forecast_p.add_argument("-n", "--namespace", default=None)
    for p in (why_p, queue_p, forecast_p):
        p.add_argument("-o", "--output", choices=("table", "json", "yaml"), default=None)
    args = parser.parse_args(argv)
    output = getattr(args, "output", None) or "table"
    try:
        client = RestClient(load_api_client(_kubeconfig(args.kubeconfig)), RequestBudget(50, 100))
        if not client.discover(f"{KUEUE_GROUP}/{KUEUE_VERSION}"):
            raise CliError(
                f"Kueue's CRDs are not installed: the API server does not serve "
                f"{KUEUE_GROUP}/{KUEUE_VERSION} (kubectl apply -f deploy/crds/)"
            )
        now = time.time()
        snapshot = load(client, now)
        if args.command == "why":
            text = _emit(why(client, snapshot, args, now), output, render_why)
        elif args.command == "forecast":
            rows = command_forecast(client, snapshot, args, now)
            text = _emit(rows, output, render_forecast)
        else:
            text = _emit(command_queue(snapshot, args, now), output, render_queue)
    except CliError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except ApiError as err:
        if err.forbidden:
            print(f"error: no access: {err}", file=sys.stderr)
        else:
            print(f"error: {err}", file=sys.stderr)
        return 1
    except KubeError as err:
        print(f"error: cannot reach the API server: {err}", file=sys.stderr)
        return 1
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
