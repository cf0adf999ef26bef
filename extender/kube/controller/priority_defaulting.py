"""Kueue's WorkloadPriorityClassDefaulting gate: a job queued without a WorkloadPriorityClass
label is given `default`, when a WorkloadPriorityClass of that name exists.

Kueue's webhook sets the label as the job is created (it reads the class with its own
client). Tower's webhook holds no credentials, so the controller sets it: on the job, in one
conditional patch, just before it makes the job's Workload, which then has that class's
priority. A label the user wrote is never changed.
"""

from __future__ import annotations

import logging
from typing import Any

from extender.core.api.models import PRIORITY_CLASS_LABEL
from extender.kube.api import objects as o
from extender.kube.api.resources import Resource
from extender.kube.controller.context import Context

log = logging.getLogger("tower.jobs")

GATE = "WorkloadPriorityClassDefaulting"
DEFAULT_CLASS = "default"  # Kueue's DefaultWorkloadPriorityClassName

Obj = dict[str, Any]


def with_default_class(ctx: Context, resource: Resource, source: Obj) -> Obj:
    """The job as its Workload is to be made from: labelled with the default class (the job
    patched so) when the gate is on, it has no class label and the class exists."""
    if not ctx.settings.feature_gates.get(GATE, False):
        return source
    meta = source.get("metadata") or {}
    labels = meta.get("labels") or {}
    if labels.get(PRIORITY_CLASS_LABEL):
        return source
    if DEFAULT_CLASS not in ctx.state.workload_priority_classes():
        return source
    name, namespace = str(meta.get("name")), meta.get("namespace")
    patch = o.conditional({"metadata": {"labels": {PRIORITY_CLASS_LABEL: DEFAULT_CLASS}}}, source)
    patched = ctx.write(
        resource,
        "patch",
        lambda: ctx.client.patch(resource, name, patch, namespace),
        f"{namespace}/{name}",
    )
    log.info("%s %s/%s: given the WorkloadPriorityClass %r (%s)", resource.kind, namespace,
             name, DEFAULT_CLASS, GATE)  # fmt: skip
    new_meta = {**meta, "labels": {**labels, PRIORITY_CLASS_LABEL: DEFAULT_CLASS}}
    version = (patched.get("metadata") or {}).get("resourceVersion")
    if version:
        new_meta["resourceVersion"] = version
    return {**source, "metadata": new_meta}
