"""A recording, in-memory KubeClient and a controller over it: fast component tests of each
reconciler without HTTP (test code; the API double is the integration tier).

FakeKube keeps objects by resource and key, applies JSON merge patches, honours
`metadata.resourceVersion` as a precondition (409 Conflict), keeps status and spec apart as
the status subresource does, and records every call in `actions`. `fail_next` makes chosen
calls fail with a given error, before or after the change is made (an ambiguous write).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from extender.kube.api import resources as r
from extender.kube.api.cache import Cache
from extender.kube.api.client import ApiError, KubeError, RequestBudget
from extender.kube.api.resources import Resource
from extender.kube.controller.context import Settings
from extender.kube.controller.loop import Controller

Obj = dict[str, Any]

BY_KIND = {
    "ResourceFlavor": r.RESOURCE_FLAVORS,
    "ClusterQueue": r.CLUSTER_QUEUES,
    "Cohort": r.COHORTS,
    "LocalQueue": r.LOCAL_QUEUES,
    "WorkloadPriorityClass": r.WORKLOAD_PRIORITY_CLASSES,
    "PriorityClass": r.PRIORITY_CLASSES,
    "Namespace": r.NAMESPACES,
    "Workload": r.WORKLOADS,
    "Job": r.JOBS,
    "JobSet": r.JOBSETS,
}


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


@dataclass
class Action:
    verb: str
    plural: str
    key: str
    subresource: str
    body: Any
    before: Obj | None = None  # the object as it was when the call arrived


@dataclass
class Failure:
    """The next call matching (verb, plural, subresource) fails with `error`; `after` makes
    the change first (the answer is lost: an ambiguous write)."""

    verb: str
    plural: str
    error: KubeError
    subresource: str = ""
    after: bool = False
    times: int = 1


class FakeKube:
    """The KubeClient protocol in memory, recording what it is asked."""

    def __init__(self) -> None:
        self.budget = RequestBudget(1e9, 10**9)
        self.objects: dict[tuple[str, str], Obj] = {}
        self.actions: list[Action] = []
        self.failures: list[Failure] = []
        self.rv = 100
        self.lock = threading.Lock()

    # ----- test helpers ----------------------------------------------------------------

    def add(self, obj: Obj) -> Obj:
        """Store an object as if someone else created it; the stored copy is returned."""
        resource = BY_KIND[obj["kind"]]
        stored = copy.deepcopy(obj)
        stored.setdefault("apiVersion", resource.api_version)
        meta = stored.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{meta['name']}")
        meta.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
        meta.setdefault("generation", 1)
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        self.objects[(resource.plural, r.object_key(stored))] = stored
        return copy.deepcopy(stored)

    def current(self, resource: Resource, key: str) -> Obj | None:
        obj = self.objects.get((resource.plural, key))
        return copy.deepcopy(obj) if obj is not None else None

    def change(self, resource: Resource, key: str, fn: Callable[[Obj], None]) -> Obj:
        """Someone else changes an object (a new resourceVersion)."""
        obj = copy.deepcopy(self.objects[(resource.plural, key)])
        fn(obj)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[(resource.plural, key)] = obj
        return copy.deepcopy(obj)

    def writes(self, verb: str | None = None, plural: str | None = None) -> list[Action]:
        return [
            a
            for a in self.actions
            if a.verb != "get"
            and (verb is None or a.verb == verb)
            and (plural is None or a.plural == plural)
        ]

    def turned_true(self, condition: str) -> list[str]:
        """Keys of the objects whose patches turned `condition` True, in order."""
        out = []
        for action in self.writes("patch"):
            wanted = {
                c.get("type"): c.get("status")
                for c in ((action.body or {}).get("status") or {}).get("conditions") or []
            }
            had = {
                c.get("type"): c.get("status")
                for c in ((action.before or {}).get("status") or {}).get("conditions") or []
            }
            if wanted.get(condition) == "True" and had.get(condition) != "True":
                out.append(action.key)
        return out

    def fail_next(self, failure: Failure) -> None:
        self.failures.append(failure)

    def _failure(self, verb: str, plural: str, subresource: str) -> Failure | None:
        for failure in self.failures:
            if (failure.verb, failure.plural, failure.subresource) == (verb, plural, subresource):
                failure.times -= 1
                if failure.times <= 0:
                    self.failures.remove(failure)
                return failure
        return None

    # ----- the protocol ----------------------------------------------------------------

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        key = f"{namespace}/{name}" if namespace else name
        self.actions.append(Action("get", resource.plural, key, "", None))
        failure = self._failure("get", resource.plural, "")
        if failure is not None:
            raise failure.error
        obj = self.objects.get((resource.plural, key))
        if obj is None:
            raise ApiError(404, "NotFound", f'{resource.qualified} "{name}" not found')
        return copy.deepcopy(obj)

    def list(self, resource: Resource, namespace: str | None = None, **_: Any) -> Any:
        items = [copy.deepcopy(o) for (p, _), o in self.objects.items() if p == resource.plural]
        return items, str(self.rv)

    def watch(self, *args: Any, **kwargs: Any) -> Any:
        return iter(())

    def discover(self, group_version: str) -> bool:
        return True

    def served(self, group_version: str) -> frozenset[str] | None:
        """Every resource Tower knows of that group/version: the fake serves them all."""
        from extender.kube.api import resources

        return frozenset(
            r.plural
            for r in vars(resources).values()
            if isinstance(r, Resource) and r.api_version == group_version
        )

    def create(self, resource: Resource, obj: Obj, namespace: str | None = None) -> Obj:
        body = copy.deepcopy(obj)
        meta = body.setdefault("metadata", {})
        if namespace:
            meta["namespace"] = namespace
        key = r.object_key(body)
        self.actions.append(Action("create", resource.plural, key, "", body))
        failure = self._failure("create", resource.plural, "")
        if failure is not None and not failure.after:
            raise failure.error
        if (resource.plural, key) in self.objects:
            raise ApiError(409, "AlreadyExists", f'{resource.qualified} "{key}" already exists')
        body.pop("status", None)
        body.setdefault("kind", resource.kind)
        stored = self.add(body)
        if failure is not None:
            raise failure.error
        return stored

    def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        content_type: str = "",
        subresource: str = "",
        paced: bool = True,
    ) -> Obj:
        key = f"{namespace}/{name}" if namespace else name
        self.actions.append(
            Action("patch", resource.plural, key, subresource, patch, self.current(resource, key))
        )
        failure = self._failure("patch", resource.plural, subresource)
        if failure is not None and not failure.after:
            raise failure.error
        current = self.objects.get((resource.plural, key))
        if current is None:
            raise ApiError(404, "NotFound", f'{resource.qualified} "{name}" not found')
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        merged = merge(current, patch)
        if subresource == "status":
            new = {**current, "status": merged.get("status") or {}}
        else:
            new = {**merged, "status": current.get("status")}
            if new.get("status") is None:
                new.pop("status")
        new["metadata"] = {
            **current["metadata"],
            **{k: v for k, v in merged["metadata"].items() if k in ("labels", "annotations")},
        }
        if new == current:
            result = copy.deepcopy(current)
        else:
            self.rv += 1
            new["metadata"]["resourceVersion"] = str(self.rv)
            self.objects[(resource.plural, key)] = new
            result = copy.deepcopy(new)
        if failure is not None:
            raise failure.error
        return result

    def update(self, resource: Resource, obj: Obj, *, subresource: str = "") -> Obj:
        key = r.object_key(obj)
        self.actions.append(Action("update", resource.plural, key, subresource, obj))
        self.objects[(resource.plural, key)] = copy.deepcopy(obj)
        return copy.deepcopy(obj)

    def delete(self, resource: Resource, name: str, namespace: str | None = None, **_: Any) -> Obj:
        key = f"{namespace}/{name}" if namespace else name
        self.actions.append(Action("delete", resource.plural, key, "", None))
        failure = self._failure("delete", resource.plural, "")
        if failure is not None:
            raise failure.error
        if self.objects.pop((resource.plural, key), None) is None:
            raise ApiError(404, "NotFound", f'{resource.qualified} "{name}" not found')
        return {"kind": "Status", "status": "Success"}


class Clock:
    """Virtual time for the controller: wall and monotonic move together."""

    def __init__(self, now: float = 1_767_225_600.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now - 1_767_225_600.0

    def advance(self, seconds: float) -> None:
        self.now += seconds


def controller_over(
    fake: FakeKube, clock: Clock | None = None, **settings: Any
) -> tuple[Controller, Clock]:
    """A controller whose cache holds what `fake` holds (no informers: the test plays the
    watch by calling `watch_event`), rebuilt and ready. Its writes are sent on the loop's
    thread (write_concurrency 0), so a test steps through them turn by turn; the write pool
    is tested on its own (tests/unit/kube/test_write_pool.py) and under every API-double test."""
    clock = clock or Clock()
    cache = Cache(fake)  # type: ignore[arg-type]
    cache.discover_kinds()  # the fake serves every kind
    for resource in cache.resources:
        items = [
            cache.store.transform(resource, copy.deepcopy(o))
            for (plural, _), o in fake.objects.items()
            if plural == resource.plural
        ]
        cache.store.replace(resource, items)
    ctl = Controller(
        fake,  # type: ignore[arg-type]
        cache,
        settings=Settings(**{"status_interval": 0.0, "write_concurrency": 0, **settings}),
        clock=clock,
        monotonic=clock.monotonic,
    )
    ctl.start()
    return ctl, clock


def watch_event(ctl: Controller, fake: FakeKube, resource: Resource, key: str) -> None:
    """The watch delivers the object's current version (or its deletion) to the cache."""
    obj = fake.current(resource, key)
    if obj is None:
        old = ctl.ctx.store.get(resource, key)
        if old is not None:
            ctl.ctx.store.forget(resource, key)
        return
    ctl.ctx.store.apply(resource, "MODIFIED", obj)


def settle(ctl: Controller, turns: int = 5) -> None:
    """Run `turns` turns of the loop's work (no sleeping)."""
    for _ in range(turns):
        ctl.turn()


def unexpected(ctl: Controller) -> float:
    """Reconciles that failed with an unexpected exception (a bug, logged with a traceback)."""
    total = float(ctl.ctx.store.handler_failures)
    for name in ("workloads", "jobs", "loop"):
        total += (
            ctl.metrics.registry.get_sample_value(
                "tower_reconcile_errors_total", {"controller": name, "reason": "unexpected"}
            )
            or 0.0
        )
    return total
