"""`kubectl tower list clusterqueue|localqueue|workload|resourceflavor`: kueuectl's lists.

With its flags, its filters, its columns and its "No resources found" lines.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

from extender.kube.api.client import ApiError
from extender.kube.api.resources import CLUSTER_QUEUES, LOCAL_QUEUES, RESOURCE_FLAVORS, WORKLOADS
from extender.kube.api.snapshot import load
from extender.kube.plugin import kinds
from extender.kube.plugin.connect import Invocation, PluginClient
from extender.kube.plugin.output import (
    CliError,
    age,
    condition_true,
    emit,
    human_duration,
    name_of,
    seconds_of,
    table,
)
from extender.kube.plugin.queue import NotServedError, pending_in_local_queue, queue_rows
from extender.kube.plugin.queue import visibility_served as visibility_not_served

Obj = dict[str, Any]

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
STATUSES = ("all", "pending", "quotareserved", "admitted", "finished")
_BOOLS = {"1": True, "t": True, "true": True, "0": False, "f": False, "false": False}
_JOB_TYPE_WIDTH = 20  # kueuectl cuts a JOB TYPE longer than this, and adds "..."


def _scope(inv: Invocation, args: argparse.Namespace) -> str | None:
    return None if getattr(args, "all_namespaces", False) else inv.namespace


def shown(
    inv: Invocation,
    listed: Obj,
    args: argparse.Namespace,
    namespace: str | None,
    render: Callable[[list[Obj]], str],
) -> str:
    """The list as -o asks: the List object (json, yaml), its names, or the table."""
    items = listed["items"]
    if not items:
        inv.none_found(namespace)
    if args.output in ("json", "yaml"):
        return emit(listed, args.output, str)
    if not items:
        return ""
    if args.output == "name":
        return "\n".join(name_of(item) for item in items)
    return render(items)


def _with_namespace(
    args: argparse.Namespace, headers: list[str], rows: list[list[Any]], items: list[Obj]
) -> str:
    if getattr(args, "all_namespaces", False):
        headers = ["NAMESPACE", *headers]
        rows = [
            [item["metadata"].get("namespace", ""), *row]
            for row, item in zip(rows, items, strict=True)
        ]
    return table(headers, rows)


# ----- clusterqueue --------------------------------------------------------------------------


def list_cluster_queues(inv: Invocation, args: argparse.Namespace) -> str:
    active = _active(args.active)
    listed = inv.client.list_selected(
        CLUSTER_QUEUES,
        label_selector=args.selector,
        field_selector=args.field_selector,
        page=inv.page,
    )
    if active is not None:
        listed["items"] = [
            cq for cq in listed["items"] if (condition_true(cq, "Active") is not None) == active
        ]

    def render(items: list[Obj]) -> str:
        rows = [
            [
                cq["metadata"]["name"],
                (cq.get("spec") or {}).get("cohortName") or "",
                (cq.get("status") or {}).get("pendingWorkloads") or 0,
                (cq.get("status") or {}).get("admittedWorkloads") or 0,
                str(condition_true(cq, "Active") is not None).lower(),
                age(cq, inv.now),
            ]
            for cq in items
        ]
        headers = ["NAME", "COHORT", "PENDING WORKLOADS", "ADMITTED WORKLOADS", "ACTIVE", "AGE"]
        return table(headers, rows)

    return shown(inv, listed, args, None, render)


def _active(values: list[str] | None) -> bool | None:
    if not values:
        return None
    if len(values) > 1:
        raise CliError("--active: only one active flag can be provided")
    value = _BOOLS.get(values[0].lower())
    if value is None:
        raise CliError(f"--active {values[0]}: must be true or false")
    return value


# ----- localqueue ----------------------------------------------------------------------------


def list_local_queues(inv: Invocation, args: argparse.Namespace) -> str:
    namespace = _scope(inv, args)
    listed = inv.client.list_selected(
        LOCAL_QUEUES,
        namespace,
        label_selector=args.selector,
        field_selector=args.field_selector,
        page=inv.page,
    )
    if args.clusterqueue:
        listed["items"] = [
            lq
            for lq in listed["items"]
            if (lq.get("spec") or {}).get("clusterQueue") == args.clusterqueue
        ]

    def render(items: list[Obj]) -> str:
        rows = [
            [
                lq["metadata"]["name"],
                (lq.get("spec") or {}).get("clusterQueue") or "",
                (lq.get("status") or {}).get("pendingWorkloads") or 0,
                (lq.get("status") or {}).get("admittedWorkloads") or 0,
                age(lq, inv.now),
            ]
            for lq in items
        ]
        headers = ["NAME", "CLUSTERQUEUE", "PENDING WORKLOADS", "ADMITTED WORKLOADS", "AGE"]
        return _with_namespace(args, headers, rows, items)

    return shown(inv, listed, args, namespace, render)


# ----- resourceflavor ------------------------------------------------------------------------


def list_resource_flavors(inv: Invocation, args: argparse.Namespace) -> str:
    listed = inv.client.list_selected(
        RESOURCE_FLAVORS,
        label_selector=args.selector,
        field_selector=args.field_selector,
        page=inv.page,
    )

    def render(items: list[Obj]) -> str:
        rows = []
        for rf in items:
            labels = (rf.get("spec") or {}).get("nodeLabels") or {}
            shown_labels = ", ".join(sorted(f"{k}={v}" for k, v in labels.items()))
            rows.append([rf["metadata"]["name"], shown_labels, age(rf, inv.now)])
        return table(["NAME", "NODE LABELS", "AGE"], rows)

    return shown(inv, listed, args, None, render)


# ----- workload ------------------------------------------------------------------------------


def workload_status(wl: Mapping[str, Any]) -> str:
    """Kueue's status of a Workload: finished, admitted, quotaReserved or pending."""
    if condition_true(wl, "Finished"):
        return "finished"
    if condition_true(wl, "Admitted"):
        return "admitted"
    if condition_true(wl, "QuotaReserved"):
        return "quotaReserved"
    return "pending"


def _statuses(values: list[str] | None) -> set[str]:
    wanted = set()
    for value in values or []:
        if value.lower() not in STATUSES:
            raise CliError(
                f'--status {value}: invalid status value. Must be "all", "pending", '
                '"quotareserved", "admitted" or "finished"'
            )
        wanted.add(value.lower())
    return set() if "all" in wanted else wanted


def list_workloads(inv: Invocation, args: argparse.Namespace) -> str:
    client = inv.client
    namespace = _scope(inv, args)
    statuses = _statuses(args.status)
    selector = args.selector or ""
    owner_uid = None
    if args.for_object:
        _, found = kinds.find_for(client, args.for_object, namespace)
        if found is None:
            inv.none_found(namespace)
            return ""
        owner_uid = str(found["metadata"].get("uid") or "")
        uid_selector = f"{JOB_UID_LABEL}={owner_uid}"
        selector = f"{selector},{uid_selector}" if selector else uid_selector
    page = inv.page
    listed = client.list_selected(
        WORKLOADS, namespace, label_selector=selector, field_selector=args.field_selector, page=page
    )
    if owner_uid is not None and not listed["items"]:
        # A Workload made before the job-uid label was stamped: found by its owner.
        listed = client.list_selected(
            WORKLOADS,
            namespace,
            label_selector=args.selector,
            field_selector=args.field_selector,
            page=page,
        )
        listed["items"] = [
            wl
            for wl in listed["items"]
            if any(r.get("uid") == owner_uid for r in wl["metadata"].get("ownerReferences") or [])
        ]
    listed["items"] = [
        wl
        for wl in listed["items"]
        if (not args.localqueue or (wl.get("spec") or {}).get("queueName") == args.localqueue)
        and (not args.clusterqueue or _admitted_to(wl) == args.clusterqueue)
        and (not statuses or workload_status(wl).lower() in statuses)
    ]
    return shown(inv, listed, args, namespace, lambda items: _workload_table(inv, args, items))


def _admitted_to(wl: Mapping[str, Any]) -> str:
    return str(((wl.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")


def _workload_table(inv: Invocation, args: argparse.Namespace, items: list[Obj]) -> str:
    cluster_queues = _cluster_queues(inv.client, items)
    positions = _positions(inv, items)
    types = _JobTypes(inv.client)
    rows = []
    for wl in items:
        meta = wl["metadata"]
        owners = [r for r in meta.get("ownerReferences") or [] if isinstance(r, Mapping)]
        key = (str(meta.get("namespace")), str(meta["name"]))
        rows.append(
            [
                meta["name"],
                ", ".join(sorted({t for t in map(types.of, owners) if t})),
                ", ".join(sorted({str(r.get("name")) for r in owners})),
                (wl.get("spec") or {}).get("queueName") or "",
                _admitted_to(wl) or cluster_queues.get(_queue_key(wl), ""),
                workload_status(wl).upper(),
                positions.get(key, ""),
                _exec_time(wl, inv.now),
                age(wl, inv.now),
            ]
        )
    headers = ["NAME", "JOB TYPE", "JOB NAME", "LOCALQUEUE", "CLUSTERQUEUE", "STATUS"]
    headers += ["POSITION IN QUEUE", "EXEC TIME", "AGE"]
    return _with_namespace(args, headers, rows, items)


def _queue_key(wl: Mapping[str, Any]) -> tuple[str, str]:
    return str(wl["metadata"].get("namespace")), str((wl.get("spec") or {}).get("queueName"))


def _cluster_queues(client: PluginClient, items: list[Obj]) -> dict[tuple[str, str], str]:
    """The ClusterQueue of each LocalQueue named by a Workload not admitted yet."""
    out: dict[tuple[str, str], str] = {}
    for wl in items:
        key = _queue_key(wl)
        if _admitted_to(wl) or key in out:
            continue
        try:
            lq = client.get(LOCAL_QUEUES, key[1], key[0])
            out[key] = str((lq.get("spec") or {}).get("clusterQueue") or "")
        except ApiError as err:
            if not (err.not_found or err.forbidden):
                raise
            out[key] = ""
    return out


def _positions(inv: Invocation, items: list[Obj]) -> dict[tuple[str, str], str]:
    """Each pending Workload's position in its LocalQueue (from 0, as Kueue counts): from
    the visibility API, else computed client-side when this user may read the cluster."""
    queues = sorted({_queue_key(wl) for wl in items if workload_status(wl) == "pending"})
    if not queues:
        return {}
    out: dict[tuple[str, str], str] = {}
    why_not = visibility_not_served(inv.client)
    if why_not is None:
        try:
            for namespace, name in queues:
                try:
                    for item in pending_in_local_queue(inv.client, namespace, name):
                        meta = item.get("metadata") or {}
                        key = (namespace, str(meta.get("name")))
                        out[key] = str(int(item.get("positionInLocalQueue") or 0))
                except CliError:
                    continue  # a LocalQueue that does not exist has no positions
            inv.note("positions from Kueue's visibility API")
            return out
        except NotServedError as err:
            why_not = str(err)
    try:
        snapshot = load(inv.client, inv.now)
    except ApiError as err:
        if not err.forbidden:
            raise
        inv.note(f"no positions: the visibility API cannot be asked ({why_not}) nor the cluster")
        return {}
    inv.note(f"positions computed client-side: the visibility API cannot be asked ({why_not})")
    for name in snapshot.state.cluster_queue_names():
        for row in queue_rows(snapshot, name, inv.now):
            key = (row["namespace"], row["workload"])
            out[key] = str(row["positionInLocalQueue"] - 1)
    return out


def _exec_time(wl: Mapping[str, Any], now: float) -> str:
    admitted = condition_true(wl, "Admitted")
    if admitted is None:
        return ""
    start = seconds_of(admitted.get("lastTransitionTime"))
    if start is None:
        return ""
    finished = condition_true(wl, "Finished")
    end = seconds_of(finished.get("lastTransitionTime")) if finished else None
    return human_duration((end if end is not None else now) - start)


class _JobTypes:
    """JOB TYPE: an owner's kind as discovery names it (`job`, `jobset`), as kueuectl shows."""

    def __init__(self, client: PluginClient) -> None:
        self.client = client
        self.served: dict[str, list[Obj]] = {}

    def of(self, owner: Mapping[str, Any]) -> str:
        api_version = str(owner.get("apiVersion") or "")
        if api_version not in self.served:
            try:
                self.served[api_version] = self.client.api_resources(api_version) or []
            except ApiError:
                self.served[api_version] = []
        for entry in self.served[api_version]:
            if entry.get("kind") == owner.get("kind") and entry.get("singularName"):
                text = ".".join(p for p in (entry["singularName"], entry.get("group")) if p)
                return text if len(text) <= _JOB_TYPE_WIDTH else f"{text[:_JOB_TYPE_WIDTH]}..."
        return ""


# ----- the verb ------------------------------------------------------------------------------


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    from extender.kube.plugin.pods import list_pods  # its module imports this one's helpers

    verb: argparse.ArgumentParser = sub.add_parser(
        "list", help="list queues, flavors, workloads or a job's pods"
    )
    kinds_p = verb.add_subparsers(dest="kind", required=True, metavar="KIND")

    def kind(name: str, aliases: list[str], run: Any, help_text: str) -> argparse.ArgumentParser:
        p = kinds_p.add_parser(name, aliases=aliases, parents=[common], help=help_text)
        p.add_argument("-l", "--selector", default="", help="label query (e.g. -l key=value)")
        p.add_argument("--field-selector", default="", help="field query (e.g. metadata.name=x)")
        p.add_argument("-o", "--output", choices=("json", "yaml", "name"), default=None)
        p.set_defaults(run=run)
        return p

    def every_namespace(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "-A", "--all-namespaces", action="store_true", help="in every namespace (not -n)"
        )

    cq = kind("clusterqueue", ["cq", "clusterqueues"], list_cluster_queues, "List ClusterQueues")
    cq.add_argument("--active", action="append", help="only active (true) or inactive (false)")
    lq = kind("localqueue", ["lq", "localqueues"], list_local_queues, "List LocalQueues")
    every_namespace(lq)
    lq.add_argument("-c", "--clusterqueue", default="", help="only those of this ClusterQueue")
    wl = kind(
        "workload",
        ["wl", "workloads", "kwl", "kueueworkload", "kueueworkloads"],
        list_workloads,
        "List Workloads",
    )
    every_namespace(wl)
    wl.add_argument("-c", "--clusterqueue", default="", help="only those admitted to it")
    wl.add_argument("-q", "--localqueue", default="", help="only those queued to it")
    wl.add_argument(
        "--status", action="append", help="all, pending, quotareserved, admitted or finished"
    )
    wl.add_argument("--for", dest="for_object", default="", help="TYPE[.API-GROUP]/NAME")
    kind("resourceflavor", ["rf", "resourceflavors"], list_resource_flavors, "List ResourceFlavors")
    pods = kinds_p.add_parser(
        "pods", aliases=["po", "pod"], parents=[common], help="List the pods of a job"
    )
    every_namespace(pods)
    pods.add_argument("-l", "--selector", default="", help="label query (e.g. -l key=value)")
    pods.add_argument("--field-selector", default="", help="field query")
    pods.add_argument(
        "--for", dest="for_object", required=True, help="TYPE[.API-GROUP]/NAME (e.g. job/x)"
    )
    pods.add_argument("-o", "--output", choices=("json", "yaml", "name", "wide"), default=None)
    pods.set_defaults(run=list_pods)
