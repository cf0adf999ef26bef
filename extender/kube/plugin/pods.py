"""`kubectl tower list pods --for KIND/NAME`: a job's pods, or a pod group's.

Found by the labels Kueue's integration for the kind gives, shown in kubectl's pod columns.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from extender.kube.api.resources import PODS
from extender.kube.plugin import kinds
from extender.kube.plugin.connect import Invocation
from extender.kube.plugin.output import CliError, age, emit, human_duration, name_of, seconds_of
from extender.kube.plugin.output import table as aligned

Obj = dict[str, Any]


def list_pods(inv: Invocation, args: argparse.Namespace) -> str:
    namespace = None if args.all_namespaces else inv.namespace
    kind, found = kinds.find_for(inv.client, args.for_object, namespace)
    if found is None:
        inv.none_found(namespace, period=True)
        return ""
    selector = kinds.pod_selector(kind, found)
    if not selector:
        raise CliError(f"--for {args.for_object}: unsupported kind: {kind}")
    if args.selector:
        selector = f"{args.selector},{selector}"
    listed = inv.client.list_selected(
        PODS,
        namespace,
        label_selector=selector,
        field_selector=args.field_selector,
        page=inv.page,
    )
    pods = listed["items"]
    if not pods:
        inv.none_found(namespace, period=True)
        if args.output not in ("json", "yaml"):
            return ""
    if args.output in ("json", "yaml"):
        return emit({"apiVersion": "v1", "kind": "List", "items": pods}, args.output, str)
    if args.output == "name":
        return "\n".join(name_of(pod) for pod in pods)
    headers = ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    if args.output == "wide":
        headers += ["IP", "NODE", "NOMINATED NODE", "READINESS GATES"]
    rows = [_row(pod, inv.now, wide=args.output == "wide") for pod in pods]
    if args.all_namespaces:
        headers = ["NAMESPACE", *headers]
        rows = [[p["metadata"].get("namespace", ""), *r] for p, r in zip(pods, rows, strict=True)]
    return aligned(headers, rows)


def _row(pod: Mapping[str, Any], now: float, *, wide: bool) -> list[Any]:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    statuses = [s for s in status.get("containerStatuses") or [] if isinstance(s, Mapping)]
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts, last_restart = 0, None
    for s in statuses:
        restarts += int(s.get("restartCount") or 0)
        ended = seconds_of(((s.get("lastState") or {}).get("terminated") or {}).get("finishedAt"))
        if ended is not None and (last_restart is None or ended > last_restart):
            last_restart = ended
    shown_restarts = str(restarts)
    if restarts and last_restart is not None:
        shown_restarts += f" ({human_duration(now - last_restart)} ago)"
    row: list[Any] = [
        pod["metadata"]["name"],
        f"{ready}/{len(spec.get('containers') or [])}",
        pod_status(pod),
        shown_restarts,
        age(pod, now),
    ]
    if wide:
        gates = spec.get("readinessGates") or []
        conditions = {
            c.get("type"): c.get("status")
            for c in status.get("conditions") or []
            if isinstance(c, Mapping)
        }
        passed = sum(1 for g in gates if conditions.get(g.get("conditionType")) == "True")
        row += [
            status.get("podIP") or "<none>",
            spec.get("nodeName") or "<none>",
            status.get("nominatedNodeName") or "<none>",
            f"{passed}/{len(gates)}" if gates else "<none>",
        ]
    return row


def pod_status(pod: Mapping[str, Any]) -> str:
    """The STATUS column as kubectl computes it: the phase, or what holds the pod back
    (SchedulingGated, Init:0/1, ContainerCreating, CrashLoopBackOff, Completed, ...)."""
    status = pod.get("status") or {}
    reason = str(status.get("reason") or status.get("phase") or "")
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    inits = [s for s in status.get("initContainerStatuses") or [] if isinstance(s, Mapping)]
    total_inits = len((pod.get("spec") or {}).get("initContainers") or [])
    initializing = False
    for index, init in enumerate(inits):
        state = init.get("state") or {}
        terminated = state.get("terminated") or {}
        waiting = state.get("waiting") or {}
        if terminated and terminated.get("exitCode") == 0:
            continue
        if terminated:
            reason = "Init:" + _ended(terminated)
        elif waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{index}/{total_inits}"
        initializing = True
        break
    if not initializing:
        running = False
        for container in reversed(status.get("containerStatuses") or []):
            state = container.get("state") or {}
            if (state.get("waiting") or {}).get("reason"):
                reason = str(state["waiting"]["reason"])
            elif state.get("terminated"):
                reason = _ended(state["terminated"])
            elif state.get("running") and container.get("ready"):
                running = True
        if reason == "Completed" and running:
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or []
            )
            reason = "Running" if ready else "NotReady"
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    return reason


def _ended(terminated: Mapping[str, Any]) -> str:
    if terminated.get("reason"):
        return str(terminated["reason"])
    if terminated.get("signal"):
        return f"Signal:{terminated['signal']}"
    return f"ExitCode:{terminated.get('exitCode', 0)}"
