"""`kubectl tower queue`: the pending workloads in the order they will be tried.

With `-n NS` it asks Kueue's visibility API (a LocalQueue's pendingworkloads), so a user whose
rights stop at their namespace sees their line; when the cluster does not serve that API it
computes the same order client-side from every Workload, as it does for a ClusterQueue.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from extender.core.api.models import Workload
from extender.core.api.quantity import format_amount
from extender.core.jobframework.workloads import workload as parse_workload
from extender.kube.api.client import ApiError
from extender.kube.api.resources import LOCAL_QUEUES, WORKLOADS, Resource
from extender.kube.api.snapshot import Snapshot, load, queue_order
from extender.kube.plugin.connect import Invocation, PluginClient
from extender.kube.plugin.output import CliError, emit, rounded_age, seconds_of, table

Obj = dict[str, Any]

VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
VISIBILITY_VERSION = "v1beta2"
VISIBILITY_LOCAL_QUEUES = Resource(
    VISIBILITY_GROUP, VISIBILITY_VERSION, "localqueues", "LocalQueue", True
)
VISIBILITY_CLUSTER_QUEUES = Resource(
    VISIBILITY_GROUP, VISIBILITY_VERSION, "clusterqueues", "ClusterQueue", False
)
_PAGE = 1000  # the API's default limit: more are read with an offset


def totals(workload: Workload) -> dict[str, int]:
    """What all its pods request together, per resource (accounted amounts)."""
    out: dict[str, int] = {}
    for ps in workload.pod_sets:
        for r, v in ps.totals.items():
            out[r] = out.get(r, 0) + v
    return out


def requests(workload: Workload) -> str:
    """`cpu=3,memory=2Gi`: its requests as the REQUESTS column spells them."""
    return ",".join(f"{r}={format_amount(r, v)}" for r, v in sorted(totals(workload).items()) if v)


def queue_rows(snapshot: Snapshot, cq_name: str, now: float) -> list[Obj]:
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
                "age": rounded_age(now - workload.creation_time),
                "requests": requests(workload),
                "reason": reason,
                "message": message,
            }
        )
    return rows


def command_queue(snapshot: Snapshot, args: argparse.Namespace, now: float) -> list[Obj]:
    """The rows computed client-side: a LocalQueue's (-n NS NAME), a namespace's (-n NS), a
    ClusterQueue's (NAME) or every ClusterQueue's."""
    state = snapshot.state
    if args.namespace and args.name:
        lq = state.local_queue(f"{args.namespace}/{args.name}")
        if lq is None:
            raise CliError(f"LocalQueue {args.name} not found in namespace {args.namespace}")
        return [
            r
            for r in queue_rows(snapshot, lq.cluster_queue, now)
            if r["namespace"] == lq.namespace and r["localQueue"] == lq.name
        ]
    if args.name:
        if not state.cluster_queue_known(args.name):
            raise CliError(f"ClusterQueue {args.name} not found")
        return queue_rows(snapshot, args.name, now)
    rows = [r for name in state.cluster_queue_names() for r in queue_rows(snapshot, name, now)]
    if args.namespace:
        rows = [r for r in rows if r["namespace"] == args.namespace]
    return rows


def render_queue(rows: list[Obj]) -> str:
    if not rows:
        return "No pending workloads."
    return table(
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


# ----- the visibility API --------------------------------------------------------------------


class NotServedError(Exception):
    """The cluster does not serve the visibility API (or not this version of it)."""


def visibility_served(client: PluginClient) -> str | None:
    """Why the visibility API cannot be asked (None: it can): discovery without the group,
    or an aggregated API that is unavailable."""
    group_version = f"{VISIBILITY_GROUP}/{VISIBILITY_VERSION}"
    try:
        served = client.api_resources(group_version)
    except ApiError as err:
        if err.status == 503:
            return f"{group_version} is unavailable (503)"
        raise
    if served is None:
        return f"discovery has no {group_version}"
    names = {str(r.get("name")) for r in served}
    if not names & {"localqueues/pendingworkloads", "localqueues"}:
        return f"{group_version} serves no localqueues/pendingworkloads"
    return None


def pending_in_local_queue(client: PluginClient, namespace: str, name: str) -> list[Obj]:
    """Every PendingWorkload of a LocalQueue, read `_PAGE` at a time. Raises NotServedError when
    the path is not served (404 without a Status, or 503), CliError for an unknown queue."""
    items: list[Obj] = []
    while True:
        try:
            summary = client.get_subresource(
                VISIBILITY_LOCAL_QUEUES,
                name,
                namespace,
                "pendingworkloads",
                {"limit": _PAGE, "offset": len(items)},
            )
        except ApiError as err:
            if err.status == 404 and _names_a_queue(err):
                raise CliError(f"LocalQueue {name} not found in namespace {namespace}") from None
            if err.status in (404, 503):
                raise NotServedError(f"GET pendingworkloads answered {err.status}") from None
            raise
        page = [i for i in summary.get("items") or [] if isinstance(i, dict)]
        items.extend(page)
        if len(page) < _PAGE:
            return items


def _names_a_queue(err: ApiError) -> bool:
    """A 404 Status the visibility API gives for a queue it does not know (a path it does not
    serve is a 404 without one)."""
    body = err.body if isinstance(err.body, Mapping) else {}
    details = body.get("details") or {}
    return body.get("reason") == "NotFound" and "queue" in str(details.get("kind", "")).lower()


def _owner(meta: Mapping[str, Any]) -> str:
    refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, Mapping)]
    ref = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    return f"{ref.get('kind')}/{ref.get('name')}" if ref else ""


def _why_waiting(obj: Mapping[str, Any]) -> tuple[str, str]:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "QuotaReserved" and condition.get("status") == "False":
            return str(condition.get("reason") or ""), str(condition.get("message") or "")
    return "", ""


def _readable(client: PluginClient, resource: Resource, namespace: str) -> list[Obj] | None:
    """The namespace's objects, or None when this user may not list them."""
    try:
        return list(client.list_selected(resource, namespace)["items"])
    except ApiError as err:
        if err.forbidden:
            return None
        raise


def api_rows(inv: Invocation, namespace: str, name: str | None) -> list[Obj]:
    """A LocalQueue's rows (every LocalQueue of the namespace without a name) from the
    visibility API; the requests and reasons come from the namespace's Workloads when this
    user may read them."""
    client = inv.client
    queues = _readable(client, LOCAL_QUEUES, namespace) or []
    cluster_queue = {
        str(q["metadata"]["name"]): str((q.get("spec") or {}).get("clusterQueue") or "")
        for q in queues
    }
    names = [name] if name else sorted(cluster_queue)
    pending = {lq: pending_in_local_queue(client, namespace, lq) for lq in names}
    workloads = {
        str(w["metadata"]["name"]): w for w in _readable(client, WORKLOADS, namespace) or []
    }
    rows = []
    for lq, items in pending.items():
        for item in items:
            meta = item.get("metadata") or {}
            created = seconds_of(meta.get("creationTimestamp"))
            obj = workloads.get(str(meta.get("name")))
            reason, message = _why_waiting(obj) if obj else ("", "")
            rows.append(
                {
                    "positionInClusterQueue": int(item.get("positionInClusterQueue") or 0) + 1,
                    "positionInLocalQueue": int(item.get("positionInLocalQueue") or 0) + 1,
                    "namespace": str(meta.get("namespace") or namespace),
                    "workload": str(meta.get("name") or ""),
                    "job": _owner(meta),
                    "localQueue": str(item.get("localQueueName") or lq),
                    "clusterQueue": cluster_queue.get(lq, ""),
                    "priority": int(item.get("priority") or 0),
                    "age": rounded_age(inv.now - created) if created is not None else "",
                    "requests": _requests_of(obj),
                    "reason": reason,
                    "message": message,
                }
            )
    rows.sort(key=lambda r: (r["clusterQueue"], r["positionInClusterQueue"]))
    return rows


def _requests_of(obj: Obj | None) -> str:
    if obj is None:
        return ""
    try:
        return requests(parse_workload(obj))
    except ValueError:
        return ""


def run(inv: Invocation, args: argparse.Namespace) -> str:
    # Only a namespace given with -n makes NAME a LocalQueue (queue NAME is a ClusterQueue's).
    namespace = args.namespace if inv.namespace_given else None
    if namespace:
        why_not = visibility_served(inv.client)
        if why_not is None:
            try:
                rows = api_rows(inv, namespace, args.name)
                inv.note(
                    f"positions from Kueue's visibility API ({VISIBILITY_GROUP}/"
                    f"{VISIBILITY_VERSION}, LocalQueue pendingworkloads)"
                )
                return emit(rows, args.output, render_queue)
            except NotServedError as err:
                why_not = str(err)
        inv.note(f"the visibility API cannot be asked ({why_not}): computed client-side")
    else:
        inv.note("computed client-side from every Workload, Namespace and ClusterQueue")
    snapshot = load(inv.client, inv.now)
    return emit(command_queue(snapshot, args, inv.now), args.output, render_queue)


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    queue_p = sub.add_parser(
        "queue",
        parents=[common],
        help="pending workloads in the order they will be tried",
        description="Pending workloads in the order they will be tried: a ClusterQueue's "
        "(NAME), a LocalQueue's (-n NS NAME), a namespace's (-n NS) or all.",
    )
    queue_p.add_argument("name", nargs="?", help="a ClusterQueue (or, with -n, a LocalQueue)")
    queue_p.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    queue_p.set_defaults(run=run)
