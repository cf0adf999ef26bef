"""What `kubectl tower takeover` and `handback` share: the objects of each side, and a plan.

A switch between Kueue's controller and Tower's is a short list of steps. Each step is
checked against the cluster first and said as done, to do, or blocked (and why); only with
--yes are the steps to do carried out, in order, each one idempotent, so a run cut short at
any step is finished by running the command again.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from certs.kube import CONVERTED_CRDS, MUTATING_NAME, SECRET, SERVICE, VALIDATING_NAME
from extender.kube.api.client import ApiError, KubeClient
from extender.kube.api.resources import SECRETS, Resource
from extender.kube.plugin.output import CliError

Obj = dict[str, Any]

_ADMISSION = "admissionregistration.k8s.io"
MUTATING = Resource(
    _ADMISSION, "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False
)
VALIDATING = Resource(
    _ADMISSION, "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False
)
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", True)

# Kueue v0.19.2 as its config/ installs it (tests/data/kueue-install/).
KUEUE_NAMESPACE = "kueue-system"
KUEUE_SERVICE = "kueue-webhook-service"
KUEUE_SECRET = "kueue-webhook-server-cert"  # its internal cert controller's, with ca.crt
KUEUE_CONFIG_MAP = "kueue-manager-config"
CONFIG_KEY = "controller_manager_config.yaml"
KUEUE_WEBHOOKS = {
    MUTATING: "kueue-mutating-webhook-configuration",
    VALIDATING: "kueue-validating-webhook-configuration",
}
# Kueue's webhook configurations as takeover found them, kept beside Kueue for handback.
SAVED = "tower-takeover-saved"

TOWER_NAMESPACE, TOWER_SERVICE = SERVICE
TOWER_SECRET = SECRET
TOWER_WEBHOOKS = {MUTATING: MUTATING_NAME, VALIDATING: VALIDATING_NAME}
TOWER_CONTROLLER = "tower-controller"
TOWER_WEBHOOK_DEPLOYMENT = "tower-webhook"
TOWER_CONFIG_MAP = "tower-manager-config"
REPLICAS_BEFORE = "tower.dev/replicas-before-handback"
INSTALL = (
    "kubectl apply -k deploy/default, or helm install tower deploy/helm/tower -n "
    "tower-system --create-namespace"
)
CONVERTED = CONVERTED_CRDS

DONE, TO_DO, BLOCKED = "done", "to do", "blocked"


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a switch, as checked: `act` is what --yes does when it is to do, and
    returns what it did, in words."""

    title: str
    state: str  # DONE, TO_DO or BLOCKED
    detail: str
    act: Callable[[], str] | None = None


def line(number: int, state: str, title: str, detail: str) -> str:
    return f"{number}. {state:<7}  {title}: {detail}"


def carry_out(
    heading: str,
    steps: Sequence[Step],
    *,
    yes: bool,
    out: TextIO,
    elapsed: Callable[[], float],
    after: str = "",
) -> str:
    """The plan (without --yes), or each step done in order, said as it is done (so a
    failure part way leaves the steps before it said). CliError if a step stays blocked."""
    if not yes:
        lines = [heading, *(line(n, s.state, s.title, s.detail) for n, s in enumerate(steps, 1))]
        if any(s.state == TO_DO for s in steps):
            lines.append('Run it again with --yes to do the steps marked "to do".')
        elif after and not any(s.state == BLOCKED for s in steps):
            lines.append(after)
        return "\n".join(lines)
    print(heading, file=out, flush=True)
    blocked: list[str] = []
    for number, step in enumerate(steps, 1):
        if step.state == TO_DO and step.act is not None:
            did = step.act()
            print(line(number, DONE, step.title, did), file=out, flush=True)
            continue
        print(line(number, step.state, step.title, step.detail), file=out, flush=True)
        if step.state == BLOCKED:
            blocked.append(f"step {number} ({step.title}) is blocked: {step.detail}")
    if blocked:
        raise CliError(f"not finished: {blocked[0]}; run it again when that is done")
    took = f"finished in {elapsed():.1f}s"
    return f"{took}; {after}" if after else took


def get_or_none(client: KubeClient, resource: Resource, name: str, namespace: str | None) -> Obj:
    """The object, or {} when there is none."""
    try:
        return client.get(resource, name, namespace)
    except ApiError as err:
        if err.not_found:
            return {}
        raise


def delete_quietly(
    client: KubeClient, resource: Resource, name: str, namespace: str | None
) -> None:
    """Delete it; gone already is as good (a rerun after a failure part way)."""
    try:
        client.delete(resource, name, namespace)
    except ApiError as err:
        if not err.not_found:
            raise


def ca_of(client: KubeClient, namespace: str, secret: str) -> bytes | None:
    """The ca.crt a webhook's Secret holds, or None when there is none (yet)."""
    data = get_or_none(client, SECRETS, secret, namespace).get("data") or {}
    text = data.get("ca.crt")
    return base64.b64decode(text) if text else None


def calls_service(hook: Obj, namespace: str, service: str) -> bool:
    ref = (hook.get("clientConfig") or {}).get("service") or {}
    return (ref.get("namespace"), ref.get("name")) == (namespace, service)


def configurations_of(
    client: KubeClient, names: dict[Resource, str], namespace: str, service: str
) -> list[tuple[Resource, Obj]]:
    """The webhook configurations of one side: by their names, or any of whose webhooks
    call that side's Service."""
    found = []
    for resource in (MUTATING, VALIDATING):
        items, _ = client.list(resource)
        for obj in items:
            name = (obj.get("metadata") or {}).get("name")
            hooks = obj.get("webhooks") or []
            if name == names[resource] or any(calls_service(h, namespace, service) for h in hooks):
                found.append((resource, obj))
    return found


def described(configurations: Sequence[tuple[Resource, Obj]]) -> str:
    """`MutatingWebhookConfiguration NAME (12 webhooks, 12 failing closed)`, joined."""
    parts = []
    for resource, obj in configurations:
        hooks = obj.get("webhooks") or []
        closed = sum(1 for h in hooks if h.get("failurePolicy", "Fail") == "Fail")
        parts.append(
            f"{resource.kind} {obj['metadata']['name']} ({len(hooks)} webhooks, "
            f"{closed} failurePolicy Fail)"
        )
    return ", ".join(parts)


def as_created(resource: Resource, obj: Obj) -> Obj:
    """The object as one would create it again: what the server set on it left out."""
    meta = obj.get("metadata") or {}
    kept = {k: meta[k] for k in ("name", "labels", "annotations") if meta.get(k)}
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        **{k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")},
        "metadata": kept,
    }


def saved_key(resource: Resource, name: str) -> str:
    return f"{resource.plural}.{name}.json"


def saved_objects(saved: Obj) -> list[tuple[Resource, Obj]]:
    """The webhook configurations a saved ConfigMap holds, in Kubernetes' order (mutating
    first)."""
    found = []
    for resource in (MUTATING, VALIDATING):
        for key, text in sorted((saved.get("data") or {}).items()):
            if key.startswith(f"{resource.plural}."):
                found.append((resource, json.loads(text)))
    return found


# ----- the CRDs' conversion ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a CRD's conversion webhook is sent: a Service (Kueue's, Tower's) or, for a
    webhook served outside the cluster, a URL; and the CA its certificate is checked with
    (None: not known yet)."""

    service: tuple[str, str, int | None] | None  # namespace, name, port (None: unset)
    url: str | None
    ca: bytes | None

    def client_config(self) -> Obj:
        """As a merge patch: what is not wanted is set to None, so it goes."""
        service = None
        if self.service is not None:
            namespace, name, port = self.service
            service = {"namespace": namespace, "name": name, "path": "/convert", "port": port}
        return {
            "service": service,
            "url": None if self.url is None else self.url.rstrip("/") + "/convert",
            "caBundle": None if self.ca is None else base64.b64encode(self.ca).decode(),
        }

    def reached_by(self, config: Obj) -> bool:
        """Whether a CRD's clientConfig sends to this endpoint (the CA aside)."""
        if self.url is not None:
            return config.get("url") == self.url.rstrip("/") + "/convert"
        ref = config.get("service") or {}
        namespace, name, port = self.service or ("", "", None)
        return (
            not config.get("url")
            and (ref.get("namespace"), ref.get("name")) == (namespace, name)
            and (ref.get("path") or "/") == "/convert"
            and int(ref.get("port") or 443) == (port or 443)
        )

    def bundle_matches(self, config: Obj) -> bool:
        """The caBundle is this CA's; with the CA unknown, there is none (a stale one of the
        other side would fail every call until the right one is injected)."""
        want = None if self.ca is None else base64.b64encode(self.ca).decode()
        return (config.get("caBundle") or None) == want

    def where(self) -> str:
        if self.url is not None:
            return self.url.rstrip("/") + "/convert"
        namespace, name, _ = self.service or ("", "", None)
        return f"Service {namespace}/{name} /convert"


def conversion_of(crd: Obj) -> Obj:
    """A CRD's conversion webhook clientConfig ({} when it converts no way)."""
    conversion = (crd.get("spec") or {}).get("conversion") or {}
    return ((conversion.get("webhook") or {}).get("clientConfig")) or {}


def conversion_step(
    client: KubeClient, title: str, endpoint: Endpoint, no_ca: str
) -> tuple[list[str], Step]:
    """Every one of Kueue's converted CRDs points to `endpoint` with its CA. `no_ca` says
    who brings the CA when it is not known. Returns the CRDs installed, and the step."""
    installed: list[str] = []
    off: list[str] = []
    unbundled = False
    for name in sorted(CONVERTED):
        crd = get_or_none(client, CRDS, name, None)
        if not crd:
            continue
        installed.append(name)
        config = conversion_of(crd)
        if not endpoint.reached_by(config):
            off.append(name)
        elif not endpoint.bundle_matches(config):
            off.append(name)
            unbundled = True
    what = f"{len(installed)} CRDs convert through {endpoint.where()}"
    if not installed:
        return installed, Step(title, DONE, "none of Kueue's CRDs that convert is installed")
    if not off:
        ca = "with its CA" if endpoint.ca is not None else f"with no caBundle yet ({no_ca})"
        return installed, Step(title, DONE, f"{what} {ca}")

    def act() -> str:
        patch = {
            "spec": {
                "conversion": {
                    "strategy": "Webhook",
                    "webhook": {
                        "conversionReviewVersions": ["v1"],
                        "clientConfig": endpoint.client_config(),
                    },
                }
            }
        }
        for name in off:
            client.patch(CRDS, name, patch)
        ca = "with its CA" if endpoint.ca is not None else f"with no caBundle yet ({no_ca})"
        return (
            f"{', '.join(n.split('.')[0] for n in off)} now convert through {endpoint.where()} {ca}"
        )

    stale = " (its caBundle is not this side's)" if unbundled else ""
    return installed, Step(
        title,
        TO_DO,
        f"{len(off)} of {len(installed)} CRDs ({', '.join(n.split('.')[0] for n in off)}) do "
        f"not convert through {endpoint.where()}"
        + stale
        + ("" if endpoint.ca is not None else f" (no caBundle yet: {no_ca})"),
        act,
    )
