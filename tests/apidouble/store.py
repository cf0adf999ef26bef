"""The API double's storage: kinds, objects, resourceVersions, watch history and watchers."""

from __future__ import annotations

import copy
import queue
import random
import threading
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]

# kube-apiserver's generateName alphabet (no vowels, no look-alike characters).
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Kind:
    """One served resource (built in, or from a CustomResourceDefinition)."""

    group: str
    versions: list[str]  # served; the first is the preferred (storage) version
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool = True
    short_names: list[str] = field(default_factory=list)
    singular: str = ""
    categories: list[str] = field(default_factory=list)
    schemas: dict[str, Obj] = field(default_factory=dict)  # version -> openAPIV3Schema
    columns: dict[str, list[Obj]] = field(default_factory=dict)  # version -> printer columns
    spec_is_generation: bool = True  # changes outside metadata/status bump generation
    # Nodes keep the status they are created with (kube-apiserver's NodeStrategy; see
    # fixtures/real-apiserver/nodes/node-gpu-node-1.after-create-with-auto-taint.json).
    status_on_create: bool = False
    crd: bool = False

    @property
    def key(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def storage(self) -> str:
        return self.versions[0]

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version


class Watcher:
    """One open watch stream: events are pushed here by commits."""

    def __init__(self, namespace: str | None, selector: Any) -> None:
        self.namespace = namespace
        self.selector = selector
        # (event, object, the labels it had before): a watch with a label selector turns a
        # change into or out of the selection into ADDED or DELETED, as kube-apiserver does.
        self.events: queue.Queue[tuple[str, Obj, dict[str, str] | None] | None] = queue.Queue()


class Store:
    """Objects of every kind under one lock, with a global resourceVersion like etcd's."""

    def __init__(self, history: int = 50_000) -> None:
        self.lock = threading.RLock()
        self.kinds: dict[str, Kind] = {}
        self.objects: dict[str, dict[tuple[str, str], Obj]] = {}
        # (rv, event, the object then, its labels before, its previous version or None): the
        # previous version lets a paged list serve every page from its first page's snapshot.
        self.history: dict[str, deque[tuple[int, str, Obj, dict[str, str] | None, Obj | None]]] = {}
        self._last: dict[str, dict[tuple[str, str], Obj]] = {}  # the latest snapshot by key
        self.oldest: dict[str, int] = {}  # the oldest resourceVersion a watch may start from
        self.watchers: dict[str, list[Watcher]] = {}
        self.rv = 100
        self.history_size = history
        self.rng = random.Random(7)
        self._sorted: dict[str, tuple[int, list[tuple[str, str]]]] = {}

    def register(self, kind: Kind) -> None:
        with self.lock:
            self.kinds[kind.key] = kind
            self.objects.setdefault(kind.key, {})
            self.history.setdefault(kind.key, deque(maxlen=self.history_size))
            self.oldest.setdefault(kind.key, self.rv)
            self._last.setdefault(kind.key, {})
            self.watchers.setdefault(kind.key, [])

    def unregister(self, key: str) -> None:
        with self.lock:
            self.kinds.pop(key, None)
            for watcher in self.watchers.pop(key, []):
                watcher.events.put(None)

    def sorted_keys(self, kind: Kind) -> list[tuple[str, str]]:
        """The (namespace, name) keys of a kind in order, kept until the next change."""
        cached = self._sorted.get(kind.key)
        if cached is not None and cached[0] == self.rv:
            return cached[1]
        keys = sorted(self.objects[kind.key])
        self._sorted[kind.key] = (self.rv, keys)
        return keys

    def generate_name(self, prefix: str) -> str:
        return prefix + "".join(self.rng.choice(_ALPHABET) for _ in range(5))

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def get(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        return self.objects[kind.key].get((namespace, name))

    def commit(self, kind: Kind, event: str, obj: Obj) -> Obj:
        """Store (or delete) an object at a new resourceVersion and notify watchers."""
        meta = obj["metadata"]
        rv = self.next_rv()
        meta["resourceVersion"] = str(rv)
        ident = (meta.get("namespace", ""), meta["name"])
        previous = self.objects[kind.key].get(ident)
        old_labels = (
            dict((previous.get("metadata") or {}).get("labels") or {})
            if previous is not None
            else None
        )
        if event == "DELETED":
            self.objects[kind.key].pop(ident, None)
        else:
            if event == "ADDED":
                meta.setdefault("uid", str(uuid.uuid4()))
                meta.setdefault("creationTimestamp", now_rfc3339())
            self.objects[kind.key][ident] = obj
        snapshot = copy.deepcopy(obj)
        last = self._last[kind.key]
        before = last.pop(ident, None)
        if event != "DELETED":
            last[ident] = snapshot
        history = self.history[kind.key]
        if len(history) == history.maxlen:
            self.oldest[kind.key] = history[0][0]
        history.append((rv, event, snapshot, old_labels, before))
        for watcher in self.watchers[kind.key]:
            if watcher.namespace and watcher.namespace != ident[0]:
                continue
            watcher.events.put((event, snapshot, old_labels))
        return copy.deepcopy(obj)

    def changed_since(self, kind: Kind, rv: int) -> dict[tuple[str, str], Obj | None]:
        """What each object changed after `rv` was at `rv` (None: it did not exist then).
        The caller holds the lock and has checked that `rv` is not older than the history."""
        then: dict[tuple[str, str], Obj | None] = {}
        for entry_rv, _, obj, _, before in reversed(self.history[kind.key]):
            if entry_rv <= rv:
                break
            meta = obj["metadata"]
            then[(meta.get("namespace", ""), meta["name"])] = before  # the earliest wins
        return then

    def expire_history(self, key: str, *, keep_current: bool = False) -> None:
        """Forget watch history: old RVs now get 410. A restarted watch cache still serves
        watches from the current RV (`keep_current`); otherwise even that one is too old."""
        with self.lock:
            self.history[key].clear()
            self.oldest[key] = self.rv if keep_current else self.rv + 1
            for watcher in self.watchers[key]:
                watcher.events.put(None)
            self.watchers[key] = []
