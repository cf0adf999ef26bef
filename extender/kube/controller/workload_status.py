"""The one way a Workload is written: a counted patch whose answer the store keeps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from extender.kube.api.client import ApiError
from extender.kube.api.resources import WORKLOADS
from extender.kube.controller.context import Context

Obj = dict[str, Any]


def patch_status(
    ctx: Context, key: str, patch: Obj, purpose: str, *, paced: bool = True
) -> Obj | None:
    """Write a (conditional) status patch and record the answer (None when the Workload was
    deleted meanwhile); failures are raised."""
    namespace, name = key.split("/", 1)
    answer = ctx.write(
        WORKLOADS,
        f"status-{purpose}",
        lambda: ctx.client.patch(
            WORKLOADS, name, patch, namespace, subresource="status", paced=paced
        ),
        key,
    )
    return record(ctx, answer)


def record(ctx: Context, answer: Obj) -> Obj | None:
    """Keep the API's answer to a Workload write in the store (the answer is the record);
    None when the Workload was deleted after the write was answered."""
    answer.setdefault("kind", WORKLOADS.kind)
    answer.setdefault("apiVersion", WORKLOADS.api_version)
    recorded: Obj | None = ctx.store.record(WORKLOADS, answer)
    return recorded


def write_status(
    ctx: Context, key: str, patch: Obj, purpose: str, *, paced: bool = True
) -> Obj | None:
    """As patch_status; None when the Workload moved on (it is read again and reconciled)
    or is gone. Other failures are raised, for a retry."""
    return _settled(ctx, key, lambda: patch_status(ctx, key, patch, purpose, paced=paced))


def write_workload(ctx: Context, key: str, patch: Obj, purpose: str) -> Obj | None:
    """A conditional patch of a Workload itself (not its status), its answer kept; as
    write_status otherwise."""
    namespace, name = key.split("/", 1)
    return _settled(
        ctx,
        key,
        lambda: record(
            ctx,
            ctx.write(
                WORKLOADS,
                purpose,
                lambda: ctx.client.patch(WORKLOADS, name, patch, namespace),
                key,
            ),
        ),
    )


def _settled(ctx: Context, key: str, write: Callable[[], Obj | None]) -> Obj | None:
    """A conditional write of a Workload: a conflict reads it again (and its reconcile
    follows what the read shows), a 404 forgets it; both are None."""
    try:
        return write()
    except ApiError as err:
        if err.conflict:
            ctx.refresh(WORKLOADS, key)
            ctx.queues.workloads.add(key)
            return None
        if err.not_found:
            ctx.store.forget(WORKLOADS, key)
            return None
        raise
