"""`kubectl tower why NAME`: why a job (or Workload) is not running, and what would help.

It reads the live cluster through the current kubeconfig (read access only), builds the
core's state the controller decides with (extender/kube/api/snapshot.py), and asks the core:
it re-implements no rule.
"""

from __future__ import annotations

import argparse
from typing import Any

from extender.core.admission import exec_time, multikueue
from extender.core.api.admission_gates import ADMISSION_GATED, ADMISSION_GATED_BY, gates
from extender.core.api.models import QUEUE_NAME_LABEL, ClusterQueue, Workload
from extender.core.api.quantity import format_amount
from extender.core.jobframework import dra, registry
from extender.core.jobframework.groups import UNSTAMPED
from extender.kube.api import objects as o
from extender.kube.api.client import ApiError, KubeClient
from extender.kube.api.kueue_lease import KUEUE_LEASE, live_now
from extender.kube.api.resources import PODS, WORKLOADS, Resource
from extender.kube.api.snapshot import Snapshot, load
from extender.kube.plugin.connect import Invocation
from extender.kube.plugin.kinds import find
from extender.kube.plugin.output import CliError, emit
from extender.kube.plugin.queue import queue_rows, totals

Obj = dict[str, Any]


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


def _deactivated(client: KubeClient, key: str) -> Obj | None:
    """A Workload set inactive (no queue holds it): stopped, and why, from its Evicted
    condition; its execution-time limit said in full."""
    namespace, name = key.split("/", 1)
    try:
        obj = client.get(WORKLOADS, name, namespace)
    except ApiError:
        return None
    spec = obj.get("spec") or {}
    if spec.get("active") is not False:
        return None
    evicted = o.condition(obj, o.EVICTED) or {}
    reason = str(evicted.get("reason") or "Deactivated")
    message = str(evicted.get("message") or "The workload is deactivated")
    if reason.endswith(exec_time.EXCEEDED):
        limit = spec.get("maximumExecutionTimeSeconds")
        past = (obj.get("status") or {}).get(o.EXECUTED)
        message = exec_time.stopped_reason(
            limit if isinstance(limit, int) else None,
            past if isinstance(past, int) else None,
            namespace,
            name,
        )
    return {"state": "Deactivated", "reason": reason, "message": message}


def why(client: KubeClient, snapshot: Snapshot, args: argparse.Namespace, now: float) -> Obj:
    state = snapshot.state
    parent = _why_parent(client, snapshot, args, now)
    if parent is not None:
        return parent
    obj, kind = find(client, snapshot, args.name, args.namespace or "default")
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
        stopped = _deactivated(client, key)
        if stopped is not None:
            answer.update(stopped)
            return answer
        answer["state"] = "Unknown"
        answer["reason"] = snapshot.invalid.get(f"Workload/{key}", "its Workload is not readable")
        return answer
    written = snapshot.reason(key)
    status = state.pending_status(key)
    reason, message = written if written else (status.reason, status.message)
    answer.update(state="Pending", reason=reason, message=message)
    if written and dra.is_refusal(message):  # its claimed devices (DRA): in no queue
        return answer
    if workload.admission_gated_by:  # in no queue: no position, and quota would not help
        names = gates(workload.admission_gated_by)
        answer.update(
            reason=ADMISSION_GATED,
            message=f"held by an admission gate: {', '.join(names)} (each controller named in "
            f"{ADMISSION_GATED_BY} takes its own name off; it is queued once none is left)",
            gatedBy=list(names),
        )
        return answer
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
    for resource, need in totals(workload).items():
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
    for resource, need in sorted(totals(workload).items()):
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
    if answer.get("admitter"):
        lines.append(f"Admitter:    {answer['admitter']}")
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


def run(inv: Invocation, args: argparse.Namespace) -> str:
    args.namespace = inv.namespace
    snapshot = load(inv.client, inv.now)
    answer = why(inv.client, snapshot, args, inv.now)
    if answer.get("state") not in ("Admitted", "Dispatched", "Finished", "NotQueued"):
        kueue = live_now(inv.client, KUEUE_LEASE, inv.now)
        if kueue is not None:  # Tower stands down: nothing is admitted until Kueue stops
            answer["admitter"] = kueue
    return emit(answer, args.output, render_why)


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    why_p = sub.add_parser(
        "why",
        parents=[common],
        help="why a job (Job, JobSet, MPIJob, ...) or Workload is not running",
    )
    why_p.add_argument("name", help="NAME or KIND/NAME (job/x, deployment/y, workload name)")
    why_p.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    why_p.set_defaults(run=run)
