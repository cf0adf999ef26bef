"""`kubectl tower create clusterqueue|localqueue|resourceflavor NAME`, as kueuectl creates.

The objects are those kueuectl's create makes from its flags, checked by the rules Tower's
webhook applies before one is sent.
"""

from __future__ import annotations

import argparse
from typing import Any

from extender.core.api import parse
from extender.core.api.models import QueueingStrategy, ReclaimWithinCohort, WithinClusterQueue
from extender.kube.api.client import ApiError
from extender.kube.api.resources import (
    CLUSTER_QUEUES,
    KUEUE_GROUP,
    KUEUE_VERSION,
    LOCAL_QUEUES,
    RESOURCE_FLAVORS,
    Resource,
)
from extender.kube.plugin import specs
from extender.kube.plugin.connect import Invocation
from extender.kube.plugin.hold import add_dry_run
from extender.kube.plugin.output import CliError, printed

Obj = dict[str, Any]
API_VERSION = f"{KUEUE_GROUP}/{KUEUE_VERSION}"


def _choice(flag: str, value: str | None, allowed: list[str], default: str) -> str:
    if value is None:
        return default
    if value not in allowed:
        raise CliError(f"--{flag} {value}: must be {', '.join(allowed[:-1])} or {allowed[-1]}")
    return value


def cluster_queue(args: argparse.Namespace) -> Obj:
    """The ClusterQueue kueuectl makes: BestEffortFIFO, preempting nothing, open to every
    namespace (an empty selector) unless the flags say otherwise."""
    spec: Obj = {}
    groups = specs.resource_groups(
        {
            specs.NOMINAL: args.nominal_quota,
            specs.BORROWING: args.borrowing_limit,
            specs.LENDING: args.lending_limit,
        }
    )
    if groups:
        spec["resourceGroups"] = groups
    if args.cohort:
        spec["cohortName"] = args.cohort
    spec["queueingStrategy"] = _choice(
        "queuing-strategy",
        args.queuing_strategy,
        [s.value for s in QueueingStrategy],
        QueueingStrategy.BEST_EFFORT_FIFO.value,
    )
    labels = specs.key_values("namespace-selector", args.namespace_selector)
    spec["namespaceSelector"] = {"matchLabels": labels} if labels else {}
    spec["preemption"] = {
        "reclaimWithinCohort": _choice(
            "reclaim-within-cohort",
            args.reclaim_within_cohort,
            [p.value for p in ReclaimWithinCohort],
            ReclaimWithinCohort.NEVER.value,
        ),
        "withinClusterQueue": _choice(
            "preemption-within-cluster-queue",
            args.preemption_within_cluster_queue,
            [p.value for p in WithinClusterQueue],
            WithinClusterQueue.NEVER.value,
        ),
    }
    obj = {"apiVersion": API_VERSION, "kind": "ClusterQueue", "metadata": {"name": args.name}}
    return obj | {"spec": spec}


def local_queue(args: argparse.Namespace, namespace: str) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": args.name, "namespace": namespace},
        "spec": {"clusterQueue": args.clusterqueue},
    }


def resource_flavor(args: argparse.Namespace) -> Obj:
    spec: Obj = {}
    labels = specs.key_values("node-labels", args.node_labels)
    if labels:
        spec["nodeLabels"] = labels
    taints = specs.taints(args.node_taints)
    if taints:
        spec["nodeTaints"] = taints
    tolerations = specs.tolerations(args.tolerations)
    if tolerations:
        spec["tolerations"] = tolerations
    obj = {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": args.name}}
    return obj | {"spec": spec}


def _checked(obj: Obj, label: str) -> None:
    """Kueue's validation of the object (Tower's webhook applies the same rules)."""
    kind = obj["kind"]
    try:
        if kind == "ClusterQueue":
            parse.cluster_queue(obj)
        elif kind == "LocalQueue":
            parse.local_queue(obj)
        else:
            parse.resource_flavor(obj)
    except parse.ManifestError as err:
        raise CliError(f"{kind} {label}: {err}") from None


def _create(inv: Invocation, args: argparse.Namespace, resource: Resource, obj: Obj) -> str:
    if args.dry_run != "client":
        namespace = obj["metadata"].get("namespace")
        obj = inv.client.create_object(resource, obj, namespace, dry_run=args.dry_run == "server")
    return printed(obj, args.output, "created", args.dry_run)


def _labelled(kind: str, label: str, build: Any, *build_args: Any) -> Obj:
    """Build the object; a flag's error names the object it was for."""
    try:
        obj: Obj = build(*build_args)
    except CliError as err:
        raise CliError(f"{kind} {label}: {err}") from None
    _checked(obj, label)
    return obj


def create_cluster_queue(inv: Invocation, args: argparse.Namespace) -> str:
    obj = _labelled("ClusterQueue", args.name, cluster_queue, args)
    return _create(inv, args, CLUSTER_QUEUES, obj)


def create_local_queue(inv: Invocation, args: argparse.Namespace) -> str:
    label = f"{inv.namespace}/{args.name}"
    obj = _labelled("LocalQueue", label, local_queue, args, inv.namespace)
    if not args.ignore_unknown_cq:
        try:
            inv.client.get(CLUSTER_QUEUES, args.clusterqueue)
        except ApiError as err:
            if not err.not_found:
                raise
            raise CliError(
                f"LocalQueue {label}: --clusterqueue {args.clusterqueue}: ClusterQueue "
                f"{args.clusterqueue} not found (--ignore-unknown-cq to create it anyway)"
            ) from None
    return _create(inv, args, LOCAL_QUEUES, obj)


def create_resource_flavor(inv: Invocation, args: argparse.Namespace) -> str:
    obj = _labelled("ResourceFlavor", args.name, resource_flavor, args)
    return _create(inv, args, RESOURCE_FLAVORS, obj)


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    verb: argparse.ArgumentParser = sub.add_parser(
        "create", help="create a ClusterQueue, LocalQueue or ResourceFlavor"
    )
    kinds = verb.add_subparsers(dest="kind", required=True, metavar="KIND")

    def kind(name: str, alias: str, run: Any) -> argparse.ArgumentParser:
        p = kinds.add_parser(name, aliases=[alias], parents=[common], help=f"create a {name}")
        p.add_argument("name")
        add_dry_run(p)
        p.add_argument("-o", "--output", choices=("json", "yaml", "name"), default=None)
        p.set_defaults(run=run)
        return p

    quota = "FLAVOR:RESOURCE=QUANTITY[;RESOURCE=QUANTITY...][,FLAVOR:...]"
    cq = kind("clusterqueue", "cq", create_cluster_queue)
    cq.add_argument("--cohort", default="", help="the cohort it belongs to")
    cq.add_argument("--queuing-strategy", help="StrictFIFO or BestEffortFIFO (the default)")
    cq.add_argument(
        "--namespace-selector", action="append", help="KEY=VALUE,...: the namespaces it serves"
    )
    cq.add_argument("--reclaim-within-cohort", help="Never (the default), LowerPriority or Any")
    cq.add_argument(
        "--preemption-within-cluster-queue",
        help="Never (the default), LowerPriority or LowerOrNewerEqualPriority",
    )
    cq.add_argument("--nominal-quota", action="append", metavar="SPEC", help=quota)
    cq.add_argument("--borrowing-limit", action="append", metavar="SPEC", help=quota)
    cq.add_argument("--lending-limit", action="append", metavar="SPEC", help=quota)
    lq = kind("localqueue", "lq", create_local_queue)
    lq.add_argument("-c", "--clusterqueue", required=True, help="its ClusterQueue")
    lq.add_argument(
        "-i", "--ignore-unknown-cq", action="store_true", help="even if the ClusterQueue is missing"
    )
    rf = kind("resourceflavor", "rf", create_resource_flavor)
    rf.add_argument("--node-labels", action="append", help="KEY=VALUE,...")
    rf.add_argument("--node-taints", action="append", help="KEY[=VALUE]:EFFECT,...")
    rf.add_argument("--tolerations", action="append", help="KEY[=VALUE][:EFFECT],... or :EFFECT")
