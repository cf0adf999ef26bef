"""The devices a Workload's pods claim (DRA), counted with the ResourceClaimTemplates cached.

The policy is the core's (extender/core/jobframework/dra.py); here the templates are read from
the cache, which watches them where the API server serves resource.k8s.io/v1 (a v1.32 one
does not: a Workload that claims devices there is inadmissible with the client's words, as in
Kueue). A template created or changed puts the Workloads that claim through it back on the
queue, so one created after its job is counted then.
"""

from __future__ import annotations

from typing import Any

from extender.core.api.models import Workload
from extender.core.jobframework import dra
from extender.kube.api.cache import CLAIM_TEMPLATES
from extender.kube.api.resources import RESOURCE_CLAIM_TEMPLATES, WORKLOADS, Resource
from extender.kube.api.store import Handler
from extender.kube.controller.context import Context

# What controller-runtime's client says when the API server does not serve the kind.
NOT_SERVED = 'no matches for kind "ResourceClaimTemplate" in version "resource.k8s.io/v1"'


def with_claimed_devices(ctx: Context, obj: dict[str, Any], model: Workload) -> Workload:
    """The Workload with its pods' claimed devices in their requests (or inadmissible, with
    Kueue's message); itself when its pods claim nothing."""
    claims = dra.claims(obj)
    if not claims:
        return model
    settings = ctx.settings
    policy = dra.DevicePolicy.of(settings.feature_gates, settings.resource_policy.device_classes)
    store = ctx.store

    def template(name: str) -> dict[str, Any] | str:
        if not store.synced(RESOURCE_CLAIM_TEMPLATES).is_set():
            return NOT_SERVED
        found = store.get(RESOURCE_CLAIM_TEMPLATES, f"{model.namespace}/{name}")
        if not isinstance(found, dict):
            return f'resourceclaimtemplates.resource.k8s.io "{name}" not found'
        return found

    devices = dra.devices(claims, template, policy)
    return model if devices is None else dra.with_devices(model, devices)


def handlers(ctx: Context) -> list[tuple[Resource, Handler]]:
    """A ResourceClaimTemplate changed: the Workloads claiming through it are looked at again."""

    def on_template(key: str, old: Any, new: Any) -> None:
        for workload in ctx.store.by_index(WORKLOADS, CLAIM_TEMPLATES, key):
            ctx.queues.workloads.add(workload)

    return [(RESOURCE_CLAIM_TEMPLATES, on_template)]
