"""Kueue v0.19.2 pkg/scheduler/flavorassigner/podset_reducer_test.go TestSearch, ported row by row.

Each row gives pod sets and a limit on the total pods; the search must find the largest
total within it. Kueue's scheduler asks its reducer only after the full counts failed, and
Tower's `largest_fit` leaves the full counts to its caller, so each row asks as the
scheduler does: nothing for a workload that may not shrink, the full counts first, then the
search. Pod sets are named and sized as in Kueue's table.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from extender.core.api.models import PodSet, Workload
from extender.core.scheduling.partial import largest_fit, may_shrink

FILE = "pkg/scheduler/flavorassigner/podset_reducer_test.go TestSearch"


def ps(name: str, count: int, min_count: int | None = None) -> PodSet:
    return PodSet(name, count, {"cpu": 1000}, min_count=min_count)


def four_variable() -> list[PodSet]:
    return [ps("ps1", 5, 3), ps("ps2", 5, 4), ps("ps3", 5, 1), ps("ps4", 5, 2)]


def search(
    pod_sets: list[PodSet], fits: Callable[[tuple[int, ...]], int | None]
) -> tuple[tuple[int, ...], int] | None:
    """What Tower's scheduler finds for these pod sets (Kueue's Search after its full try)."""
    if not may_shrink(Workload("ns", "wl", "uid", "q", tuple(pod_sets))):
        return None
    full = tuple(p.count for p in pod_sets)
    answer = fits(full)
    if answer is not None:
        return full, answer
    return largest_fit(pod_sets, fits)


@pytest.mark.parametrize(
    ("pod_sets", "limit", "want"),
    [
        pytest.param([], 10, None, id="empty"),
        pytest.param([ps("ps1", 1), ps("ps2", 2, 2)], 2, None, id="partial not available"),
        pytest.param(four_variable(), 15, 15, id="partial available"),
        pytest.param(
            [ps("ps1", 5, 3), ps("ps2", 5), ps("ps3", 5), ps("ps4", 5)],
            19,
            19,
            id="one partial available",
        ),
        pytest.param(four_variable(), 10, 10, id="to min"),
        pytest.param(four_variable(), 20, 20, id="to max"),
        pytest.param(
            [ps(f"ps{i}", 150_000, 1) for i in range(1, 9)], 150_000, 150_000, id="no overflow"
        ),
        pytest.param(
            [ps("ps1", 150_000, 1), *(ps(f"ps{i}", 1) for i in range(2, 9))],
            150_000,
            150_000,
            id="max pods on 1.27",
        ),
        pytest.param([ps("ps1", 0, 0)], 0, None, id="podset with replica count 0"),
    ],
)
def test_search(pod_sets: list[PodSet], limit: int, want: int | None) -> None:
    def fits(counts: tuple[int, ...]) -> int | None:
        total = sum(counts)
        return total if total <= limit else None

    found = search(pod_sets, fits)
    if want is None:
        assert found is None
        return
    assert found is not None
    counts, total = found
    assert total == want
    for pod_set, count in zip(pod_sets, counts, strict=True):
        assert (pod_set.min_count or pod_set.count) <= count <= pod_set.count
