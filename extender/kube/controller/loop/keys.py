"""How the loop reconciles one key of a queue: after its object's write, retried on failure."""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from typing import TypeVar

from extender.kube.api.client import ApiError, KubeError, NotLeaderError
from extender.kube.api.resources import WORKLOADS
from extender.kube.api.workqueue import WorkQueue
from extender.kube.controller.context import Context

# The loop's logger: a failed reconcile is the loop's to report.
log = logging.getLogger("tower.controller")

K = TypeVar("K", bound=Hashable)


def reconcile_key(
    ctx: Context, queue: WorkQueue[K], name: str, reconcile: Callable[[K], float | None], key: K
) -> None:
    """Reconcile one key: requeue after what it asks, or with backoff when it failed.
    A key whose object has a write on its way waits for its answer (per-object order)."""
    pool = ctx.writes
    if pool is not None and name != "config":
        obj = (WORKLOADS.plural, key) if name in ("workloads", "groups") else key
        if pool.busy(obj):
            pool.when_idle(obj, lambda: queue.add(key))
            return
    try:
        after = reconcile(key)
    except NotLeaderError:
        raise
    except KubeError as err:
        delay = queue.retry(key, err.retry_after or 0.0)
        ctx.metrics.reconcile_errors.labels(name, "api").inc()
        quiet = isinstance(err, ApiError) and err.conflict
        failures = queue.failures(key)
        level = logging.DEBUG if quiet or (failures > 3 and failures % 10) else logging.WARNING
        log.log(level, "%s %s: %s (retrying in %.1fs)", name, key, err, delay)
        return
    except Exception:
        delay = queue.retry(key)
        ctx.metrics.reconcile_errors.labels(name, "unexpected").inc()
        log.exception("%s %s failed (retrying in %.1fs)", name, key, delay)
        return
    queue.forget(key)
    if after is not None:
        queue.add_after(key, after)
