"""Runs a scenario through the admission core in virtual time: arrive, admit, run, finish."""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from extender.core.api.models import QUEUE_NAME_LABEL, Admission, Workload
from extender.core.api.parse import ManifestError
from extender.core.jobframework import groups, registry
from extender.core.jobframework.jobs import group_workload, workload_for
from extender.core.jobframework.workloads import workload as parse_workload
from extender.core.placement.fit import Inventory, PlacementCheck
from extender.core.scheduling.builder import StateBuilder
from extender.core.scheduling.cycle import Admit, ClusterState, CycleResult, Evict, PendingStatus
from extender.core.tas.scheduling import TopologyScheduling
from extender.sim.loader import POD_GROUP, LoadError, Scenario, SimJob

_T = TypeVar("_T")

# Cycles at one instant stop once nothing moves; this bounds a pathological preemption loop.
MAX_CYCLES_PER_INSTANT = 10_000


@dataclass(slots=True)
class _Running:
    job: SimJob
    generation: int


@dataclass(slots=True)
class Simulation:
    """The outcome: events in the order they happened, and the final state."""

    events: list[dict[str, Any]]
    state: ClusterState
    end_time: float
    jobs: dict[str, SimJob]
    cycle_seconds: list[float] = field(default_factory=list)
    core_cpu_seconds: float = 0.0


def build_state(scenario: Scenario, *, fair_sharing: bool = False) -> ClusterState:
    """A ClusterState holding the scenario's configuration (no workloads yet)."""
    state = ClusterState(fair_sharing=fair_sharing)
    StateBuilder(state).configure(scenario.config)
    return state


class Simulator:
    """Discrete-event simulation of the admission core in virtual time."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        fair_sharing: bool = False,
        timer: Callable[[], float] | None = None,
        cpu_timer: Callable[[], float] | None = None,
        running: Sequence[tuple[SimJob, Admission, float]] = (),
        creation_times: bool = False,
    ) -> None:
        self.scenario = scenario
        # Forecasts start from a live cluster: Workloads already admitted, each with the
        # seconds it has left (inf: unknown, it never ends here), and every Workload keeps
        # its own creation time so the queues order them as they are ordered now.
        self._running = list(running)
        self._creation_times = creation_times
        self.state = build_state(scenario, fair_sharing=fair_sharing)
        self._workload_priority_classes = self.state.workload_priority_classes()
        self._priority_classes = self.state.priority_classes()
        # Nodes in the scenario: a workload that uses an extended resource is admitted only
        # with a plan (its pods bind at once in virtual time; the plan holds until it ends).
        self.inventory: Inventory | None = None
        self._placement: PlacementCheck | None = None
        self.topology: TopologyScheduling | None = None
        if scenario.nodes:
            # Topology flavors' podSets are placed on their domains first (tas.py); the
            # planner leaves those flavors to it.
            self.topology = TopologyScheduling()
            self.topology.set_topologies(scenario.config.topologies)
            self.topology.set_flavors(scenario.config.flavors)
            self.state.add_admission_check(self.topology)
            self.state.on_release(self.topology.release)
            self.state.scheduler.topology = self.topology
            self.inventory = Inventory()
            self.inventory.set_flavors(scenario.config.flavors)
            for arrival, node in scenario.nodes:
                if arrival <= 0:
                    self.inventory.set_node(node)
                    self.topology.set_node(node)
            self._placement = PlacementCheck(self.inventory)
            self.state.add_admission_check(self._placement)
            self.state.on_release(self.inventory.forget)
        self._timer = timer
        self._cpu_timer = cpu_timer
        self.core_cpu_seconds = 0.0
        self._events: list[dict[str, Any]] = []
        self._queue: list[tuple[float, int, str, str, int]] = []
        self._seq = itertools.count()
        self._jobs: dict[str, SimJob] = {}  # by workload key
        self._workloads: dict[str, Workload] = {}
        self._generation: dict[str, int] = {}
        self._last_status: dict[str, PendingStatus] = {}
        self.cycle_seconds: list[float] = []
        # The same cycles in CPU time (with a cpu_timer): steadier than wall time on a
        # machine that runs other work.
        self.cycle_cpu_seconds: list[float] = []

    def run(self) -> Simulation:
        """Run until nothing is left to happen."""
        unmanaged: list[SimJob] = []
        for job in self.scenario.jobs:
            if job.managed:
                self._push(job.arrival, "create", job.source, 0)
            else:
                unmanaged.append(job)
        self._by_source = {job.source: job for job in self.scenario.jobs}
        self._nodes = {node.name: node for _, node in self.scenario.nodes}
        for arrival, node in self.scenario.nodes:
            if arrival > 0:
                self._push(arrival, "node", node.name, 0)
        for job, admission, remaining in self._running:
            workload = parse_workload(job.obj)
            self._jobs[workload.key] = job
            self._workloads[workload.key] = workload
            self._generation[workload.key] = 1
            self._core(partial(self.state.assume, admission=admission, now=0.0), workload)
            if math.isfinite(remaining):
                self._push(max(0.0, remaining), "finish", workload.key, 1)
        now = 0.0
        for job in unmanaged:
            self._emit(job.arrival, "Created", job, None, managed=False)
        while self._queue:
            now = self._queue[0][0]
            while self._queue and self._queue[0][0] == now:
                _, _, what, ref, generation = heapq.heappop(self._queue)
                if what == "create":
                    self._create(now, self._by_source[ref])
                elif what == "finish" and self._generation.get(ref) == generation:
                    self._finish(now, ref)
                elif what == "node" and self.inventory is not None:
                    self.inventory.set_node(self._nodes[ref])
                    if self.topology is not None:
                        self.topology.set_node(self._nodes[ref])
                    self._events.append(
                        {
                            "time": round(now, 6),
                            "event": "NodeJoined",
                            "namespace": "",
                            "name": ref,
                            "kind": "Node",
                            "workload": None,
                        }
                    )
            self._cycles(now)
        self._events.sort(key=lambda e: e["time"])  # stable: same-time order is kept
        return Simulation(
            self._events,
            self.state,
            now,
            dict(self._jobs),
            self.cycle_seconds,
            self.core_cpu_seconds,
        )

    def _core(self, call: Callable[[Any], _T], arg: Any) -> _T:
        """Call into the admission core, adding its CPU time when measured."""
        if self._cpu_timer is None:
            return call(arg)
        start = self._cpu_timer()
        try:
            return call(arg)
        finally:
            self.core_cpu_seconds += self._cpu_timer() - start

    def _push(self, when: float, what: str, ref: str, generation: int) -> None:
        heapq.heappush(self._queue, (when, next(self._seq), what, ref, generation))

    def _create(self, now: float, job: SimJob) -> None:
        try:
            if job.kind == "Workload":
                workload = parse_workload(
                    job.obj, creation_time=None if self._creation_times else now
                )
            elif job.kind == POD_GROUP or job.kind in registry.PARENTS_BY_KIND:
                workload = self._group_workload(now, job)
            else:
                adapter = registry.for_object(job.obj)
                obj = self.scenario.resolve(adapter, job.obj) if adapter else job.obj
                workload = workload_for(
                    obj,
                    uid=job.uid,
                    creation_time=now,
                    workload_priority_classes=self._workload_priority_classes,
                    priority_classes=self._priority_classes,
                )
        except ManifestError as err:
            raise LoadError(
                f"{job.source.replace('#', ': document ')} ({job.kind}/{job.name}): "
                f"{err.path}: {err.message}"
            ) from None
        self._jobs[workload.key] = job
        self._workloads[workload.key] = workload
        self._generation[workload.key] = 0
        self._emit(now, "Created", job, workload)
        self._core(self.state.add_workload, workload)

    def _group_workload(self, now: float, job: SimJob) -> Workload:
        """A group's Workload as the controller makes it: a plain pod group's from its
        members, a StatefulSet's or LeaderWorkerSet's from the object."""
        meta = job.obj["metadata"]
        labels = meta.get("labels") or {}
        if job.kind == POD_GROUP:
            members = [
                groups.Member(
                    name=str(m["metadata"]["name"]),
                    uid=str(m["metadata"].get("uid") or ""),
                    role=groups.role_hash(m.get("spec") or {}),
                    gated=True,
                    phase="",
                    running=False,
                    holds=True,
                    total=groups.total_count(m),
                    queue=(m["metadata"].get("labels") or {}).get(QUEUE_NAME_LABEL),
                    template={"spec": m.get("spec") or {}},
                )
                for m in job.obj["members"]
            ]
            problem = groups.disagreement(members)
            if problem is not None:
                raise ManifestError(f"metadata.labels[{groups.GROUP_NAME}]", problem)
            fast = (meta.get("annotations") or {}).get(groups.FAST_ADMISSION) == "true"
            templates = groups.compose(members, members[0].total or 1, fast)
            owner_kind = "Pod"
        else:
            parent = registry.PARENTS_BY_KIND[job.kind]
            found = parent.group_pod_sets(job.obj, job.name)
            if found is None:
                raise ManifestError("spec.replicas", "is 0: the set has no Workload")
            templates, owner_kind = found, parent.kind
        return group_workload(
            namespace=job.namespace,
            name=job.name,
            uid=job.uid,
            queue=str(labels.get(QUEUE_NAME_LABEL) or ""),
            labels=labels,
            templates=templates,
            creation_time=now,
            owner_kind=owner_kind,
            owner_name=str(meta.get("name")),
            workload_priority_classes=self._workload_priority_classes,
            priority_classes=self._priority_classes,
        )

    def _finish(self, now: float, key: str) -> None:
        self._core(self.state.finish, key)
        self._generation[key] = -1
        self._emit(now, "Finished", self._jobs[key], self._workloads[key], reason="Succeeded")

    def _cycles(self, now: float) -> None:
        touched: dict[str, Workload] = {}
        if self.inventory is not None and self._placement is not None:
            grown = self.inventory.take_grown()
            self.state.requeue_inadmissible(self._placement.to_requeue(grown))
        if self.topology is not None:
            self.state.requeue_inadmissible(self.topology.to_requeue())
        for _ in range(MAX_CYCLES_PER_INSTANT):
            if self._timer is not None:
                start = self._timer()
                cpu = self.core_cpu_seconds
                result = self._core(self.state.schedule, now)
                self.cycle_seconds.append(self._timer() - start)
                self.cycle_cpu_seconds.append(self.core_cpu_seconds - cpu)
            else:
                result = self._core(self.state.schedule, now)
            self._apply(now, result, touched)
            if not result.progressed:
                break
        # Report each workload's settled status once per instant, not every attempt.
        for key, workload in touched.items():
            if self.state.pending_workload(key) is None:
                continue
            status = self.state.pending_status(key)
            if self._last_status.get(key) != status:
                self._last_status[key] = status
                self._emit(
                    now,
                    "Pending",
                    self._jobs[key],
                    workload,
                    reason=status.reason,
                    message=status.message,
                )

    def _apply(self, now: float, result: CycleResult, touched: dict[str, Workload]) -> None:
        for decision in result.admitted:
            self._admitted(now, decision)
        for workload, _ in result.pending:
            touched[workload.key] = workload
        for eviction in result.evicted:
            self._evicted(now, eviction)
            touched[eviction.workload.key] = eviction.workload

    def _admitted(self, now: float, decision: Admit) -> None:
        key = decision.workload.key
        job = self._jobs[key]
        self._last_status.pop(key, None)
        flavors = {psa.name: dict(psa.flavors) for psa in decision.admission.pod_set_assignments}
        extra: dict[str, Any] = {}
        plan = self.inventory.plan_of(key) if self.inventory is not None else None
        if plan is not None and plan.pod_sets:
            extra["placement"] = plan.as_annotation()
        placed = {
            psa.name: {"/".join(d.values): d.count for d in psa.topology.domains}
            for psa in decision.admission.pod_set_assignments
            if psa.topology is not None
        }
        if placed:
            extra["topology"] = placed  # podSet -> domain -> pods
        self._emit(
            now,
            "Admitted",
            job,
            decision.workload,
            clusterQueue=decision.admission.cluster_queue,
            flavors=flavors,
            **extra,
        )
        generation = self._generation[key] + 1
        self._generation[key] = generation
        if math.isfinite(job.duration):  # unknown: it holds its quota to the end of the run
            self._push(now + job.duration, "finish", key, generation)

    def _evicted(self, now: float, eviction: Evict) -> None:
        key = eviction.workload.key
        self._generation[key] += 1  # the running copy never finishes: it restarts from zero
        extra: dict[str, Any] = {"reason": eviction.reason, "message": eviction.message}
        if eviction.preemption_reason:
            extra["preemptionReason"] = eviction.preemption_reason
        if eviction.preemptor:
            extra["preemptor"] = eviction.preemptor
        self._emit(now, "Evicted", self._jobs[key], eviction.workload, **extra)
        # The job is suspended and its pods stop at once in virtual time.
        self._core(self.state.release, key)

    def _emit(
        self, now: float, event: str, job: SimJob, workload: Workload | None, **extra: Any
    ) -> None:
        record: dict[str, Any] = {
            "time": round(now, 6),
            "event": event,
            "namespace": job.namespace,
            "name": job.name,
            "kind": job.kind,
            "workload": workload.name if workload else None,
        }
        record.update(extra)
        self._events.append(record)


def pending_report(state: ClusterState) -> list[dict[str, Any]]:
    """What never ran, with the reason and message a user would read."""
    out = []
    for workload, status in state.pending():
        out.append(
            {
                "namespace": workload.namespace,
                "name": workload.owner_name,
                "kind": workload.owner_kind,
                "workload": workload.name,
                "queue": workload.queue_name,
                "reason": status.reason,
                "message": status.message,
            }
        )
    return out


def simulate(
    scenario: Scenario, *, fair_sharing: bool = False
) -> tuple[Simulation, list[dict[str, Any]]]:
    """Run a scenario; returns the simulation and the pending report."""
    sim = Simulator(scenario, fair_sharing=fair_sharing).run()
    return sim, pending_report(sim.state)
