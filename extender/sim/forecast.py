"""When will it start? The simulator run forward from a cluster's current state."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.core.api.models import Admission
from extender.core.api.parse import ManifestError
from extender.core.jobframework.workloads import creation_seconds
from extender.core.scheduling.cycle import ClusterState
from extender.sim.engine import Simulator
from extender.sim.loader import Scenario, SimJob, parse_duration

EXPECTED_DURATION_ANNOTATION = "tower.dev/expected-duration"
RECENT = 20  # finished workloads of a LocalQueue its median runtime is taken over

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Duration:
    """How long a workload runs once admitted, and where that number comes from."""

    seconds: float  # inf: unknown
    source: str
    upper_bound: bool = False  # activeDeadlineSeconds: it ends by then at the latest


UNKNOWN = Duration(math.inf, "unknown")


def _condition_time(obj: Obj, kind: str) -> float | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            try:
                return creation_seconds(condition.get("lastTransitionTime"))
            except ManifestError:
                return None
    return None


def runtimes(finished: Iterable[Obj]) -> dict[str, list[float]]:
    """The runtimes (admitted to finished) of finished Workloads, most recent last, by
    LocalQueue (namespace/name)."""
    by_queue: dict[str, list[tuple[float, float]]] = {}
    for obj in finished:
        started = _condition_time(obj, "Admitted")
        ended = _condition_time(obj, "Finished")
        if started is None or ended is None or ended < started:
            continue
        meta = obj.get("metadata") or {}
        queue = f"{meta.get('namespace')}/{(obj.get('spec') or {}).get('queueName')}"
        by_queue.setdefault(queue, []).append((ended, ended - started))
    return {q: [r for _, r in sorted(items)][-RECENT:] for q, items in by_queue.items()}


def duration_of(job: Obj | None, queue: str, history: Mapping[str, list[float]]) -> Duration:
    """The Job's activeDeadlineSeconds (an upper bound), else its expected-duration
    annotation, else the median runtime of its LocalQueue's recently finished workloads."""
    if job is not None:
        spec = job.get("spec") or {}
        deadline = spec.get("activeDeadlineSeconds")
        if isinstance(deadline, int) and not isinstance(deadline, bool) and deadline > 0:
            return Duration(float(deadline), "activeDeadlineSeconds", upper_bound=True)
        annotations = (job.get("metadata") or {}).get("annotations") or {}
        if EXPECTED_DURATION_ANNOTATION in annotations:
            try:
                seconds = parse_duration(annotations[EXPECTED_DURATION_ANNOTATION], "")
                return Duration(seconds, EXPECTED_DURATION_ANNOTATION)
            except ManifestError:
                pass  # unreadable: the next source answers
    past = history.get(queue) or []
    if past:
        return Duration(
            statistics.median(past), f"median of {len(past)} finished in LocalQueue {queue}"
        )
    return UNKNOWN


@dataclass(frozen=True, slots=True)
class Estimate:
    """When a pending workload is expected to start, and on what that rests."""

    start: float | None  # epoch seconds; None: not within what is known
    at_latest: bool  # every duration it waits on is an upper bound
    basis: tuple[str, ...] = field(default_factory=tuple)  # the durations it waits on


def forecast(
    state: ClusterState,
    running: Iterable[tuple[Obj, Admission, float, Duration]],
    pending: Iterable[tuple[Obj, Duration]],
    now: float,
) -> dict[str, Estimate]:
    """Run the simulator forward from now: `running` are admitted Workloads (object,
    admission, seconds since admitted, duration), `pending` the queued ones."""
    scenario = Scenario(config=state.configuration())
    durations: dict[str, Duration] = {}

    def sim_job(obj: Obj, duration: Duration) -> SimJob:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        durations[key] = duration
        return SimJob(
            "Workload", str(meta.get("namespace")), str(meta.get("name")),
            str(meta.get("uid")), dict(obj), 0.0, duration.seconds, True, key,
        )  # fmt: skip

    live = [
        (sim_job(obj, d), admission, d.seconds - elapsed) for obj, admission, elapsed, d in running
    ]
    scenario.jobs = [sim_job(obj, d) for obj, d in pending]
    waiting = {job.source for job in scenario.jobs}
    sim = Simulator(scenario, running=live, creation_times=True).run()
    finished: list[tuple[float, str]] = []
    out: dict[str, Estimate] = {}
    for event in sim.events:
        key = f"{event['namespace']}/{event['workload']}"
        if event["event"] == "Finished":
            finished.append((event["time"], key))
        elif event["event"] == "Admitted" and key in waiting and key not in out:
            before = [durations[k] for t, k in finished if t <= event["time"]]
            basis = tuple(dict.fromkeys(d.source for d in before))
            at_latest = bool(before) and all(d.upper_bound for d in before)
            out[key] = Estimate(now + event["time"], at_latest, basis)
    for key in waiting - set(out):
        out[key] = Estimate(None, False, ("waits on a workload of unknown duration",))
    return out
