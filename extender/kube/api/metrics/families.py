"""How a family is made and shown: Kueue's buckets, its replica_role label, its exposition."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

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


class Vec(Generic[M]):
    """One of Kueue's labelled families, with this replica's role as its last label (every
    family of Kueue's but kueue_build_info ends with replica_role)."""

    __slots__ = ("metric", "names", "role")
    metric: M
    names: tuple[str, ...]
    role: str

    def __init__(self, metric: M, names: Sequence[str], role: str) -> None:
        self.metric = metric
        self.names = tuple(names)  # without replica_role
        self.role = role

    def labels(self, *values: str) -> M:
        child: M = self.metric.labels(*values, self.role)
        return child

    def remove(self, *values: str) -> None:
        """One series gone (nothing happens when it was never there)."""
        try:
            self.metric.remove(*values, self.role)
        except KeyError:
            return

    def remove_matching(self, **match: str) -> None:
        """Every series whose labels include `match` (client_golang's DeletePartialMatch)."""
        positions = [(self.names.index(name), value) for name, value in match.items()]
        for values in self.series():
            if all(values[i] == value for i, value in positions):
                self.remove(*values)

    def series(self) -> set[tuple[str, ...]]:
        """The label values (role left out) of every series there is."""
        names = self.names
        return {
            tuple(sample.labels.get(n, "") for n in names)
            for family in self.metric.collect()
            for sample in family.samples
        }

    def clear(self) -> None:
        self.metric.clear()


class Families:
    """Every family of one controller, in the order made; shown by `Exposition`."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.metrics: list[Counter | Gauge | Histogram] = []
        self.gauges: list[Vec[Gauge]] = []  # cleared when a term as leader ends
        # Each family's label names as defined, by the name a scrape shows (for the docs and
        # for families no event has filled yet).
        self.label_names: dict[str, tuple[str, ...]] = {}

    def counter(self, name: str, documentation: str, names: Sequence[str]) -> Vec[Counter]:
        metric = Counter(name, documentation, [*names, "replica_role"], registry=None)
        self._made(name, metric, names)
        return Vec(metric, names, self.role)

    def gauge(self, name: str, documentation: str, names: Sequence[str]) -> Vec[Gauge]:
        metric = Gauge(name, documentation, [*names, "replica_role"], registry=None)
        self._made(name, metric, names)
        vec = Vec(metric, names, self.role)
        self.gauges.append(vec)
        return vec

    def histogram(
        self,
        name: str,
        documentation: str,
        names: Sequence[str],
        buckets: Sequence[float] = GO_DEFAULT_BUCKETS,
    ) -> Vec[Histogram]:
        metric = Histogram(
            name, documentation, [*names, "replica_role"], buckets=buckets, registry=None
        )
        self._made(name, metric, names)
        return Vec(metric, names, self.role)

    def add(self, metric: Counter | Gauge | Histogram, names: Sequence[str] = ()) -> None:
        """A family made elsewhere (without replica_role: Tower's own, kueue_build_info)."""
        self.metrics.append(metric)
        self.label_names[next(iter(metric.describe())).name] = tuple(names)

    def _made(self, name: str, metric: Counter | Gauge | Histogram, names: Sequence[str]) -> None:
        self.metrics.append(metric)
        self.label_names[name] = (*names, "replica_role")


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
