"""`kubectl tower takeover --from kueue`: Tower takes a cluster over from a stopped Kueue.

Nothing is drained: Tower reads Kueue's objects as Kueue left them. What must change is
what a stopped Kueue leaves in the way: its webhook configurations (failurePolicy Fail, no
backend: every Job refused) and the CRDs' conversion through its Service. And it is never
done beside a live Kueue: while Kueue's Lease is renewed the command changes nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import yaml

from certs.kube import Scope, webhook_configurations
from extender.core.config.kueue_config import KueueConfig, parse
from extender.core.config.schema import ConfigError
from extender.kube.api.client import KubeClient
from extender.kube.api.kueue_lease import KUEUE_DEPLOYMENT, holder_of
from extender.kube.api.resources import LEASES
from extender.kube.plugin import handback
from extender.kube.plugin.connect import Invocation
from extender.kube.plugin.kueue_switch import (
    BLOCKED,
    CONFIG_KEY,
    CONFIG_MAPS,
    DEPLOYMENTS,
    DONE,
    INSTALL,
    KUEUE_CONFIG_MAP,
    KUEUE_NAMESPACE,
    KUEUE_SERVICE,
    KUEUE_WEBHOOKS,
    REPLICAS_BEFORE,
    SAVED,
    TO_DO,
    TOWER_CONFIG_MAP,
    TOWER_CONTROLLER,
    TOWER_NAMESPACE,
    TOWER_SECRET,
    TOWER_SERVICE,
    TOWER_WEBHOOK_DEPLOYMENT,
    TOWER_WEBHOOKS,
    Endpoint,
    Step,
    as_created,
    ca_of,
    carry_out,
    configurations_of,
    conversion_step,
    delete_quietly,
    described,
    get_or_none,
    saved_key,
)
from extender.kube.plugin.output import CliError

Obj = dict[str, Any]
KUEUE_LEASE_NAME = "c1f6bfd2.kueue.x-k8s.io"
CONFIGURATION = "tower.dev/configuration"  # its hash on Tower's pod templates: they restart
TOWER_REPLICAS = 2  # deploy/default's, when handback did not say how many ran


# ----- step 1: Kueue's controller is stopped -------------------------------------------------


def kueue_deployment(client: KubeClient, namespace: str) -> str | None:
    """Kueue's manager Deployment: by its name, else by the labels Kueue's config/ sets."""
    if get_or_none(client, DEPLOYMENTS, KUEUE_DEPLOYMENT, namespace):
        return KUEUE_DEPLOYMENT
    items, _ = client.list(
        DEPLOYMENTS,
        namespace,
        label_selector="app.kubernetes.io/name=kueue,control-plane=controller-manager",
    )
    return str(items[0]["metadata"]["name"]) if items else None


def refuse_if_live(
    client: KubeClient,
    where: tuple[str, str],
    *,
    kueue_namespace: str,
    now: float,
    retry: float,
    sleep: Callable[[float], None],
) -> str:
    """Raise CliError (the one line) while Kueue's Lease is live; else say why it is not.

    Live by `now` (its renewTime within its duration), or renewed while watched a retry
    period and a half: controller-runtime renews once a retry period (plus the request's
    time), so a changed record is a live Kueue even when its clock is far behind ours."""
    namespace, name = where
    lease = get_or_none(client, LEASES, name, namespace)
    if not lease:
        return f"no Lease {namespace}/{name}: Kueue's controller does not lead here"
    holder = holder_of(lease)
    if holder is None:
        return f"its Lease {namespace}/{name} has no holder (let go)"
    ago = None if holder.renewed is None else max(0.0, now - holder.renewed)
    live = ago is not None and ago <= holder.duration
    if not live:
        record = lease.get("spec")
        sleep(retry * 1.5)
        again = get_or_none(client, LEASES, name, namespace)
        live = again.get("spec") != record
    if live:
        deployment = kueue_deployment(client, kueue_namespace)
        seen = f", renewed {ago:.1f}s ago" if ago is not None and ago <= holder.duration else ""
        seen = seen or f", renewed within {retry * 1.5:.1f}s"
        stop = (
            f"kubectl -n {kueue_namespace} scale deployment {deployment} --replicas=0"
            if deployment
            else f"stop the process that holds it (no Deployment {KUEUE_DEPLOYMENT} in "
            f"{kueue_namespace})"
        )
        raise CliError(
            f"Kueue's controller holds its Lease {namespace}/{name} (holder {holder.identity}"
            f"{seen}): Tower never takes over beside a live Kueue, and nothing was changed; "
            f"stop it first: {stop}"
        )
    return (
        f"its Lease {namespace}/{name} was last renewed {ago or 0:.0f}s ago by "
        f"{holder.identity}, over its {holder.duration:.0f}s duration, and not since"
    )


# ----- Kueue's Configuration ------------------------------------------------------------------


def kueue_configuration(client: KubeClient, namespace: str, path: str | None) -> tuple[str, str]:
    """Kueue's Configuration as text, and where it was read ("" and "" when nowhere)."""
    if path is not None:
        try:
            return Path(path).read_text(encoding="utf-8"), f"--config {path}"
        except OSError as err:
            raise CliError(f"--config {path}: {err.strerror or err}") from None
    config_map = get_or_none(client, CONFIG_MAPS, KUEUE_CONFIG_MAP, namespace)
    text = (config_map.get("data") or {}).get(CONFIG_KEY)
    if not text:
        return "", ""
    return str(text), f"ConfigMap {namespace}/{KUEUE_CONFIG_MAP}"


def parsed(text: str, where: str, namespace: str) -> KueueConfig:
    """Kueue's Configuration as Tower reads it; CliError naming the field Tower refuses."""
    try:
        return parse(yaml.safe_load(text or "{}") or {}, namespace=namespace)
    except (yaml.YAMLError, ConfigError) as err:
        reason = " ".join(str(err).split())
        raise CliError(f"Kueue's Configuration ({where}): {reason}") from None


def tower_configuration(text: str, where: str, kueue_namespace: str, tower_lease: str) -> str:
    """Kueue's Configuration as Tower's ConfigMap carries it. Its namespace stays Kueue's
    (Kueue's default is the namespace it ran in): Tower reads Kueue's Lease there, and the
    managed namespaces' default is Kueue's. Its leaderElection keeps Tower's own Lease in
    Tower's namespace: a rollout of Tower with a new Lease name would lead twice."""
    doc = dict(yaml.safe_load(text or "{}") or {})
    doc.setdefault("namespace", kueue_namespace)
    lease = dict(doc.get("leaderElection") or {})
    lease["resourceName"] = tower_lease
    lease.pop("resourceNamespace", None)
    doc["leaderElection"] = lease
    return (
        f"# Kueue's Configuration from {where}, written by kubectl tower takeover\n"
        f"# (leaderElection names Tower's own Lease; Tower watches Kueue's).\n"
        + yaml.safe_dump(doc, sort_keys=False)
    )


def tower_lease_name(current: str) -> str:
    lease = ((yaml.safe_load(current or "{}") or {}).get("leaderElection")) or {}
    return str(lease.get("resourceName") or TOWER_CONTROLLER)


# ----- the steps ------------------------------------------------------------------------------


class Takeover:
    """The cluster's state, read once, and the steps it calls for."""

    def __init__(
        self,
        client: KubeClient,
        kueue_namespace: str,
        *,
        config_path: str | None,
        webhook_url: str | None,
        ca: bytes | None,
    ) -> None:
        self.client = client
        self.kueue_namespace = kueue_namespace
        self.text, self.where = kueue_configuration(client, kueue_namespace, config_path)
        self.config = parsed(self.text, self.where or "Kueue's defaults", kueue_namespace)
        self.webhook_url = webhook_url
        self.ca = ca if webhook_url is not None else ca_of(client, TOWER_NAMESPACE, TOWER_SECRET)

    @property
    def lease(self) -> tuple[str, str]:
        election = self.config.leader_election
        namespace = election.resource_namespace or self.config.namespace
        return namespace, election.resource_name or KUEUE_LEASE_NAME

    def endpoint(self) -> Endpoint:
        if self.webhook_url is not None:
            return Endpoint(None, self.webhook_url, self.ca)
        return Endpoint((TOWER_NAMESPACE, TOWER_SERVICE, 443), None, self.ca)

    def steps(self, stopped: str) -> list[Step]:
        no_ca = (
            "python -m certs bootstrap, the init container of Tower's controller, injects "
            "Tower's CA as it starts"
        )
        _, conversion = conversion_step(
            self.client, "the CRDs convert through Tower's webhook", self.endpoint(), no_ca
        )
        return [
            Step("Kueue's controller is stopped", DONE, stopped),
            self.kueue_webhooks(),
            conversion,
            self.tower_installed(),
            self.configuration(),
            self.controller_running(),
        ]

    def kueue_webhooks(self) -> Step:
        title = "Kueue's webhook configurations are removed"
        found = configurations_of(self.client, KUEUE_WEBHOOKS, self.kueue_namespace, KUEUE_SERVICE)
        if not found:
            return Step(title, DONE, "none is left")

        def act() -> str:
            self.save(found)
            for resource, obj in found:
                delete_quietly(self.client, resource, obj["metadata"]["name"], None)
            return f"deleted {described(found)} (a copy kept for handback)"

        return Step(
            title,
            TO_DO,
            f"delete {described(found)}: with Kueue stopped they refuse every object they "
            f"match (no endpoints for its Service); a copy is kept in ConfigMap "
            f"{self.kueue_namespace}/{SAVED} for handback",
            act,
        )

    def save(self, found: list[tuple[Any, Obj]]) -> None:
        """Keep Kueue's webhook configurations beside Kueue, for handback to put back."""
        data = {
            saved_key(resource, obj["metadata"]["name"]): json.dumps(as_created(resource, obj))
            for resource, obj in found
        }
        if get_or_none(self.client, CONFIG_MAPS, SAVED, self.kueue_namespace):
            self.client.patch(CONFIG_MAPS, SAVED, {"data": data}, self.kueue_namespace)
            return
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": SAVED,
                "namespace": self.kueue_namespace,
                "labels": {"app.kubernetes.io/part-of": "tower"},
            },
            "data": data,
        }
        self.client.create(CONFIG_MAPS, body, self.kueue_namespace)

    def tower_installed(self) -> Step:
        title = "Tower's webhooks and controller are installed"
        if self.webhook_url is None:
            missing = [
                name
                for name in (TOWER_CONTROLLER, TOWER_WEBHOOK_DEPLOYMENT)
                if not get_or_none(self.client, DEPLOYMENTS, name, TOWER_NAMESPACE)
            ]
            if missing:
                return Step(
                    title,
                    BLOCKED,
                    f"no Deployment {', '.join(f'{TOWER_NAMESPACE}/{m}' for m in missing)}: "
                    f"install Tower ({INSTALL}), then run this again",
                )
        absent = [
            (resource, name)
            for resource, name in TOWER_WEBHOOKS.items()
            if not get_or_none(self.client, resource, name, None)
        ]
        where = "outside the cluster" if self.webhook_url else f"in {TOWER_NAMESPACE}"
        if not absent:
            return Step(title, DONE, f"Tower's webhook configurations are there; it runs {where}")
        names = ", ".join(f"{r.kind} {n}" for r, n in absent)
        if self.ca is None:
            return Step(
                title,
                BLOCKED,
                f"no {names}, and no CA of Tower's to create them with (Secret "
                f"{TOWER_NAMESPACE}/{TOWER_SECRET}): install Tower ({INSTALL}), which puts them in",
            )

        def act() -> str:
            mutating, validating = webhook_configurations(
                self.ca,
                url=self.webhook_url,
                service=None if self.webhook_url else (TOWER_NAMESPACE, TOWER_SERVICE),
                integrations=self.config.integrations,
                scope=Scope.of(self.config),
            )
            wanted = {
                r: body for r, body in zip(TOWER_WEBHOOKS, (mutating, validating), strict=True)
            }
            for resource, _ in absent:
                self.client.create(resource, wanted[resource])
            return f"created {names}, for the integrations of Kueue's Configuration"

        return Step(title, TO_DO, f"create {names} (Tower's CA is there)", act)

    def configuration(self) -> Step:
        title = "Tower reads Kueue's Configuration"
        if not self.where:
            return Step(
                title,
                DONE,
                f"Kueue has none (no --config, no ConfigMap {self.kueue_namespace}/"
                f"{KUEUE_CONFIG_MAP}): Tower keeps its own",
            )
        if self.webhook_url is not None:
            return Step(
                title,
                DONE,
                f"Tower runs outside the cluster: give its controller and webhook the "
                f"Configuration of {self.where} (python -m extender run --config FILE; "
                f"TOWER_CONFIG=FILE)",
            )
        current_map = get_or_none(self.client, CONFIG_MAPS, TOWER_CONFIG_MAP, TOWER_NAMESPACE)
        current = (current_map.get("data") or {}).get(CONFIG_KEY) or ""
        wanted = tower_configuration(
            self.text, self.where, self.kueue_namespace, tower_lease_name(current)
        )
        parsed(wanted, f"ConfigMap {TOWER_NAMESPACE}/{TOWER_CONFIG_MAP}", TOWER_NAMESPACE)
        stamp = hashlib.sha256(wanted.encode()).hexdigest()[:16]
        stale = [
            name
            for name in (TOWER_CONTROLLER, TOWER_WEBHOOK_DEPLOYMENT)
            if (dep := get_or_none(self.client, DEPLOYMENTS, name, TOWER_NAMESPACE))
            and ((dep["spec"]["template"].get("metadata") or {}).get("annotations") or {}).get(
                CONFIGURATION
            )
            != stamp
        ]
        if current == wanted and not stale:
            return Step(title, DONE, f"ConfigMap {TOWER_NAMESPACE}/{TOWER_CONFIG_MAP} holds it")

        def act() -> str:
            if current != wanted:
                if current_map:
                    patch = {"data": {CONFIG_KEY: wanted}}
                    self.client.patch(CONFIG_MAPS, TOWER_CONFIG_MAP, patch, TOWER_NAMESPACE)
                else:
                    body = {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": TOWER_CONFIG_MAP, "namespace": TOWER_NAMESPACE},
                        "data": {CONFIG_KEY: wanted},
                    }
                    self.client.create(CONFIG_MAPS, body, TOWER_NAMESPACE)
            # They read it as they start: a new hash on the pod template rolls them.
            restart = {"spec": {"template": {"metadata": {"annotations": {CONFIGURATION: stamp}}}}}
            for name in stale:
                self.client.patch(DEPLOYMENTS, name, restart, TOWER_NAMESPACE)
            return (
                f"ConfigMap {TOWER_NAMESPACE}/{TOWER_CONFIG_MAP} holds the Configuration of "
                f"{self.where}; restarted {', '.join(stale) or 'nothing'} to read it"
            )

        return Step(
            title,
            TO_DO,
            f"write the Configuration of {self.where} to ConfigMap {TOWER_NAMESPACE}/"
            f"{TOWER_CONFIG_MAP} (Tower's own Lease kept) and restart "
            f"{', '.join(stale) or 'nothing'} to read it",
            act,
        )

    def controller_running(self) -> Step:
        title = "Tower's controller runs"
        if self.webhook_url is not None:
            return Step(title, DONE, "outside the cluster: python -m extender run")
        deployment = get_or_none(self.client, DEPLOYMENTS, TOWER_CONTROLLER, TOWER_NAMESPACE)
        if not deployment:
            return Step(title, BLOCKED, f"no Deployment {TOWER_NAMESPACE}/{TOWER_CONTROLLER}")
        replicas = int(deployment["spec"].get("replicas", 1))
        if replicas > 0:
            return Step(title, DONE, f"Deployment {TOWER_CONTROLLER}: {replicas} replicas")
        before = (deployment["metadata"].get("annotations") or {}).get(REPLICAS_BEFORE)
        wanted = int(before) if before and before.isdigit() and int(before) > 0 else TOWER_REPLICAS

        def act() -> str:
            patch = {
                "metadata": {"annotations": {REPLICAS_BEFORE: None}},
                "spec": {"replicas": wanted},
            }
            self.client.patch(DEPLOYMENTS, TOWER_CONTROLLER, patch, TOWER_NAMESPACE)
            return f"Deployment {TOWER_CONTROLLER} scaled to {wanted} replicas"

        return Step(title, TO_DO, f"scale Deployment {TOWER_CONTROLLER} from 0 to {wanted}", act)


def run(
    inv: Invocation,
    args: argparse.Namespace,
    *,
    out: TextIO | None = None,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> str:
    started = monotonic()
    ca = None
    if args.webhook_url is not None:
        path = Path(args.certs_dir) / "ca.crt"
        try:
            ca = path.read_bytes()
        except OSError:
            raise CliError(
                f"--certs-dir {args.certs_dir}: no ca.crt (the CA of the webhook at "
                f"--webhook-url; python -m certs generate writes it)"
            ) from None
    takeover = Takeover(
        inv.client,
        args.kueue_namespace,
        config_path=args.config,
        webhook_url=args.webhook_url,
        ca=ca,
    )
    stopped = refuse_if_live(
        inv.client,
        takeover.lease,
        kueue_namespace=args.kueue_namespace,
        now=inv.now,
        retry=takeover.config.leader_election.retry_period,
        sleep=sleep,
    )
    return carry_out(
        f"Takeover from Kueue ({args.kueue_namespace}):",
        takeover.steps(stopped),
        yes=args.yes,
        out=out or sys.stdout,
        elapsed=lambda: monotonic() - started,
        after="Tower now admits; kubectl tower handback --to kueue goes back",
    )


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "takeover",
        parents=[common],
        help="take the cluster over from a stopped Kueue, without draining it",
        description="Checks, says what it will do (one line a step: done, to do, or blocked "
        "and why), and with --yes does it. Idempotent: run it again after a failure at any "
        "step. Refuses, changing nothing, while Kueue's controller renews its Lease.",
    )
    p.add_argument("--from", dest="source", required=True, choices=["kueue"])
    p.add_argument("--kueue-namespace", default=KUEUE_NAMESPACE, help="where Kueue runs")
    p.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help=f"Kueue's Configuration (default: ConfigMap {KUEUE_CONFIG_MAP} in Kueue's "
        f"namespace): its Lease, and what Tower's ConfigMap gets",
    )
    p.add_argument(
        "--webhook-url",
        default=None,
        help="Tower's webhook served outside the cluster at this URL (e.g. "
        "https://127.0.0.1:9443), not by its Service",
    )
    p.add_argument(
        "--certs-dir",
        default="certs-out",
        help="with --webhook-url: where python -m certs generate wrote its ca.crt",
    )
    p.add_argument("--yes", action="store_true", help="do the steps (else only say them)")
    p.set_defaults(run=run)
    handback.register(sub, common)
