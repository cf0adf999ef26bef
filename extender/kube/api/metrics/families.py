"""How a family is made and shown: Kueue's buckets, replica_role and custom labels, exposition."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from extender.core.config.custom_labels import WORKLOAD
from extender.kube.api.metrics.custom import CustomValues

# client_golang's DefBuckets: Kueue's histograms without buckets of their own use them
# (prometheus_client's default set has three more).
GO_DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def kueue_buckets(count: int) -> tuple[float, ...]:
    """Kueue's generateExponentialBuckets: 1 s, then 2.5 s doubling, `count` in all."""
    return (1.0, *(2.5 * 2**i for i in range(count - 1)))


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """client_golang's ExponentialBuckets."""
    return tuple(start * factor**i for i in range(count))


M = TypeVar("M", Counter, Gauge, Histogram)
# A series' labels (and the queue's ref when they do not name it) -> its custom values.
Reader = Callable[[tuple[str, ...], str | None], tuple[str, ...]]


class Vec(Generic[M]):
    """One of Kueue's labelled families, with this replica's role after its own labels (every
    family of Kueue's but kueue_build_info has replica_role), then the custom_<name> labels
    of metrics.customLabels when the family carries some (custom.py)."""

    __slots__ = ("custom", "custom_names", "metric", "names", "role", "workload_width")
    metric: M
    names: tuple[str, ...]
    role: str
    custom: Reader | None
    custom_names: tuple[str, ...]
    workload_width: int

    def __init__(
        self,
        metric: M,
        names: Sequence[str],
        role: str,
        custom: Reader | None = None,
        custom_names: Sequence[str] = (),
        workload_width: int = 0,
    ) -> None:
        self.metric = metric
        self.names = tuple(names)  # without replica_role
        self.role = role
        # The queue's custom values, from the family's own label values (None: none).
        self.custom = custom
        self.custom_names = tuple(custom_names)
        self.workload_width = workload_width  # the trailing ones a Workload gives

    def labels(self, *values: str, workload: tuple[str, ...] = (), queue: str | None = None) -> M:
        """The series of these label values (`workload`: a Workload's custom values, for
        the one family that carries them; `queue`: the queue whose custom values a family
        without its name among its labels carries)."""
        if self.custom is None and not self.workload_width:
            child: M = self.metric.labels(*values, self.role)
            return child
        return self.metric.labels(*values, self.role, *self._custom(values, workload, queue))

    def remove(self, *values: str) -> None:
        """One series gone (nothing happens when it was never there)."""
        try:
            self.metric.remove(*values, self.role, *self._custom(values, (), None))
        except KeyError:
            return

    def remove_matching(self, **match: str) -> None:
        """Every series whose labels include `match` (client_golang's DeletePartialMatch),
        whatever its custom values."""
        positions = [(self.names.index(name), value) for name, value in match.items()]
        for values in self._series():
            if all(values[i] == value for i, value in positions):
                try:
                    self.metric.remove(*values)
                except KeyError:
                    continue

    def series(self) -> set[tuple[str, ...]]:
        """The label values (role and custom ones left out) of every series there is."""
        width = len(self.names)
        return {values[:width] for values in self._series()}

    def clear(self) -> None:
        self.metric.clear()

    def _custom(
        self, values: tuple[str, ...], workload: tuple[str, ...], queue: str | None
    ) -> tuple[str, ...]:
        own: tuple[str, ...] = self.custom(values, queue) if self.custom is not None else ()
        if self.workload_width:
            return (*own, *(workload or ("",) * self.workload_width))
        return own

    def _series(self) -> set[tuple[str, ...]]:
        """Every series' full label values, replica_role and custom ones included."""
        names = (*self.names, "replica_role", *self.custom_names)
        return {
            tuple(sample.labels.get(n, "") for n in names)
            for family in self.metric.collect()
            for sample in family.samples
        }


@dataclass(frozen=True, slots=True)
class Custom:
    """Which custom labels a family carries: those of the entries of `kinds` (their source
    kinds). The queue read is the one its `key` labels name, "/"-joined; without a key, the
    one its writer names (none: the labels are there with empty values)."""

    kinds: tuple[str, ...]
    key: tuple[str, ...] = ()


class Families:
    """Every family of one controller, in the order made; shown by `Exposition`."""

    def __init__(self, role: str, custom: CustomValues | None = None) -> None:
        self.role = role
        self.custom = custom  # metrics.customLabels, with the CustomMetricLabels gate on
        self.metrics: list[Counter | Gauge | Histogram] = []
        self.gauges: list[Vec[Gauge]] = []  # cleared when a term as leader ends
        # Each family's label names as defined, by the name a scrape shows (for the docs and
        # for families no event has filled yet).
        self.label_names: dict[str, tuple[str, ...]] = {}

    def counter(
        self, name: str, documentation: str, names: Sequence[str], custom: Custom | None = None
    ) -> Vec[Counter]:
        extra = self._custom_names(custom)
        metric = Counter(name, documentation, [*names, "replica_role", *extra], registry=None)
        return self._made(name, metric, names, custom, extra)

    def gauge(
        self, name: str, documentation: str, names: Sequence[str], custom: Custom | None = None
    ) -> Vec[Gauge]:
        extra = self._custom_names(custom)
        metric = Gauge(name, documentation, [*names, "replica_role", *extra], registry=None)
        vec = self._made(name, metric, names, custom, extra)
        self.gauges.append(vec)
        return vec

    def histogram(
        self,
        name: str,
        documentation: str,
        names: Sequence[str],
        buckets: Sequence[float] = GO_DEFAULT_BUCKETS,
        custom: Custom | None = None,
    ) -> Vec[Histogram]:
        extra = self._custom_names(custom)
        metric = Histogram(
            name, documentation, [*names, "replica_role", *extra], buckets=buckets, registry=None
        )
        return self._made(name, metric, names, custom, extra)

    def add(self, metric: Counter | Gauge | Histogram, names: Sequence[str] = ()) -> None:
        """A family made elsewhere (without replica_role: Tower's own, kueue_build_info)."""
        self.metrics.append(metric)
        self.label_names[next(iter(metric.describe())).name] = tuple(names)

    def _custom_names(self, custom: Custom | None) -> tuple[str, ...]:
        if custom is None or self.custom is None:
            return ()
        return self.custom.names(*custom.kinds)

    def _made(
        self,
        name: str,
        metric: M,
        names: Sequence[str],
        custom: Custom | None,
        extra: tuple[str, ...],
    ) -> Vec[M]:
        self.metrics.append(metric)
        self.label_names[name] = (*names, "replica_role", *extra)
        if not extra or custom is None or self.custom is None:
            return Vec(metric, names, self.role)
        values = self.custom
        queue = next((k for k in sorted(custom.kinds) if k != WORKLOAD), None)
        workload_width = len(values.names(WORKLOAD)) if WORKLOAD in custom.kinds else 0
        read: Reader | None = None
        if queue is not None and values.has(queue):
            read = (
                _reader(values, queue, [tuple(names).index(k) for k in custom.key])
                if custom.key
                else _named(values, queue)
            )
        return Vec(metric, names, self.role, read, extra, workload_width)


def _reader(values: CustomValues, kind: str, at: Sequence[int]) -> Reader:
    """The custom values of the `kind` object whose ref the labels at `at` make."""

    def read(labels: tuple[str, ...], _queue: str | None) -> tuple[str, ...]:
        return values.of(kind, "/".join(labels[i] for i in at))

    return read


def _named(values: CustomValues, kind: str) -> Reader:
    """The custom values of the `kind` object the caller names; empty ones when it names
    none (a family Kueue gives these labels without saying whose; docs/metrics.md)."""
    blank = ("",) * len(values.names(kind))

    def read(_labels: tuple[str, ...], queue: str | None) -> tuple[str, ...]:
        return values.of(kind, queue) if queue is not None else blank

    return read


class Exposition(Collector):
    """The registry's one collector: every family as client_golang shows Kueue's. Without
    prometheus_client's `_created` series (Kueue has none), and without its check that two
    families' names differ once `_total` is cut off: Kueue has both a gauge
    kueue_finished_workloads and a counter kueue_finished_workloads_total."""

    def __init__(self, families: Iterable[Counter | Gauge | Histogram]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        for metric in self.families:
            for family in metric.collect():
                shown = Metric(family.name, family.documentation, family.type, family.unit)
                shown.samples = [s for s in family.samples if not s.name.endswith("_created")]
                yield shown

    def describe(self) -> list[Any]:
        return []  # no names to check against others': this is the registry's only collector
