"""`kubectl tower stop|resume clusterqueue|localqueue|workload NAME`: kueuectl's hold, release.

A queue is held by its spec.stopPolicy (Hold keeps what already runs, HoldAndDrain evicts it
too; None releases it); a Workload by spec.active, which evicts it when admitted.
"""

from __future__ import annotations

import argparse
import copy
from typing import Any

from extender.core.api.models import StopPolicy
from extender.kube.api.client import ApiError
from extender.kube.api.resources import CLUSTER_QUEUES, LOCAL_QUEUES, WORKLOADS, Resource
from extender.kube.plugin.connect import Invocation
from extender.kube.plugin.output import CliError, printed

Obj = dict[str, Any]


def _change(
    inv: Invocation, args: argparse.Namespace, resource: Resource, spec: Obj, operation: str
) -> str:
    """Read the object, set the spec fields, and write them with one merge patch (not with
    --dry-run=client; the server keeps nothing with --dry-run=server)."""
    namespace = inv.namespace if resource.namespaced else None
    where = f" in namespace {namespace}" if namespace else ""
    try:
        current = inv.client.get(resource, args.name, namespace)
    except ApiError as err:
        if err.not_found:
            raise CliError(f"{resource.kind} {args.name} not found{where}") from None
        raise
    if args.dry_run == "client":
        changed = copy.deepcopy(current)
        changed.setdefault("spec", {}).update(spec)
    else:
        changed = inv.client.patch_object(
            resource, args.name, {"spec": spec}, namespace, dry_run=args.dry_run == "server"
        )
    return printed(changed, args.output, operation, args.dry_run)


def stop(inv: Invocation, args: argparse.Namespace) -> str:
    if args.resource is WORKLOADS:
        return _change(inv, args, WORKLOADS, {"active": False}, "stopped")
    policy = StopPolicy.HOLD if args.keep_already_running else StopPolicy.HOLD_AND_DRAIN
    return _change(inv, args, args.resource, {"stopPolicy": policy.value}, "")


def resume(inv: Invocation, args: argparse.Namespace) -> str:
    if args.resource is WORKLOADS:
        return _change(inv, args, WORKLOADS, {"active": True}, "resumed")
    return _change(inv, args, args.resource, {"stopPolicy": StopPolicy.NONE.value}, "")


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    for verb, run, text in (
        ("stop", stop, "hold a queue or a Workload"),
        ("resume", resume, "release a held queue or Workload"),
    ):
        verb_p: argparse.ArgumentParser = sub.add_parser(verb, help=text)
        kinds = verb_p.add_subparsers(dest="kind", required=True, metavar="KIND")
        for name, aliases, resource in (
            ("clusterqueue", ["cq"], CLUSTER_QUEUES),
            ("localqueue", ["lq"], LOCAL_QUEUES),
            ("workload", ["wl", "kwl", "kueueworkload", "kueueworkloads"], WORKLOADS),
        ):
            p = kinds.add_parser(name, aliases=aliases, parents=[common], help=f"{verb} a {name}")
            p.add_argument("name")
            if verb == "stop" and resource is not WORKLOADS:
                p.add_argument(
                    "--keep-already-running",
                    action="store_true",
                    help="keep its admitted workloads running (stopPolicy Hold, not HoldAndDrain)",
                )
            add_dry_run(p)
            p.add_argument("-o", "--output", choices=("json", "yaml", "name"), default=None)
            p.set_defaults(run=run, resource=resource)


def add_dry_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dry-run",
        choices=("none", "client", "server"),
        default="none",
        help="client: print the object without sending it; server: send it, keep nothing",
    )
