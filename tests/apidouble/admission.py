"""Calling admission webhooks the way kube-apiserver does: AdmissionReview over HTTPS.

The request shape follows shared/fixtures/real-apiserver/admission/ (a generateName CREATE
reaches mutating webhooks without name or uid; `?timeout=10s` on the URL; a denial without a
status code becomes HTTP 400, with one it keeps the code; warnings become `Warning: 299`
headers, de-duplicated). Only `clientConfig.url` is called; a Service reference fails as one
with no endpoints does on kube-apiserver. matchPolicy/matchConditions/reinvocation are not
evaluated.
"""

from __future__ import annotations

import base64
import copy
import http.client
import json
import ssl
import tempfile
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import jsonpatch

from extender.core.api.parse import ManifestError, label_selector

Obj = dict[str, Any]


@dataclass
class AdmissionError(Exception):
    """An admission outcome that stops the request: HTTP status and Status body."""

    code: int
    reason: str
    message: str


@dataclass
class Outcome:
    obj: Obj
    warnings: list[str] = field(default_factory=list)


def _selects(selector: Any, labels: dict[str, str]) -> bool:
    if not selector:
        return True
    try:
        return label_selector(selector, "selector").matches(labels)
    except ManifestError:
        return False


def _rule_matches(rules: list[Obj], group: str, version: str, plural: str, operation: str) -> bool:
    for rule in rules or []:
        if operation not in rule.get("operations", []) and "*" not in rule.get("operations", []):
            continue
        if group not in rule.get("apiGroups", []) and "*" not in rule.get("apiGroups", []):
            continue
        if version not in rule.get("apiVersions", []) and "*" not in rule.get("apiVersions", []):
            continue
        if plural in rule.get("resources", []) or "*" in rule.get("resources", []):
            return True
    return False


def _post(hook: Obj, review: Obj) -> tuple[Obj | None, str | None]:
    """POST one review; returns (response, None) or (None, why it could not be called)."""
    config = hook.get("clientConfig") or {}
    url = config.get("url")
    service = config.get("service")
    if not url and service:
        # The double runs no Service: every one has no endpoints, as a stopped Kueue's.
        timeout = int(hook.get("timeoutSeconds") or 10)
        where = f"{service.get('name')}.{service.get('namespace')}.svc:{service.get('port', 443)}"
        return None, (
            f'failed to call webhook: Post "https://{where}{service.get("path", "")}'
            f'?timeout={timeout}s": no endpoints available for service "{service.get("name")}"'
        )
    if not url:
        return None, "the API double supports only clientConfig.url or a Service"
    timeout = int(hook.get("timeoutSeconds") or 10)
    parts = urlsplit(url)
    target = f"{parts.path or '/'}?timeout={timeout}s"
    context = ssl.create_default_context()
    bundle = config.get("caBundle")
    if bundle:
        with tempfile.NamedTemporaryFile("wb", suffix=".crt") as ca:
            ca.write(base64.b64decode(bundle))
            ca.flush()
            context.load_verify_locations(ca.name)
    connection = http.client.HTTPSConnection(
        parts.hostname or "", parts.port or 443, timeout=timeout, context=context
    )
    try:
        body = json.dumps(review).encode()
        connection.request(
            "POST",
            target,
            body=body,
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json, */*",
                "User-Agent": "kube-apiserver-admission",
            },
        )
        answer = connection.getresponse()
        data = answer.read()
        if answer.status != 200:
            return None, f"received invalid webhook response: status code {answer.status}"
        return json.loads(data), None
    except (OSError, ValueError) as err:
        return None, f'failed to call webhook: Post "{url}?timeout={timeout}s": {err}'
    finally:
        connection.close()


def review_request(
    *,
    kind: Obj,
    resource: Obj,
    namespace: str | None,
    name: str | None,
    operation: str,
    user: Obj,
    obj: Obj | None,
    old: Obj | None,
    dry_run: bool = False,
) -> Obj:
    request: Obj = {
        "uid": str(uuid.uuid4()),
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "operation": operation,
        "userInfo": user,
        "object": obj,
        "oldObject": old,
        "dryRun": dry_run,
        "options": {
            "kind": "CreateOptions" if operation == "CREATE" else "UpdateOptions",
            "apiVersion": "meta.k8s.io/v1",
        },
    }
    if name:
        request["name"] = name
    if namespace:
        request["namespace"] = namespace
    return {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": request}


def admit(
    configurations: list[tuple[str, Obj]],
    *,
    group: str,
    version: str,
    kind: str,
    plural: str,
    operation: str,
    obj: Obj,
    old: Obj | None,
    namespace_labels: dict[str, str],
    user: Obj,
    dry_run: bool = False,
) -> Outcome:
    """Run mutating then validating webhooks (configurations are (type, object) pairs)."""
    outcome = Outcome(copy.deepcopy(obj))
    for phase in ("mutating", "validating"):
        for config_type, config in configurations:
            if config_type != phase:
                continue
            for hook in config.get("webhooks") or []:
                if not _rule_matches(hook.get("rules"), group, version, plural, operation):
                    continue
                labels = (outcome.obj.get("metadata") or {}).get("labels") or {}
                old_labels = ((old or {}).get("metadata") or {}).get("labels") or {}
                selector = hook.get("objectSelector")
                if not (_selects(selector, labels) or (old and _selects(selector, old_labels))):
                    continue
                if not _selects(hook.get("namespaceSelector"), namespace_labels):
                    continue
                meta = outcome.obj.get("metadata") or {}
                review = review_request(
                    kind={"group": group, "version": version, "kind": kind},
                    resource={"group": group, "version": version, "resource": plural},
                    namespace=meta.get("namespace"),
                    name=meta.get("name"),
                    operation=operation,
                    user=user,
                    obj=outcome.obj,
                    old=old,
                    dry_run=dry_run,
                )
                answer, failure = _post(hook, review)
                if failure is not None or answer is None:
                    if hook.get("failurePolicy", "Fail") == "Ignore":
                        continue
                    raise AdmissionError(
                        500, "InternalError", f'failed calling webhook "{hook["name"]}": {failure}'
                    )
                response = answer.get("response") or {}
                for warning in response.get("warnings") or []:
                    if warning not in outcome.warnings:
                        outcome.warnings.append(warning)
                if not response.get("allowed"):
                    status = response.get("status") or {}
                    code = int(status.get("code") or 400)
                    raise AdmissionError(
                        code,
                        str(status.get("reason") or ("Forbidden" if code == 403 else "")),
                        f'admission webhook "{hook["name"]}" denied the request: '
                        f"{status.get('message', '')}",
                    )
                if phase == "mutating" and response.get("patch"):
                    ops = json.loads(base64.b64decode(response["patch"]))
                    outcome.obj = jsonpatch.apply_patch(outcome.obj, ops)
    return outcome
