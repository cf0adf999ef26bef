"""Certificates into the cluster: the Secret, caBundle injection, webhook configurations."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from certs import pki
from extender.core.config.kueue_config import KueueConfig, LabelSelector, default_namespace_selector
from extender.core.jobframework import registry
from extender.kube.api import yaml_text

MUTATING_NAME = "tower-mutating-webhook"
VALIDATING_NAME = "tower-validating-webhook"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
OPT_IN_LABEL = "tower.dev/manage-jobs-without-queue-name"
KUEUE_KINDS = {
    "clusterqueue": "clusterqueues",
    "localqueue": "localqueues",
    "resourceflavor": "resourceflavors",
    "cohort": "cohorts",
    "workloadpriorityclass": "workloadpriorityclasses",
}
SERVICE = ("tower-system", "tower-webhook")
SECRET = "tower-webhook-tls"
CONVERTED_CRDS = (
    "clusterqueues.kueue.x-k8s.io",
    "localqueues.kueue.x-k8s.io",
    "workloads.kueue.x-k8s.io",
    "cohorts.kueue.x-k8s.io",
    "multikueueclusters.kueue.x-k8s.io",
)


def _client_config(
    path: str, ca_bundle: bytes | None, url: str | None, service: tuple[str, str] | None
) -> dict[str, Any]:
    # Without a bundle (the manifests in deploy/), `python -m certs bootstrap` injects it.
    config: dict[str, Any] = (
        {"caBundle": base64.b64encode(ca_bundle).decode()} if ca_bundle is not None else {}
    )
    if url is not None:
        config["url"] = url.rstrip("/") + path
    elif service is not None:
        config["service"] = {"namespace": service[0], "name": service[1], "path": path, "port": 443}
    else:
        raise ValueError("a webhook needs a URL or a Service")
    return config


def _rule(group: str, version: str, resource: str, operations: Sequence[str]) -> dict[str, Any]:
    return {
        "apiGroups": [group],
        "apiVersions": [version],
        "resources": [resource],
        "operations": list(operations),
        "scope": "*",
    }


def _entry(
    name: str,
    path: str,
    rule: dict[str, Any],
    policy: str,
    ca: bytes | None,
    url: str | None,
    service: tuple[str, str] | None,
    object_selector: dict[str, Any] | None,
    namespace_selector: dict[str, Any],
) -> dict[str, Any]:
    webhook: dict[str, Any] = {
        "name": name,
        "clientConfig": _client_config(path, ca, url, service),
        "rules": [rule],
        "failurePolicy": policy,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        # Short: a slow webhook must not eat kube-apiserver's budget (mutating webhooks run in
        # sequence, and may be called twice).
        "timeoutSeconds": 3,
        "matchPolicy": "Equivalent",
    }
    if object_selector is not None:
        webhook["objectSelector"] = object_selector
    webhook["namespaceSelector"] = namespace_selector
    return webhook


DEFAULT_NAMESPACES = default_namespace_selector(SERVICE[0])


@dataclass(frozen=True)
class Scope:
    """The namespaces the jobs' webhooks see: Kueue's managedJobsNamespaceSelector, and
    whether unlabelled jobs there are queued (manageJobsWithoutQueueName) or only in the
    namespaces that also carry tower.dev/manage-jobs-without-queue-name=true."""

    namespaces: LabelSelector = DEFAULT_NAMESPACES
    unlabelled_everywhere: bool = False

    @classmethod
    def of(cls, config: KueueConfig) -> Scope:
        return cls(config.managed_jobs_namespace_selector, config.manage_jobs_without_queue_name)

    def labelled(self) -> dict[str, Any]:
        return self.namespaces.as_manifest()

    def unlabelled(self) -> dict[str, Any]:
        """The selector, and (unless every selected namespace is managed) the opt-in label."""
        manifest = self.namespaces.as_manifest()
        if not self.unlabelled_everywhere:
            manifest.setdefault("matchExpressions", []).append(
                {"key": OPT_IN_LABEL, "operator": "In", "values": ["true"]}
            )
        return manifest


def webhook_configurations(
    ca_bundle: bytes | None,
    *,
    url: str | None = None,
    service: tuple[str, str] | None = None,
    integrations: Sequence[str] | None = None,
    scope: Scope | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Mutating and Validating WebhookConfigurations Tower needs: four webhooks for each
    kind of job of these integrations (Kueue's default set when None) that the registry has
    an adapter for, named after its kind (mjob-create.tower.dev), then Kueue's objects.

    Unlike Kueue's, the jobs' webhooks select only objects that carry the queue-name
    label (plus, for namespaces labelled tower.dev/manage-jobs-without-queue-name=true, or
    every managed namespace with Kueue's manageJobsWithoutQueueName, unlabelled ones), so a
    webhook outage never blocks jobs Tower does not queue. They see only the namespaces of
    the scope (Kueue's managedJobsNamespaceSelector). CREATE fails closed (a queued job must
    start suspended); UPDATE fails open (the controller re-suspends a job started by hand).
    """
    scope = scope or Scope()
    labelled = {"matchExpressions": [{"key": QUEUE_LABEL, "operator": "Exists"}]}
    unlabelled = {"matchExpressions": [{"key": QUEUE_LABEL, "operator": "DoesNotExist"}]}

    def hook(
        name: str,
        path: str,
        rule: dict[str, Any],
        policy: str,
        objects: dict[str, Any] | None,
        namespaces: dict[str, Any],
    ) -> dict[str, Any]:
        return _entry(name, path, rule, policy, ca_bundle, url, service, objects, namespaces)

    mutating: list[dict[str, Any]] = []
    validating: list[dict[str, Any]] = []
    for adapter in registry.enabled(integrations):
        short = adapter.kind.lower()
        group, version, resource = adapter.group, adapter.version, adapter.plural
        mutate = registry.webhook_path(adapter, "mutate")
        validate = registry.webhook_path(adapter, "validate")
        create = _rule(group, version, resource, ["CREATE"])
        mutating += [
            hook(f"m{short}-create.tower.dev", mutate, create, "Fail", labelled, scope.labelled()),
            hook(
                f"m{short}-update.tower.dev",
                mutate,
                _rule(group, version, resource, ["UPDATE"]),
                "Ignore",
                labelled,
                scope.labelled(),
            ),
        ]
        if adapter.default_queue:
            mutating.append(
                hook(
                    f"m{short}-default-queue.tower.dev",
                    mutate,
                    create,
                    "Fail",
                    unlabelled,
                    scope.unlabelled(),
                )
            )
        validating.append(
            hook(
                f"v{short}.tower.dev",
                validate,
                _rule(group, version, resource, ["CREATE", "UPDATE"]),
                "Ignore",
                labelled,
                scope.labelled(),
            )
        )
    for parent in registry.enabled_parents(integrations):
        # A Deployment's pod template is marked on create and on every update (a template
        # left unmarked would make pods that run unqueued): both fail closed.
        short = parent.kind.lower()
        mutate = registry.webhook_path(parent, "mutate")
        rule = _rule(parent.group, parent.version, parent.plural, ["CREATE", "UPDATE"])
        mutating += [
            hook(f"m{short}.tower.dev", mutate, rule, "Fail", labelled, scope.labelled()),
            hook(
                f"m{short}-default-queue.tower.dev",
                mutate,
                _rule(parent.group, parent.version, parent.plural, ["CREATE"]),
                "Fail",
                unlabelled,
                scope.unlabelled(),
            ),
        ]
        # Validated on create too: Kueue's rules for its admission-gated-by annotation.
        validating.append(
            hook(
                f"v{short}.tower.dev",
                registry.webhook_path(parent, "validate"),
                _rule(parent.group, parent.version, parent.plural, ["CREATE", "UPDATE"]),
                "Ignore",
                labelled,
                scope.labelled(),
            )
        )
    for kind, resource in KUEUE_KINDS.items():
        validating.append(
            hook(
                f"v{kind}.tower.dev",
                f"/validate-kueue-x-k8s-io-v1beta2-{kind}",
                _rule("kueue.x-k8s.io", "v1beta2", resource, ["CREATE", "UPDATE"]),
                "Fail",
                None,
                {},
            )
        )
    meta = {"labels": {"app.kubernetes.io/part-of": "tower"}}
    return (
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": MUTATING_NAME, **meta},
            "webhooks": mutating,
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": VALIDATING_NAME, **meta},
            "webhooks": validating,
        },
    )


def _manifest(body: Mapping[str, Any]) -> Any:
    """A dict body for the client: it serialises dicts as they are, like a typed model."""
    return dict(body)


def _apply(api: client.AdmissionregistrationV1Api, body: Mapping[str, Any]) -> None:
    name = body["metadata"]["name"]
    mutating = body["kind"] == "MutatingWebhookConfiguration"
    read = (
        api.read_mutating_webhook_configuration
        if mutating
        else api.read_validating_webhook_configuration
    )
    create = (
        api.create_mutating_webhook_configuration
        if mutating
        else api.create_validating_webhook_configuration
    )
    replace = (
        api.replace_mutating_webhook_configuration
        if mutating
        else api.replace_validating_webhook_configuration
    )
    try:
        current = read(name)
    except ApiException as err:
        if err.status != 404:
            raise
        create(_manifest(body))
        return
    version = current.metadata.resource_version if current.metadata else None
    updated = dict(body)
    updated["metadata"] = {**body["metadata"], "resourceVersion": version}
    replace(name, _manifest(updated))


def install(
    api_client: client.ApiClient,
    url: str,
    ca_bundle: bytes,
    integrations: Sequence[str] | None = None,
    scope: Scope | None = None,
) -> list[str]:
    """Register both webhook configurations against a webhook served at `url`, for the kinds
    of job of these integrations (Kueue's default set when None)."""
    api = client.AdmissionregistrationV1Api(api_client)
    names = []
    for body in webhook_configurations(ca_bundle, url=url, integrations=integrations, scope=scope):
        _apply(api, body)
        names.append(f"{body['kind']}/{body['metadata']['name']}")
    return names


def write_secret(
    api_client: client.ApiClient, namespace: str, name: str, bundle: pki.Bundle
) -> None:
    """Store the certificates as a kubernetes.io/tls Secret (created or replaced)."""
    api = client.CoreV1Api(api_client)
    data = {
        k: base64.b64encode(v).decode()
        for k, v in (
            ("tls.crt", bundle.cert),
            ("tls.key", bundle.key),
            ("ca.crt", bundle.ca_cert),
            ("ca.key", bundle.ca_key),
        )
    }
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }
    try:
        api.read_namespaced_secret(name, namespace)
    except ApiException as err:
        if err.status != 404:
            raise
        api.create_namespaced_secret(namespace, _manifest(body))
        return
    api.replace_namespaced_secret(name, namespace, _manifest(body))


def inject_ca_bundle(
    api_client: client.ApiClient, ca_bundle: bytes, crds: Sequence[str] = CONVERTED_CRDS
) -> None:
    """Put the CA into every Tower webhook and into the conversion config of the CRDs."""
    encoded = base64.b64encode(ca_bundle).decode()
    admission = client.AdmissionregistrationV1Api(api_client)
    for name, read, patch in (
        (
            MUTATING_NAME,
            admission.read_mutating_webhook_configuration,
            admission.patch_mutating_webhook_configuration,
        ),
        (
            VALIDATING_NAME,
            admission.read_validating_webhook_configuration,
            admission.patch_validating_webhook_configuration,
        ),
    ):
        try:
            current = read(name)
        except ApiException as err:
            if err.status != 404:
                raise
            continue  # not installed (yet): it gets the bundle the next time
        hooks = [
            {"name": w.name, "clientConfig": {"caBundle": encoded}} for w in current.webhooks or ()
        ]
        patch(name, {"webhooks": hooks})
    extensions = client.ApiextensionsV1Api(api_client)
    for crd in crds:
        try:
            extensions.patch_custom_resource_definition(
                crd, {"spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": encoded}}}}}
            )
        except ApiException as err:
            if err.status != 404:  # a CRD not installed yet gets the bundle next time
                raise


def renew_if_needed(
    api_client: client.ApiClient,
    namespace: str,
    secret: str,
    dns_names: Sequence[str],
    *,
    now: datetime,
) -> bool:
    """Renew the serving certificate in the Secret before it expires; True if renewed."""
    api = client.CoreV1Api(api_client)
    ca_cert = ca_key = None
    try:
        current = api.read_namespaced_secret(secret, namespace)
        data = current.data or {}
        cert = base64.b64decode(data.get("tls.crt", ""))
        if not pki.needs_renewal(cert, now=now, dns_names=dns_names):
            return False
        if data.get("ca.crt") and data.get("ca.key"):
            ca_cert = base64.b64decode(data["ca.crt"])
            ca_key = base64.b64decode(data["ca.key"])
    except ApiException as err:
        if err.status != 404:
            raise
    bundle = pki.generate(dns_names, now=now, ca_cert=ca_cert, ca_key=ca_key)
    write_secret(api_client, namespace, secret, bundle)
    inject_ca_bundle(api_client, bundle.ca_cert)
    return True


GENERATED = (
    "# Generated by `python -m certs manifests --out deploy/default/webhooks.yaml`; do not edit.\n"
    "# The caBundle is injected by `python -m certs bootstrap` (the controller's init container)."
)
HELM_TEMPLATE = "deploy/helm/tower/templates/webhooks.yaml"
HELM_GENERATED = (
    f"# Generated by `python -m certs manifests --helm --out {HELM_TEMPLATE}`;\n"
    "# do not edit. The caBundle is injected by the bootstrap, or by cert-manager's cainjector."
)
_PART_OF = "  labels:\n    app.kubernetes.io/part-of: tower\n"
_HELM_CA_INJECTION = (
    "  {{- if .Values.certManager.enabled }}\n"
    "  annotations:\n"
    f"    cert-manager.io/inject-ca-from: {SERVICE[0]}/{SERVICE[1]}\n"
    "  {{- end }}\n"
)


def manifests(
    integrations: Sequence[str] | None = None, *, helm: bool = False, scope: Scope | None = None
) -> str:
    """The webhook configurations for the in-cluster Service as a file: deploy/default's, or
    with `helm` the chart's template (cert-manager's CA injection when certManager.enabled)."""
    documents = webhook_configurations(
        None, service=SERVICE, integrations=integrations, scope=scope
    )
    text = yaml_text.dump_all(documents, sort_keys=False)
    if not helm:
        return f"{GENERATED}\n{text}"
    if text.count(_PART_OF) != len(documents):
        raise AssertionError("each configuration's labels are where the template expects them")
    return f"{HELM_GENERATED}\n{text.replace(_PART_OF, _PART_OF + _HELM_CA_INJECTION)}"


def service_names(namespace: str, service: str) -> list[str]:
    """The DNS names kube-apiserver uses for a Service."""
    return [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]


def bootstrap(
    api_client: client.ApiClient,
    *,
    namespace: str = SERVICE[0],
    service: str = SERVICE[1],
    secret: str = SECRET,
    now: datetime,
    config: KueueConfig | None = None,
    certificate: bool = True,
) -> list[str]:
    """In the cluster: make sure the Secret holds a certificate for the webhook's Service that
    is not near its end (a new one under the same CA otherwise), and put its CA into both
    webhook configurations and the CRDs' conversion webhooks. Idempotent: run at every start
    of the controller's pod and daily. What it did, in words."""
    did = []
    if certificate:
        names = service_names(namespace, service)
        if renew_if_needed(api_client, namespace, secret, names, now=now):
            did.append(f"wrote a new serving certificate to Secret {namespace}/{secret}")
        data = client.CoreV1Api(api_client).read_namespaced_secret(secret, namespace).data or {}
        ca = base64.b64decode(data["ca.crt"])
        inject_ca_bundle(api_client, ca)
        did.append(
            f"caBundle in {MUTATING_NAME}, {VALIDATING_NAME} and the conversion of "
            f"{', '.join(CONVERTED_CRDS)}"
        )
    if config is not None:
        did += configure_webhooks(api_client, config, (namespace, service))
    return did


def uninstall(
    api_client: client.ApiClient,
    *,
    namespace: str = SERVICE[0],
    service: str = SERVICE[1],
    secret: str = SECRET,
    lease: str = "tower-controller",
) -> list[str]:
    """After Tower is removed (Helm's post-delete hook): every CRD that converts through
    Tower's Service converts no more (strategy None), so the objects kept with the CRDs stay
    readable at every version served; and what Tower made at run time in its namespace (the
    webhook's Secret, the controller's Lease) is deleted. Idempotent. What it did, in words."""
    did = []
    extensions = client.ApiextensionsV1Api(api_client)
    for crd in extensions.list_custom_resource_definition().items:
        webhook = crd.spec.conversion.webhook if crd.spec.conversion else None
        ref = webhook.client_config.service if webhook and webhook.client_config else None
        name = crd.metadata.name if crd.metadata else None
        if not name or ref is None or (ref.namespace, ref.name) != (namespace, service):
            continue
        # The whole conversion replaced: its webhook goes with it.
        patch = [{"op": "replace", "path": "/spec/conversion", "value": {"strategy": "None"}}]
        extensions.patch_custom_resource_definition(name, patch)
        did.append(f"CRD {name}: conversion None (it went through {service})")
    core = client.CoreV1Api(api_client)
    coordination = client.CoordinationV1Api(api_client)
    for what, delete, name in (
        (f"Secret {namespace}/{secret}", core.delete_namespaced_secret, secret),
        (f"Lease {namespace}/{lease}", coordination.delete_namespaced_lease, lease),
    ):
        try:
            delete(name, namespace)
            did.append(f"deleted {what}")
        except ApiException as err:
            if err.status != 404:
                raise
    return did


def configure_webhooks(
    api_client: client.ApiClient, config: KueueConfig, service: tuple[str, str] = SERVICE
) -> list[str]:
    """Make both webhook configurations hook what Kueue's Configuration manages: a kind of
    job per enabled integration, in the namespaces of its managedJobsNamespaceSelector, with
    unlabelled jobs as its manageJobsWithoutQueueName says. A hook kept keeps its other
    fields (an admin's timeoutSeconds, the injected caBundle); a new one gets the CA of the
    hooks already there. The write is guarded by the resourceVersion read. What it changed,
    in words (nothing when all was as wanted)."""
    admission = client.AdmissionregistrationV1Api(api_client)
    wanted = webhook_configurations(
        None, service=service, integrations=config.integrations, scope=Scope.of(config)
    )
    did = []
    for body, read, patch in (
        (
            wanted[0],
            admission.read_mutating_webhook_configuration,
            admission.patch_mutating_webhook_configuration,
        ),
        (
            wanted[1],
            admission.read_validating_webhook_configuration,
            admission.patch_validating_webhook_configuration,
        ),
    ):
        name = body["metadata"]["name"]
        try:
            current = api_client.sanitize_for_serialization(read(name))
        except ApiException as err:
            if err.status != 404:
                raise
            did.append(f"{name} is not installed: its hooks are set when it is")
            continue
        hooks, changes = _reconciled_hooks(current.get("webhooks") or [], body["webhooks"])
        if not changes:
            continue
        patch(
            name,
            [
                {
                    "op": "test",
                    "path": "/metadata/resourceVersion",
                    "value": current["metadata"]["resourceVersion"],
                },
                {"op": "add", "path": "/webhooks", "value": hooks},
            ],
        )
        did.append(f"{name}: {'; '.join(changes)}")
    return did


def _reconciled_hooks(
    current: Sequence[Mapping[str, Any]], wanted: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The hooks to keep, in the wanted order, and what changed, in words."""
    have = {h["name"]: h for h in current}
    bundles = (h.get("clientConfig", {}).get("caBundle") for h in current)
    bundle = next((b for b in bundles if b), None)
    hooks: list[dict[str, Any]] = []
    changes: list[str] = []
    for hook in wanted:
        old = have.get(hook["name"])
        if old is None:
            new = dict(hook)
            if bundle is not None:
                new["clientConfig"] = {**hook["clientConfig"], "caBundle": bundle}
            changes.append(f"added {hook['name']}")
        else:
            new = dict(old)
            if old.get("namespaceSelector") != hook["namespaceSelector"]:
                new["namespaceSelector"] = hook["namespaceSelector"]
                changes.append(f"namespaceSelector of {hook['name']}")
        hooks.append(new)
    wanted_names = {h["name"] for h in wanted}
    for name in have:
        if name not in wanted_names and name.endswith(".tower.dev"):
            changes.append(f"removed {name} (its integration is not enabled)")
    # A hook an admin added that is not Tower's stays, last.
    hooks += [
        dict(h) for n, h in have.items() if n not in wanted_names and not n.endswith(".tower.dev")
    ]
    return hooks, changes
