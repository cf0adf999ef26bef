"""`kubectl tower handback --to kueue`: the cluster back to Kueue, as Kueue v0.19.2 adopts it.

Tower writes Kueue's API, so the Workloads, queues and jobs stay as they are; what goes back
is the plumbing: Tower's controller stops, Tower's webhooks go, the CRDs convert through
Kueue's Service again, and Kueue's webhook configurations (as takeover kept them) return.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from extender.kube.api.client import KubeClient
from extender.kube.api.kueue_lease import KUEUE_DEPLOYMENT
from extender.kube.plugin.connect import Invocation
from extender.kube.plugin.kueue_switch import (
    BLOCKED,
    CONFIG_MAPS,
    DEPLOYMENTS,
    DONE,
    KUEUE_NAMESPACE,
    KUEUE_SECRET,
    KUEUE_SERVICE,
    KUEUE_WEBHOOKS,
    REPLICAS_BEFORE,
    SAVED,
    TO_DO,
    TOWER_CONTROLLER,
    TOWER_NAMESPACE,
    TOWER_SERVICE,
    TOWER_WEBHOOKS,
    Endpoint,
    Step,
    ca_of,
    carry_out,
    configurations_of,
    conversion_step,
    delete_quietly,
    described,
    get_or_none,
    saved_objects,
)

KUEUE_MANIFESTS = (
    "kubectl apply --server-side -f "
    "https://github.com/kubernetes-sigs/kueue/releases/download/v0.19.2/manifests.yaml"
)


def controller_stopped(client: KubeClient) -> Step:
    title = "Tower's controller is stopped"
    deployment = get_or_none(client, DEPLOYMENTS, TOWER_CONTROLLER, TOWER_NAMESPACE)
    if not deployment:
        return Step(
            title,
            DONE,
            f"no Deployment {TOWER_NAMESPACE}/{TOWER_CONTROLLER} (a controller run outside "
            f"the cluster: stop it; it lets its Lease go, and steps down once Kueue leads)",
        )
    replicas = int(deployment["spec"].get("replicas", 1))
    if replicas == 0:
        return Step(title, DONE, f"Deployment {TOWER_CONTROLLER}: 0 replicas")

    def act() -> str:
        patch = {
            "metadata": {"annotations": {REPLICAS_BEFORE: str(replicas)}},
            "spec": {"replicas": 0},
        }
        client.patch(DEPLOYMENTS, TOWER_CONTROLLER, patch, TOWER_NAMESPACE)
        return f"Deployment {TOWER_CONTROLLER} scaled from {replicas} to 0 replicas"

    return Step(title, TO_DO, f"scale Deployment {TOWER_CONTROLLER} from {replicas} to 0", act)


def tower_webhooks(client: KubeClient) -> Step:
    title = "Tower's webhook configurations are removed"
    found = configurations_of(client, TOWER_WEBHOOKS, TOWER_NAMESPACE, TOWER_SERVICE)
    if not found:
        return Step(title, DONE, "none is left")

    def act() -> str:
        for resource, obj in found:
            delete_quietly(client, resource, obj["metadata"]["name"], None)
        return f"deleted {described(found)}"

    return Step(title, TO_DO, f"delete {described(found)}", act)


def kueue_webhooks(client: KubeClient, namespace: str) -> Step:
    title = "Kueue's webhook configurations are back"
    present = {
        resource
        for resource, name in KUEUE_WEBHOOKS.items()
        if get_or_none(client, resource, name, None)
    }
    saved = get_or_none(client, CONFIG_MAPS, SAVED, namespace)
    if len(present) == len(KUEUE_WEBHOOKS):

        def forget() -> str:
            delete_quietly(client, CONFIG_MAPS, SAVED, namespace)
            return f"both are there; deleted the copy {namespace}/{SAVED}"

        if saved:
            return Step(
                title, TO_DO, f"both are there; delete the copy {namespace}/{SAVED}", forget
            )
        return Step(title, DONE, "both are there (Kueue's cert controller injects its CA)")
    kept = [(r, obj) for r, obj in saved_objects(saved) if r not in present]
    if not kept:
        return Step(
            title,
            BLOCKED,
            f"no copy of them in ConfigMap {namespace}/{SAVED}: apply Kueue's manifests "
            f"again ({KUEUE_MANIFESTS})",
        )

    def act() -> str:
        for resource, obj in kept:
            client.create(resource, obj)
        delete_quietly(client, CONFIG_MAPS, SAVED, namespace)
        return f"created {described(kept)} as takeover found them"

    return Step(
        title,
        TO_DO,
        f"create {described(kept)} from the copy in ConfigMap {namespace}/{SAVED}",
        act,
    )


def run(
    inv: Invocation,
    args: argparse.Namespace,
    *,
    out: TextIO | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> str:
    started = monotonic()
    namespace = args.kueue_namespace
    ca = ca_of(inv.client, namespace, KUEUE_SECRET)
    no_ca = (
        f"Kueue's cert controller injects it on start; Secret {namespace}/{KUEUE_SECRET} has none"
    )
    _, conversion = conversion_step(
        inv.client,
        "the CRDs convert through Kueue's webhook",
        Endpoint((namespace, KUEUE_SERVICE, 443), None, ca),  # 443: the API server's default
        no_ca,
    )
    steps = [
        controller_stopped(inv.client),
        tower_webhooks(inv.client),
        conversion,
        kueue_webhooks(inv.client, namespace),
    ]
    deployment = KUEUE_DEPLOYMENT
    start = f"kubectl -n {namespace} scale deployment {deployment} --replicas=1"
    return carry_out(
        f"Handback to Kueue ({namespace}):",
        steps,
        yes=args.yes,
        out=out or sys.stdout,
        elapsed=lambda: monotonic() - started,
        after=f"start Kueue: {start}",
    )


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "handback",
        parents=[common],
        help="give the cluster back to Kueue",
        description="Stops Tower's controller, removes Tower's webhooks, points the CRDs' "
        "conversion back to Kueue's Service and puts Kueue's webhook configurations back; "
        "every Workload, queue and job stays as Kueue v0.19.2 adopts it. Says the steps; "
        "with --yes does them. Idempotent.",
    )
    p.add_argument("--to", dest="target", required=True, choices=["kueue"])
    p.add_argument("--kueue-namespace", default=KUEUE_NAMESPACE, help="where Kueue runs")
    p.add_argument("--yes", action="store_true", help="do the steps (else only say them)")
    p.set_defaults(run=run)
