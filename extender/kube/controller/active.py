"""The Active condition of an object a check controller keeps (an AdmissionCheck, a
MultiKueueCluster): written through /status, and only when it says something new."""

from __future__ import annotations

import logging
from typing import Any

from extender.kube.api import objects as o
from extender.kube.api.resources import Resource
from extender.kube.controller.context import Context

log = logging.getLogger("tower.checks")


def set_active(
    ctx: Context, resource: Resource, name: str, obj: Any, status: str, reason: str, message: str
) -> bool:
    """Active=status with this reason and message; False when it already says so."""
    current = o.condition(obj, "Active") or {}
    if (current.get("status"), current.get("reason"), current.get("message")) == (
        status,
        reason,
        message,
    ):
        return False
    change = ("Active", status, reason, message)
    patch = {"status": {"conditions": o.with_conditions(obj, ctx.clock(), change)}}
    answer = ctx.write(
        resource,
        "status-active",
        lambda: ctx.client.patch(resource, name, o.conditional(patch, obj), subresource="status"),
    )
    ctx.store.record(resource, answer)
    log.info("%s %s: Active=%s (%s: %s)", resource.kind, name, status, reason, message)
    return True
