"""The watch caches: the current object of every watched kind, trimmed, by key.

Informer threads write here (a full list after each (re)list, then every watch event); the
reconcilers read here, on the controller's thread. The answer of the controller's own write
goes in too, so it never decides again on the version it just replaced; an older version
arriving later from the watch is dropped. A deleted object leaves a tombstone with its last
version for a while, so the answer of a write sent before the deletion, arriving after it,
does not bring the object back. Handlers are told which keys changed, and only
enqueue them: nothing is decided on the watch threads.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from extender.kube.api.resources import Resource, object_key

log = logging.getLogger("tower.store")

Handler = Callable[[str, Any, Any], None]
"""Told (key, old, new) after a change; new is None when the object is gone."""
Transform = Callable[[dict[str, Any]], Any]
Indexer = Callable[[Any], Iterable[str]]


TOMBSTONES = 10_000  # deleted keys remembered, the most recent ones


def resource_version(obj: Any) -> int | None:
    """resourceVersion as a number (etcd's revision) when it is one; None otherwise."""
    if obj is None:
        return None
    value = getattr(obj, "resource_version", None)
    if value is None and isinstance(obj, dict):
        value = (obj.get("metadata") or {}).get("resourceVersion")
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def _key(resource: Resource, obj: Any) -> str | None:
    if isinstance(obj, dict):
        meta = obj.get("metadata")
        if (
            not isinstance(meta, dict)
            or not isinstance(meta.get("name"), str)
            or (resource.namespaced and not isinstance(meta.get("namespace"), str))
        ):
            return None
        return object_key(obj)
    return str(obj.key)


class Store:
    """Objects by resource and key; safe to write from many threads and read from one."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._objects: dict[str, dict[str, Any]] = {}
        self._synced: dict[str, threading.Event] = {}
        self._transforms: dict[str, Transform] = {}
        self._handlers: dict[str, list[Handler]] = {}
        self._indexers: dict[str, dict[str, Indexer]] = {}
        self._indexes: dict[tuple[str, str], dict[str, set[str]]] = {}
        # (plural, key) -> the version it was deleted at; the oldest go first past the cap.
        self._tombstones: OrderedDict[tuple[str, str], int] = OrderedDict()
        self.handler_failures = 0

    # ----- configuration --------------------------------------------------------------

    def register(self, resource: Resource, transform: Transform | None = None) -> None:
        with self._lock:
            self._objects.setdefault(resource.key, {})
            self._synced.setdefault(resource.key, threading.Event())
            if transform is not None:
                self._transforms[resource.key] = transform

    def subscribe(self, resource: Resource, handler: Handler) -> None:
        with self._lock:
            self._handlers.setdefault(resource.key, []).append(handler)

    def unsubscribe(self, resource: Resource, handler: Handler) -> None:
        with self._lock:
            handlers = self._handlers.get(resource.key, [])
            if handler in handlers:
                handlers.remove(handler)

    def add_index(self, resource: Resource, name: str, indexer: Indexer) -> None:
        with self._lock:
            self._indexers.setdefault(resource.key, {})[name] = indexer
            index: dict[str, set[str]] = {}
            for key, obj in self._objects.get(resource.key, {}).items():
                for value in indexer(obj):
                    index.setdefault(value, set()).add(key)
            self._indexes[(resource.key, name)] = index

    # ----- reads ----------------------------------------------------------------------

    def get(self, resource: Resource, key: str) -> Any:
        return self._objects.get(resource.key, {}).get(key)

    def items(self, resource: Resource) -> list[tuple[str, Any]]:
        with self._lock:
            return list(self._objects.get(resource.key, {}).items())

    def keys(self, resource: Resource) -> list[str]:
        with self._lock:
            return list(self._objects.get(resource.key, {}))

    def count(self, resource: Resource) -> int:
        return len(self._objects.get(resource.key, {}))

    def by_index(self, resource: Resource, name: str, value: str) -> list[str]:
        with self._lock:
            return sorted(self._indexes.get((resource.key, name), {}).get(value, ()))

    def synced(self, resource: Resource) -> threading.Event:
        with self._lock:
            return self._synced.setdefault(resource.key, threading.Event())

    def is_registered(self, resource: Resource) -> bool:
        return resource.key in self._objects

    # ----- writes ---------------------------------------------------------------------

    def transform(self, resource: Resource, obj: dict[str, Any]) -> Any:
        # List items come without kind and apiVersion (as kube-apiserver sends them).
        obj.setdefault("kind", resource.kind)
        obj.setdefault("apiVersion", resource.api_version)
        fn = self._transforms.get(resource.key)
        return fn(obj) if fn is not None else obj

    def replace(self, resource: Resource, items: list[Any]) -> None:
        """A fresh list (already transformed): what vanished is deleted, what changed is
        replaced, and the store counts as synced."""
        changes: list[tuple[str, Any, Any]] = []
        with self._lock:
            told = bool(self._handlers.get(resource.key))  # the first list: often nobody
            current = self._objects.setdefault(resource.key, {})
            seen: dict[str, Any] = {}
            for obj in items:
                key = _key(resource, obj)
                if key is not None:
                    seen[key] = obj
            for key in [k for k in current if k not in seen]:
                if told:
                    changes.append((key, current[key], None))
                self._set(resource, key, current[key], None)
            for key, obj in seen.items():
                old = current.get(key)
                if old is not None and resource_version(old) == resource_version(obj):
                    continue
                if told:
                    changes.append((key, old, obj))
                self._set(resource, key, old, obj)
            self._synced.setdefault(resource.key, threading.Event()).set()
        self._notify(resource, changes)

    def apply(self, resource: Resource, event: str, obj: dict[str, Any]) -> str | None:
        """One watch event; its key, or None when it changed nothing."""
        key = _key(resource, obj)
        if key is None:
            return None
        with self._lock:
            current = self._objects.setdefault(resource.key, {})
            old = current.get(key)
            if event == "DELETED":
                self._bury(resource, key, resource_version(obj))
                if old is None:
                    return None
                new = None
            else:
                version, known = resource_version(obj), resource_version(old)
                if known is not None and version is not None and version <= known:
                    return None  # our own write already brought this version, or a newer one
                new = self.transform(resource, obj)
            self._set(resource, key, old, new)
        self._notify(resource, [(key, old, new)])
        return key

    def record(self, resource: Resource, obj: dict[str, Any]) -> Any:
        """The answer of the controller's own write, or of a read (newer versions win). The
        handlers are told as for a watch event: the answer may carry others' changes too, and
        the watch event of the same version will be dropped as already known. The stored form
        is returned."""
        key = _key(resource, obj)
        if key is None:
            return None
        with self._lock:
            current = self._objects.setdefault(resource.key, {})
            old = current.get(key)
            version, known = resource_version(obj), resource_version(old)
            if known is not None and version is not None and version <= known:
                return old
            buried = self._tombstones.get((resource.key, key))
            if old is None and buried is not None and version is not None and version <= buried:
                return None  # a write answered before the object was deleted: it stays gone
            new = self.transform(resource, obj)
            self._set(resource, key, old, new)
        self._notify(resource, [(key, old, new)])
        return new

    def _bury(self, resource: Resource, key: str, version: int | None) -> None:
        if version is None:
            return
        self._tombstones[(resource.key, key)] = version
        self._tombstones.move_to_end((resource.key, key))
        while len(self._tombstones) > TOMBSTONES:
            self._tombstones.popitem(last=False)

    def put(self, resource: Resource, key: str, obj: Any) -> None:
        """Replace the stored form of an object by another form of the same version."""
        with self._lock:
            current = self._objects.setdefault(resource.key, {})
            old = current.get(key)
            if old is not None:
                self._set(resource, key, old, obj)

    def forget(self, resource: Resource, key: str) -> None:
        """The object is known to be gone (a read answered 404)."""
        with self._lock:
            old = self._objects.get(resource.key, {}).get(key)
            if old is None:
                return
            self._set(resource, key, old, None)
        self._notify(resource, [(key, old, None)])

    def _set(self, resource: Resource, key: str, old: Any, new: Any) -> None:
        current = self._objects[resource.key]
        if new is None:
            current.pop(key, None)
        else:
            current[key] = new
        for name, indexer in self._indexers.get(resource.key, {}).items():
            index = self._indexes[(resource.key, name)]
            for value in indexer(old) if old is not None else ():
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
            for value in indexer(new) if new is not None else ():
                index.setdefault(value, set()).add(key)

    def _notify(self, resource: Resource, changes: list[tuple[str, Any, Any]]) -> None:
        if not changes:
            return
        handlers = list(self._handlers.get(resource.key, ()))
        for handler in handlers:
            for key, old, new in changes:
                try:
                    handler(key, old, new)
                except Exception:  # a handler's bug must not stop the watch that called it
                    self.handler_failures += 1
                    log.exception("handler for %s %s failed", resource.key, key)
