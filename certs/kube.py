"""Certificates into the cluster: the Secret, caBundle injection, webhook configurations."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from certs import pki
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
CONVERTED_CRDS = (
    "clusterqueues.kueue.x-k8s.io",
    "localqueues.kueue.x-k8s.io",
    "workloads.kueue.x-k8s.io",
    "cohorts.kueue.x-k8s.io",
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
    object_selector: dict[str, Any] | None = None,
    namespace_selector: dict[str, Any] | None = None,
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
    webhook["namespaceSelector"] = namespace_selector or {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "tower-system"],
            }
        ]
    }
    return webhook


def webhook_configurations(
    ca_bundle: bytes | None,
    *,
    url: str | None = None,
    service: tuple[str, str] | None = None,
    integrations: Sequence[str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Mutating and Validating WebhookConfigurations Tower needs: four webhooks for each
    kind of job of these integrations (Kueue's default set when None) that the registry has
    an adapter for, named after its kind (mjob-create.tower.dev), then Kueue's objects.

    Unlike Kueue's, the jobs' webhooks select only objects that carry the queue-name
    label (plus, for namespaces labelled tower.dev/manage-jobs-without-queue-name=true,
    unlabelled ones), so a webhook outage never blocks jobs Tower does not queue. CREATE
    fails closed (a queued job must start suspended); UPDATE fails open (the controller
    re-suspends a job started by hand).
    """
    labelled = {"matchExpressions": [{"key": QUEUE_LABEL, "operator": "Exists"}]}
    unlabelled = {"matchExpressions": [{"key": QUEUE_LABEL, "operator": "DoesNotExist"}]}
    opted_in = {"matchLabels": {OPT_IN_LABEL: "true"}}

    def hook(
        name: str,
        path: str,
        rule: dict[str, Any],
        policy: str,
        objects: dict[str, Any] | None = None,
        namespaces: dict[str, Any] | None = None,
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
            hook(f"m{short}-create.tower.dev", mutate, create, "Fail", labelled),
            hook(
                f"m{short}-update.tower.dev",
                mutate,
                _rule(group, version, resource, ["UPDATE"]),
                "Ignore",
                labelled,
            ),
            hook(f"m{short}-default-queue.tower.dev", mutate, create, "Fail", unlabelled, opted_in),
        ]
        validating.append(
            hook(
                f"v{short}.tower.dev",
                validate,
                _rule(group, version, resource, ["CREATE", "UPDATE"]),
                "Ignore",
                labelled,
            )
        )
    for kind, resource in KUEUE_KINDS.items():
        validating.append(
            hook(
                f"v{kind}.tower.dev",
                f"/validate-kueue-x-k8s-io-v1beta2-{kind}",
                _rule("kueue.x-k8s.io", "v1beta2", resource, ["CREATE", "UPDATE"]),
                "Fail",
                namespaces={},
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
) -> list[str]:
    """Register both webhook configurations against a webhook served at `url`, for the kinds
    of job of these integrations (Kueue's default set when None)."""
    api = client.AdmissionregistrationV1Api(api_client)
    names = []
    for body in webhook_configurations(ca_bundle, url=url, integrations=integrations):
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


SERVICE = ("tower-system", "tower-webhook")
GENERATED = (
    "# Generated by `python -m certs manifests --out deploy/default/webhooks.yaml`; do not edit.\n"
    "# The caBundle is injected by `python -m certs bootstrap` (the controller's init container)."
)
SECRET = "tower-webhook-tls"
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


def manifests(integrations: Sequence[str] | None = None, *, helm: bool = False) -> str:
    """The webhook configurations for the in-cluster Service as a file: deploy/default's, or
    with `helm` the chart's template (cert-manager's CA injection when certManager.enabled)."""
    documents = webhook_configurations(None, service=SERVICE, integrations=integrations)
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
) -> list[str]:
    """In the cluster: make sure the Secret holds a certificate for the webhook's Service that
    is not near its end (a new one under the same CA otherwise), and put its CA into both
    webhook configurations and the CRDs' conversion webhooks. Idempotent: run at every start
    of the controller's pod and daily. What it did, in words."""
    did = []
    if renew_if_needed(api_client, namespace, secret, service_names(namespace, service), now=now):
        did.append(f"wrote a new serving certificate to Secret {namespace}/{secret}")
    data = client.CoreV1Api(api_client).read_namespaced_secret(secret, namespace).data or {}
    ca = base64.b64decode(data["ca.crt"])
    inject_ca_bundle(api_client, ca)
    did.append(
        f"caBundle in {MUTATING_NAME}, {VALIDATING_NAME} and the conversion of "
        f"{', '.join(CONVERTED_CRDS)}"
    )
    return did
