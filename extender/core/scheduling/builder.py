"""Kubernetes objects, as `kubectl get -o json` returns them, into a ClusterState.

One builder for the three places that build the state: the controller applies one
configuration object at a time as its watches report them (`apply`, `delete`, grouped by
`batch` so a thousand ClusterQueues listed at once rebuild the quota tree once); the CLI
reads a whole cluster (`build`: the configuration, then every Workload); the simulator
configures from the objects its loader parsed (`configure`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from extender.core.api import parse
from extender.core.api.parse import ManifestError
from extender.core.jobframework import groups, reclaimable
from extender.core.jobframework.workloads import (
    FINISHED,
    QUOTA_RESERVED,
    admission_of,
    condition_time,
    is_true,
    workload,
)
from extender.core.scheduling.cache import ConfigModel, Configuration
from extender.core.scheduling.cycle import ClusterState

Obj = Mapping[str, Any]
Json = dict[str, Any]  # an object as read from the API, kept as read

WORKLOAD = "Workload"
_PARSERS: dict[str, Callable[[Obj], ConfigModel]] = {
    "ResourceFlavor": parse.resource_flavor,
    "ClusterQueue": parse.cluster_queue,
    "Cohort": parse.cohort,
    "LocalQueue": parse.local_queue,
    "Namespace": parse.namespace,
    "WorkloadPriorityClass": parse.workload_priority_class,
    "PriorityClass": parse.priority_class,
    "AdmissionCheck": parse.admission_check,
    "Topology": parse.topology,
}
CONFIG_KINDS = tuple(_PARSERS)
"""The kinds that configure the state (Workloads are what it decides on)."""


def parse_config(obj: Obj, kind: str | None = None) -> ConfigModel:
    """A configuration object as its model (`kind` for objects listed without one)."""
    kind = kind or str(obj.get("kind"))
    parser = _PARSERS.get(kind)
    if parser is None:
        raise ManifestError(
            "kind", f"{kind!r} is not a configuration kind (one of {', '.join(CONFIG_KINDS)})"
        )
    return parser(obj)


def _name(obj: Obj) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name")) if isinstance(meta, Mapping) else "None"


@dataclass(slots=True)
class Built:
    """What a whole read made of the state."""

    workloads: dict[str, Json] = field(default_factory=dict)  # in the state, by key
    finished: dict[str, Json] = field(default_factory=dict)  # left out: they hold nothing
    invalid: dict[str, str] = field(default_factory=dict)  # "Kind/name" -> why left out


class StateBuilder:
    """Turns objects into a ClusterState, one at a time or a whole read at once."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._staged: Configuration | None = None

    # ----- one object at a time (the controller) ------------------------------------

    def apply(self, obj: Obj, kind: str | None = None) -> ConfigModel:
        """Create or update one configuration object; returns its model. An object that does
        not parse raises ManifestError and the state keeps the last good version."""
        model = parse_config(obj, kind)
        if self._staged is not None:
            self._staged.add(model)
        else:
            config = Configuration()
            config.add(model)
            self.state.configure_with(config)
        return model

    def delete(self, kind: str, key: str) -> ConfigModel | None:
        """Delete one configuration object (name, or namespace/name); returns what the state
        held. A deleted Namespace takes its workloads with it: its labels no longer matter."""
        self._unstage(kind, key)
        state, cache = self.state, self.state.cache
        old: ConfigModel | None = None
        if kind == "ResourceFlavor":
            old = cache.flavors.get(key)
            state.delete_flavor(key)
        elif kind == "ClusterQueue":
            old = cache.cluster_queues.get(key)
            state.delete_cluster_queue(key)
        elif kind == "Cohort":
            old = cache.cohorts.get(key)
            state.delete_cohort(key)
        elif kind == "LocalQueue":
            old = cache.local_queues.get(key)
            state.delete_local_queue(key)
        elif kind == "WorkloadPriorityClass":
            old = cache.workload_priority_classes.get(key)
            state.delete_workload_priority_class(key)
        elif kind == "PriorityClass":
            old = cache.priority_classes.get(key)
            state.delete_priority_class(key)
        elif kind == "AdmissionCheck":
            old = cache.admission_checks.get(key)
            state.delete_admission_check(key)
        elif kind == "Topology":
            old = cache.topologies.get(key)
            state.delete_topology(key)
        return old

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Objects applied inside take effect together when it ends: the quota tree is
        rebuilt once for all of them. Deletions take effect at once."""
        if self._staged is not None:  # already inside one
            yield
            return
        self._staged = Configuration()
        try:
            yield
            staged = self._staged
        finally:
            self._staged = None
        self.state.configure_with(staged)

    def _unstage(self, kind: str, key: str) -> None:
        # A deletion after an update of the same object in one batch wins.
        staged = self._staged
        if staged is None:
            return
        if kind == "ResourceFlavor":
            staged.flavors[:] = [f for f in staged.flavors if f.name != key]
        elif kind == "ClusterQueue":
            staged.cluster_queues[:] = [c for c in staged.cluster_queues if c.name != key]
        elif kind == "Cohort":
            staged.cohorts[:] = [c for c in staged.cohorts if c.name != key]
        elif kind == "LocalQueue":
            staged.local_queues[:] = [lq for lq in staged.local_queues if lq.key != key]
        elif kind == "Namespace":
            staged.namespaces[:] = [n for n in staged.namespaces if n.name != key]
        elif kind == "WorkloadPriorityClass":
            staged.workload_priority_classes.pop(key, None)
        elif kind == "PriorityClass":
            staged.priority_classes.pop(key, None)
        elif kind == "AdmissionCheck":
            staged.admission_checks[:] = [c for c in staged.admission_checks if c.name != key]
        elif kind == "Topology":
            staged.topologies[:] = [t for t in staged.topologies if t.name != key]

    # ----- everything at once (the CLI, the simulator) -------------------------------

    def configure(self, config: Configuration) -> None:
        """Configuration objects already parsed (the simulator's scenario), all at once."""
        self.state.configure_with(config)

    def build(self, objects: Iterable[Json], now: float) -> Built:
        """A whole read: the configuration first (one rebuild), then the Workloads. One that
        holds quota (QuotaReserved, in a ClusterQueue that exists) holds it again since it
        was reserved (`now` if that time is unknown); any other is queued; a finished, deleted
        deactivated or on-hold one is left out. An object that does not parse is left out and named
        in `invalid`."""
        built = Built()
        workloads: list[Json] = []
        with self.batch():
            for obj in objects:
                kind = obj.get("kind")
                if kind == WORKLOAD:
                    workloads.append(obj)
                    continue
                try:
                    self.apply(obj)
                except ManifestError as err:
                    built.invalid[f"{kind}/{_name(obj)}"] = f"{err.path}: {err.message}"
        for obj in workloads:
            self._take_in(obj, now, built)
        return built

    def _take_in(self, obj: Json, now: float, built: Built) -> None:
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        if is_true(obj, FINISHED):
            built.finished[key] = obj
            return
        spec = obj.get("spec")
        if (
            meta.get("deletionTimestamp")
            or (isinstance(spec, Mapping) and spec.get("active") is False)
            or groups.on_hold(obj)  # its owner gave its quota back: it waits for none
        ):
            return
        state = self.state
        try:
            model = workload(obj)
            admission = admission_of(obj) if is_true(obj, QUOTA_RESERVED) else None
            # Its status.reclaimablePods (Kueue's ReclaimablePods, on by default): quota is
            # held, or asked, for the pods that remain, as the controller counts it.
            reclaim = reclaimable.from_status(obj)
            if reclaim:
                model = replace(model, pod_sets=reclaimable.pod_sets_after(model.pod_sets, reclaim))
            if admission is not None and state.cluster_queue_known(admission.cluster_queue):
                held = (
                    reclaimable.usage_after(admission, reclaimable.pod_set_counts(obj), reclaim)
                    if reclaim
                    else None
                )
                state.assume(model, admission, condition_time(obj, QUOTA_RESERVED, now), held)
            else:
                state.add_workload(model)
        except ManifestError as err:
            built.invalid[f"Workload/{key}"] = f"{err.path}: {err.message}"
            return
        built.workloads[key] = obj
