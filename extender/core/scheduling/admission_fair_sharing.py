"""Kueue's usage-based admission fair sharing: each LocalQueue's decayed usage, and its order.

In a ClusterQueue with `admissionScope.admissionMode: UsageBasedAdmissionFairSharing` (and
`admissionFairSharing` in Kueue's Configuration), the next workload comes from the
LocalQueue with the lowest usage; priority, then queue order, only break ties. A LocalQueue's
usage is an exponential moving average of what its admitted workloads hold, sampled every
`usageSamplingInterval` and halved every `usageHalfLifeTime` (0: no history), plus an entry
penalty for each workload admitted since the last sample, all weighted per resource
(`resourceWeights`, 1 by default) and divided by the LocalQueue's `fairSharing.weight`.
Amounts are in base units as Kueue counts them: cores, bytes, units. Time is passed in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from extender.core.api.quantity import MILLI_RESOURCES

Usage = dict[str, float]  # resource -> base units


@dataclass(frozen=True, slots=True)
class AfsConfig:
    """Kueue's Configuration.admissionFairSharing."""

    half_life: float = 0.0  # seconds; 0: usage is not remembered
    sampling_interval: float = 300.0
    resource_weights: Mapping[str, float] = field(default_factory=dict)


def alpha(elapsed: float, half_life: float) -> float:
    """How much of the present a sample after `elapsed` seconds takes in (0 without a
    half-life)."""
    if half_life <= 0:
        return 0.0
    return 1.0 - float(0.5 ** (max(0.0, elapsed) / half_life))


def decayed(consumed: Mapping[str, float], current: Mapping[str, float], a: float) -> Usage:
    """The moving average one sample further: consumed·(1−α) + current·α, per resource."""
    return {
        r: consumed.get(r, 0.0) * (1 - a) + current.get(r, 0.0) * a
        for r in sorted(set(consumed) | set(current))
    }


def score(
    consumed: Mapping[str, float],
    penalty: Mapping[str, float],
    weight: float,
    resource_weights: Mapping[str, float],
) -> float:
    """A LocalQueue's usage for ordering: Σ weight_r·(consumed_r + penalty_r) / its weight;
    a LocalQueue of weight 0 (or less) comes last."""
    if weight <= 0:
        return math.inf
    total = 0.0
    for r in sorted(set(consumed) | set(penalty)):
        total += resource_weights.get(r, 1.0) * (consumed.get(r, 0.0) + penalty.get(r, 0.0))
    return total / weight


def base_units(amounts: Mapping[str, int]) -> Usage:
    """Tower's accounted integers (milli-cpu, units) in Kueue's base units."""
    return {r: v / 1000 if r in MILLI_RESOURCES else float(v) for r, v in amounts.items()}


@dataclass(slots=True)
class _Queue:
    consumed: Usage = field(default_factory=dict)
    last_update: float | None = None
    penalties: dict[str, Usage] = field(default_factory=dict)  # workload key -> penalty


class UsageLedger:
    """Every LocalQueue's usage history and pending entry penalties (one per workload
    admitted since its queue's last sample)."""

    def __init__(self, config: AfsConfig) -> None:
        self.config = config
        self._queues: dict[str, _Queue] = {}

    def seed(self, lq_key: str, consumed: Mapping[str, float], now: float) -> None:
        """What a LocalQueue's status said it had consumed (after a restart); the time Tower
        was down is not decayed, as in Kueue."""
        if lq_key not in self._queues:
            self._queues[lq_key] = _Queue(dict(consumed), now)

    def consumed(self, lq_key: str) -> Usage:
        queue = self._queues.get(lq_key)
        return dict(queue.consumed) if queue is not None else {}

    def penalty(self, lq_key: str) -> Usage:
        queue = self._queues.get(lq_key)
        out: Usage = {}
        for usage in queue.penalties.values() if queue is not None else ():
            for r, v in usage.items():
                out[r] = out.get(r, 0.0) + v
        return out

    def usage(self, lq_key: str, weight: float) -> float:
        """The LocalQueue's usage for ordering (a queue never sampled has none)."""
        queue = self._queues.get(lq_key)
        if queue is None:
            return 0.0 if weight > 0 else math.inf
        return score(queue.consumed, self.penalty(lq_key), weight, self.config.resource_weights)

    def admitted(self, lq_key: str, wl_key: str, totals: Mapping[str, int]) -> None:
        """A workload of the LocalQueue got quota: its entry penalty, α(samplingInterval)
        times what it holds, counts at once (a second admission of it replaces the first)."""
        a = alpha(self.config.sampling_interval, self.config.half_life)
        queue = self._queues.setdefault(lq_key, _Queue())
        queue.penalties[wl_key] = {r: v * a for r, v in base_units(totals).items()}

    def forget(self, lq_key: str, wl_key: str) -> None:
        """The workload's admission did not happen (or it is gone): its penalty goes."""
        queue = self._queues.get(lq_key)
        if queue is not None:
            queue.penalties.pop(wl_key, None)

    def settle(self, lq_key: str, wl_key: str, current: Mapping[str, float], now: float) -> None:
        """The workload is running: its penalty moves into the history, which takes one
        step towards what the LocalQueue holds now."""
        queue = self._queues.setdefault(lq_key, _Queue())
        penalty = queue.penalties.pop(wl_key, None)
        if penalty is None:
            return
        self._step(queue, current, now)
        for r, v in penalty.items():
            queue.consumed[r] = queue.consumed.get(r, 0.0) + v

    def sample(self, lq_key: str, current: Mapping[str, float], now: float) -> bool:
        """One sample of a LocalQueue, if its interval passed since the last one; whether it
        was taken. Pending penalties stay pending (they count in `usage` already)."""
        queue = self._queues.setdefault(lq_key, _Queue())
        last = queue.last_update
        if last is not None and now - last < self.config.sampling_interval:
            return False
        self._step(queue, current, now)
        return True

    def _step(self, queue: _Queue, current: Mapping[str, float], now: float) -> None:
        if self.config.half_life <= 0:
            queue.consumed = {}
        else:
            elapsed = 0.0 if queue.last_update is None else now - queue.last_update
            queue.consumed = decayed(queue.consumed, current, alpha(elapsed, self.config.half_life))
        queue.last_update = now

    def status(self, lq_key: str) -> tuple[Usage, float] | None:
        """(consumed, when last sampled) for the LocalQueue's status, once sampled."""
        queue = self._queues.get(lq_key)
        if queue is None or queue.last_update is None:
            return None
        return dict(queue.consumed), queue.last_update

    def due_in(self, lq_keys: Iterable[str], now: float) -> float:
        """Seconds until one of these LocalQueues should be sampled (0: now)."""
        due = self.config.sampling_interval
        for key in lq_keys:
            queue = self._queues.get(key)
            if queue is None or queue.last_update is None:
                return 0.0
            due = min(due, max(0.0, queue.last_update + self.config.sampling_interval - now))
        return due
