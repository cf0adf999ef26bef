"""Reads multi-document YAML as `kubectl apply` would and turns it into core models."""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
import yaml

from extender.core.api import parse, unacted
from extender.core.api.models import QUEUE_NAME_LABEL
from extender.core.api.parse import ManifestError
from extender.core.jobframework import groups, registry
from extender.core.jobframework.adapter import JobAdapter
from extender.core.jobframework.jobs import queue_mutation
from extender.core.jobframework.parent import TemplateParent
from extender.core.placement.fit import Node, node_of
from extender.core.scheduling.builder import CONFIG_KINDS, parse_config
from extender.core.scheduling.cache import Configuration

ARRIVAL_ANNOTATION = "tower.dev/sim-arrival"
DURATION_ANNOTATION = "tower.dev/sim-duration"
DEFAULT_DURATION = 60.0
# The characters Kubernetes uses for generateName suffixes (utilrand.String).
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}

KINDS = (
    "ResourceFlavor",
    "ClusterQueue",
    "Cohort",
    "LocalQueue",
    "WorkloadPriorityClass",
    "PriorityClass",
    "Namespace",
    "Node",
    "Workload",
    # ...and every kind of job the job framework manages (`job_kinds`).
)


def referenced_kinds() -> dict[str, tuple[str, bool]]:
    """Kind -> (group, namespaced) of the objects jobs refer to (a TrainJob's runtimes)."""
    out = {}
    for adapter in registry.ADAPTERS.values():
        for group, kind, _ in adapter.referenced_kinds:
            out[kind] = (group, not kind.startswith("Cluster"))
    return out


def template_parents() -> dict[str, TemplateParent]:
    """Kind -> the kinds whose pods are queued one by one (a Deployment)."""
    return {p.kind: p for p in registry.PARENTS.values()}


def job_kinds() -> dict[str, JobAdapter]:
    """Kind -> adapter of every kind of job the controller can manage: the simulator reads
    each of them as the controller does."""
    return {a.kind: a for a in registry.ADAPTERS.values()}


POD_GROUP = "PodGroup"  # the simulator's job for a plain pod group: its members, read whole


class LoadError(Exception):
    """A manifest problem, already phrased as the one line a user sees."""


@dataclass(slots=True)
class SimJob:
    """A Job or JobSet as the simulator runs it: the mutated object and its timing."""

    kind: str
    namespace: str
    name: str
    uid: str
    obj: dict[str, Any]
    arrival: float
    duration: float
    managed: bool
    source: str


@dataclass(slots=True)
class Scenario:
    """Everything read from the files, in the order it was given."""

    # ResourceFlavors, ClusterQueues, Cohorts, LocalQueues, Namespaces, priority classes.
    config: Configuration = field(default_factory=Configuration)
    # With nodes, physical fit is checked; each joins at its arrival (virtual seconds).
    nodes: list[tuple[float, Node]] = field(default_factory=list)
    jobs: list[SimJob] = field(default_factory=list)
    # One line per field Tower does not act on, as the webhook would warn (and hints too).
    not_acted_on: list[str] = field(default_factory=list)
    # Objects jobs refer to (a TrainJob's runtime), by (group, kind, namespace, name).
    referenced: dict[tuple[str, str, str | None, str], Mapping[str, Any]] = field(
        default_factory=dict
    )

    def resolve(self, adapter: JobAdapter, obj: Mapping[str, Any]) -> dict[str, Any]:
        """The job with the objects it refers to attached, from those read."""
        refs = adapter.references(obj)
        found = {
            ref: self.referenced.get((ref.group, ref.kind, ref.namespace, ref.name)) for ref in refs
        }
        return adapter.resolved(obj, found)


def parse_duration(value: Any, path: str) -> float:
    """A Go-style duration ("5s", "1m30s", "250ms") or a plain number of seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        text = str(value).strip()
        try:
            seconds = float(text)
        except ValueError:
            parts = _DURATION.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                raise ManifestError(
                    path, f"{value!r} is not a duration (use e.g. 30s, 2m, 1m30s, 500ms)"
                ) from None
            seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds < 0:
        raise ManifestError(path, f"must not be negative, got {value!r}")
    return seconds


# libyaml's parser where PyYAML was built with it (the wheels are): the same documents, a
# tenth of the time.
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _tree_copy(value: Any) -> Any:
    """A copy of a parsed YAML tree: new mappings and lists, the same immutable scalars."""
    if isinstance(value, dict):
        return {k: _tree_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_tree_copy(v) for v in value]
    return value


def _documents(path: str) -> Iterator[tuple[int, Any]]:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as err:
        raise LoadError(f"{path}: cannot read: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise LoadError(f"{path}: not UTF-8 text (byte {err.start})") from None
    try:
        docs = list(yaml.load_all(text, Loader=_SAFE_LOADER))
    except yaml.YAMLError as err:
        where = ""
        mark = getattr(err, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise LoadError(f"{path}: not valid YAML{where}: {problem}") from None
    index = 0
    for doc in docs:
        if doc is None:
            continue
        index += 1
        if isinstance(doc, Mapping) and doc.get("kind") == "List":
            for item in doc.get("items") or ():
                yield index, item
        else:
            yield index, doc


class Loader:
    """Reads files into a Scenario; names from generateName are made deterministic by seed."""

    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)
        self.scenario = Scenario()
        self._names: set[tuple[str, str, str]] = set()
        self._serial = 0
        self._pod_groups: dict[tuple[str, str], list[SimJob]] = {}

    def load(self, path: str) -> Scenario:
        """Read one file; raises LoadError with one line naming file, document, field."""
        for index, doc in _documents(path):
            kind = doc.get("kind") if isinstance(doc, Mapping) else None
            meta = doc.get("metadata") if isinstance(doc, Mapping) else None
            name = (
                (meta.get("name") or meta.get("generateName"))
                if isinstance(meta, Mapping)
                else None
            )
            where = f"{path}: document {index} ({kind or '?'}/{name or '?'})"
            if not isinstance(doc, Mapping):
                raise LoadError(f"{where}: must be a YAML mapping, got {type(doc).__name__}")
            if not isinstance(meta, Mapping):
                raise LoadError(f"{where}: metadata: is required")
            try:
                self._add(doc, f"{path}#{index}")
            except ManifestError as err:
                raise LoadError(f"{where}: {err.path}: {err.message}") from None
        return self.scenario

    def _add(self, doc: Mapping[str, Any], source: str) -> None:
        kind = doc.get("kind")
        s = self.scenario
        if isinstance(kind, str):
            raw = doc.get("metadata")
            meta: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
            name = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p)
            s.not_acted_on.extend(f.message(name or "?") for f in unacted.used(kind, doc))
        if kind in CONFIG_KINDS:
            s.config.add(parse_config(doc))
        elif kind == "Node":
            node = node_of(doc)
            if not node.name:
                raise ManifestError("metadata.name", "is required")
            annotations = (doc.get("metadata") or {}).get("annotations") or {}
            arrival = parse_duration(
                annotations.get(ARRIVAL_ANNOTATION, "0s"),
                f"metadata.annotations[{ARRIVAL_ANNOTATION}]",
            )
            s.nodes.append((arrival, node))
        elif kind == "Pod" and groups.group_name(doc) is not None:
            self._member(self._job(doc, source))
        elif kind == "Workload" or kind in job_kinds():
            s.jobs.append(self._job(doc, source))
        elif (
            isinstance(kind, str)
            and kind in template_parents()
            and template_parents()[kind].runs_groups
        ):
            s.jobs.extend(self._groups_of(template_parents()[kind], doc, source))
        elif isinstance(kind, str) and kind in template_parents():
            for i, pod in enumerate(self._pods_of(template_parents()[kind], doc)):
                s.jobs.append(self._job(pod, f"{source}, pod {i}"))  # one source per job
        elif isinstance(kind, str) and kind in referenced_kinds():
            group, namespaced = referenced_kinds()[kind]
            ref_meta = parse.as_map(doc.get("metadata"), "metadata")
            if not ref_meta.get("name"):
                raise ManifestError("metadata.name", "is required")
            namespace = str(ref_meta.get("namespace") or "default") if namespaced else None
            s.referenced[(group, kind, namespace, str(ref_meta["name"]))] = doc
        else:
            kinds = ", ".join((*KINDS, *job_kinds(), *template_parents(), *referenced_kinds()))
            raise ManifestError(
                "kind", f"{kind!r} is not a kind the simulator reads (one of {kinds})"
            )

    def _job(
        self, doc: Mapping[str, Any], source: str, parent: TemplateParent | None = None
    ) -> SimJob:
        kind = str(doc["kind"])
        if kind == "Workload":
            parse.check_version(doc, kind)
            expected = str(doc["apiVersion"])
        elif parent is not None:
            expected = f"{parent.group}/{parent.version}"
        else:
            expected = job_kinds()[kind].api_version
        if doc.get("apiVersion") != expected:
            raise ManifestError(
                "apiVersion", f"{kind} must be {expected}, got {doc.get('apiVersion')!r}"
            )
        obj: dict[str, Any] = _tree_copy(doc)  # private: YAML aliases may share parts of it
        meta = obj["metadata"]
        namespace = str(meta.get("namespace") or "default")
        meta["namespace"] = namespace
        name = meta.get("name")
        if not name:
            prefix = meta.get("generateName")
            if not prefix:
                raise ManifestError("metadata.name", "is required (or metadata.generateName)")
            name = self._generate(str(prefix), kind, namespace)
            meta["name"] = name
        elif (kind, namespace, name) in self._names:
            raise ManifestError("metadata.name", f"{kind} {namespace}/{name} already exists")
        parse.name_of(obj)
        self._names.add((kind, namespace, str(name)))
        # Creation order is the tie-break Kueue falls back to (uid) when timestamps are
        # equal; uids that grow with each document keep the order the user wrote.
        self._serial += 1
        uid = str(uuid.UUID(int=(self._serial << 64) | self._rng.getrandbits(64), version=4))
        meta["uid"] = uid
        annotations = meta.get("annotations") or {}
        arrival = parse_duration(
            annotations.get(ARRIVAL_ANNOTATION, 0), f'metadata.annotations["{ARRIVAL_ANNOTATION}"]'
        )
        duration = parse_duration(
            annotations.get(DURATION_ANNOTATION, DEFAULT_DURATION),
            f'metadata.annotations["{DURATION_ANNOTATION}"]',
        )
        if kind == "Workload" or parent is not None:
            # Submitted directly, as Kueue's own benchmark does: nothing to mutate (a group's
            # parent is marked by its caller).
            return SimJob(kind, namespace, str(name), uid, obj, arrival, duration, True, source)
        # The same mutation the webhook applies on CREATE, after the checks the webhook makes
        # of the fields it reads.
        spec = parse.as_map(obj.get("spec"), "spec")
        if spec.get("suspend") is not None and not isinstance(spec["suspend"], bool):
            raise ManifestError("spec.suspend", f"must be a boolean, got {spec['suspend']!r}")
        parse.as_map(meta.get("labels"), "metadata.labels")
        patch = queue_mutation(obj)
        mutated = jsonpatch.apply_patch(obj, patch, in_place=True) if patch else obj
        return SimJob(
            kind, namespace, str(name), uid, mutated, arrival, duration, bool(patch), source
        )

    def _member(self, pod: SimJob) -> None:
        """A pod of a plain group: the group becomes one job once all its members are read
        (the controller makes its Workload then)."""
        found = groups.group_name(pod.obj)
        assert found is not None
        key = (pod.namespace, found[1])
        members = self._pod_groups.setdefault(key, [])
        members.append(pod)
        total = groups.total_count(pod.obj)
        if len(members) == total:
            first = members[0]
            obj = {"metadata": first.obj["metadata"], "members": [m.obj for m in members]}
            self.scenario.jobs.append(
                SimJob(POD_GROUP, pod.namespace, found[1], first.uid, obj, first.arrival,
                       first.duration, True, first.source)
            )  # fmt: skip

    def incomplete_groups(self) -> list[str]:
        """Pod groups with fewer members than their total count: they would wait forever."""
        return [
            f"pod group {ns}/{name} has {len(members)} of its "
            f"{groups.total_count(members[0].obj)} pods: it would wait for the rest forever"
            for (ns, name), members in self._pod_groups.items()
            if len(members) < groups.total_count(members[0].obj)
        ]

    def _groups_of(
        self, parent: TemplateParent, doc: Mapping[str, Any], source: str
    ) -> list[SimJob]:
        """A StatefulSet's or LeaderWorkerSet's group Workloads, one job each, from the object
        marked as its webhook marks it."""
        job = self._job({**doc, "apiVersion": doc.get("apiVersion")}, source, parent=parent)
        queue = (job.obj["metadata"].get("labels") or {}).get(QUEUE_NAME_LABEL)
        if queue:
            job.obj.update(jsonpatch.apply_patch(job.obj, parent.template_ops(job.obj, str(queue))))
        return [
            SimJob(parent.kind, job.namespace, name, job.uid, job.obj, job.arrival, job.duration,
                   bool(queue), f"{source}, Workload {name}")  # one source per job
            for name in parent.workload_names(job.obj)
        ]  # fmt: skip

    def _pods_of(self, parent: TemplateParent, doc: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The pods a Deployment makes, each its own Workload: `replicas` copies of its
        template, marked as its webhook marks it."""
        obj: dict[str, Any] = _tree_copy(doc)
        meta = parse.as_map(obj.get("metadata"), "metadata")
        name = meta.get("name")
        if not name:
            raise ManifestError("metadata.name", "is required")
        spec = parse.as_map(obj.get("spec"), "spec")
        replicas = spec.get("replicas", 1)
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
            raise ManifestError(
                "spec.replicas", f"must be a non-negative integer, got {replicas!r}"
            )
        template = parse.as_map(spec.get("template"), "spec.template", required=True)
        queue = parse.as_map(meta.get("labels"), "metadata.labels").get(QUEUE_NAME_LABEL)
        if queue:
            obj = jsonpatch.apply_patch(obj, parent.template_ops(obj, str(queue)))
            template = obj["spec"]["template"]
        pods = []
        for i in range(replicas):
            pod_meta = {**_tree_copy(template.get("metadata") or {}), "name": f"{name}-{i}"}
            if meta.get("namespace"):
                pod_meta["namespace"] = meta["namespace"]
            annotations = {**(meta.get("annotations") or {}), **(pod_meta.get("annotations") or {})}
            if annotations:
                pod_meta["annotations"] = annotations  # the sim's timing annotations
            spec_copy = _tree_copy(template.get("spec") or {})
            pods.append(
                {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec_copy}
            )
        return pods

    def _generate(self, prefix: str, kind: str, namespace: str) -> str:
        while True:
            name = prefix + "".join(self._rng.choice(_NAME_ALPHABET) for _ in range(5))
            if (kind, namespace, name) not in self._names:
                return name
