"""Kueue's admission-gated-by annotation: the gates it names, its format rules and its words.

A job (or a Workload) annotated `kueue.x-k8s.io/admission-gated-by: "example.com/a,..."`
waits, whatever quota is free, until every gate is taken off; another controller (a
pre-admission check of its own) removes its name when it is done. Kueue's feature gate
AdmissionGatedBy (Beta, on by default in v0.19.2) turns this on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

ADMISSION_GATED_BY = "kueue.x-k8s.io/admission-gated-by"
# Kueue's condition reason (QuotaReserved=False) and Event reasons.
ADMISSION_GATED = "AdmissionGated"
GATE_CLEARED_EVENT = "AdmissionGateCleared"
GATE_CLEARED_MESSAGE = "AdmissionGatedBy cleared, waiting for quota reservation"
GATE_CLEARED_EVENT_MESSAGE = "Admission gate cleared, workload is now admissible"
# The same limit as a Job's spec.managedBy, which the names follow.
MAX_GATE_NAME_LENGTH = 63

_PATH = f"metadata.annotations[{ADMISSION_GATED_BY}]"
_SUBDOMAIN_FORMAT = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_SUBDOMAIN = re.compile(f"^{_SUBDOMAIN_FORMAT}$")
_HTTP_PATH_FORMAT = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"
_HTTP_PATH = re.compile(f"^{_HTTP_PATH_FORMAT}$")
_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    f"used for validation is '{_SUBDOMAIN_FORMAT}')"
)


def gated_by(annotations: Mapping[str, Any] | None) -> str:
    """The annotation's value as written ("" when absent: not gated)."""
    value = (annotations or {}).get(ADMISSION_GATED_BY)
    return value if isinstance(value, str) else ""


def gates(value: str) -> tuple[str, ...]:
    """The gate names, comma-separated with spaces around each taken off (Kueue's csv)."""
    if not value.strip():
        return ()
    return tuple(part.strip() for part in value.split(","))


def gated_message(value: str) -> str:
    """Kueue's QuotaReserved=False message while a Workload is gated."""
    return f"Admission is gated by: {value}"


def gated_event_message(value: str) -> str:
    """Kueue's AdmissionGated Event on the Workload."""
    return f"Workload admission is gated by: {value}"


def propagated_event_message(value: str) -> str:
    """Kueue's UpdatedWorkload Event on the job whose gates reached its Workload (Go's %q)."""
    return f"Updated workload AdmissionGatedBy to {json.dumps(value)}"


def problems_on_create(value: str) -> list[str]:
    """Kueue's format rules for a new object's annotation, each as Kueue's field error."""
    found: list[str] = []
    if not value:
        return found
    seen: set[str] = set()
    for gate in gates(value):
        if not gate:
            found.append(_invalid(value, "cannot contain empty gate names"))
            continue
        if gate in seen:
            found.append(_invalid(value, f"duplicate gate name: {gate}"))
            continue
        seen.add(gate)
        found.extend(_domain_prefixed_path(gate))
        if len(gate) > MAX_GATE_NAME_LENGTH:
            found.append(f"{_PATH}: Too long: may not be more than {MAX_GATE_NAME_LENGTH} bytes")
    return found


def problems_on_update(old: str | None, new: str | None) -> list[str]:
    """Kueue's rules for a change: no gate added after creation, gates only taken off."""
    was, now = old or "", new or ""
    found: list[str] = []
    if not was and now:
        found.append(f"{_PATH}: Forbidden: cannot add admission gate after creation")
    if was and now:
        before = gates(was)
        if any(gate not in before for gate in gates(now)):
            found.append(f"{_PATH}: Forbidden: can only remove gates, not add new ones")
    return found + problems_on_create(now)


def aggregate(found: list[str]) -> str:
    """Field errors in one line, as Kubernetes' aggregate prints them."""
    return found[0] if len(found) == 1 else f"[{', '.join(found)}]"


def _invalid(value: str, detail: str) -> str:
    return f"{_PATH}: Invalid value: {json.dumps(value)}: {detail}"


def _domain_prefixed_path(gate: str) -> list[str]:
    """Kubernetes' IsDomainPrefixedPath, the rule a Job's spec.managedBy follows."""
    host, slash, path = gate.partition("/")
    if not slash or not host or not path:
        return [_invalid(gate, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    found = []
    if len(host) > 253:
        found.append(_invalid(host, "must be no more than 253 characters"))
    if not _SUBDOMAIN.match(host):
        found.append(_invalid(host, _SUBDOMAIN_MESSAGE))
    if not _HTTP_PATH.match(path):
        message = f"Invalid path (regex used for validation is '{_HTTP_PATH_FORMAT}')"
        found.append(_invalid(path, message))
    return found
