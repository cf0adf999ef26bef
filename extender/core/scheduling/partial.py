"""Partial admission, as Kueue's: the largest pod counts down to each minCount that fit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar

from extender.core.api.models import PodSet, Workload

R = TypeVar("R")


def may_shrink(workload: Workload) -> bool:
    """Whether some pod set of the workload may be admitted with fewer pods than it asks for
    (Kueue's CanBePartiallyAdmitted)."""
    for ps in workload.pod_sets:  # noqa: SIM110 (a loop, not any(): every waiting head asks)
        if ps.min_count is not None and ps.min_count < ps.count:
            return True
    return False


def counts_at(full: Sequence[int], deltas: Sequence[int], step: int, steps: int) -> tuple[int, ...]:
    """The counts `step` steps of `steps` down from the full ones: every pod set gives up the
    same share of what it may give up, rounded towards the full count (Kueue rounds so)."""
    return tuple(count - delta * step // steps for count, delta in zip(full, deltas, strict=True))


def largest_fit(
    pod_sets: Sequence[PodSet], fits: Callable[[tuple[int, ...]], R | None]
) -> tuple[tuple[int, ...], R] | None:
    """The largest counts below the full ones for which `fits` answers, with its answer.

    As Kueue's PodSetReducer: a binary search over one step per pod that may be given up in
    all, each step shrinking every variable pod set in proportion. `fits` is taken to hold
    from some step on (fewer pods never need more quota); the full counts are not asked,
    the caller judged those already. None when even the minimum counts do not fit.
    """
    full = [ps.count for ps in pod_sets]
    deltas = [
        ps.count - max(ps.min_count, 1)
        if ps.min_count is not None and ps.min_count < ps.count
        else 0
        for ps in pod_sets
    ]
    steps = sum(deltas)
    found: tuple[tuple[int, ...], R] | None = None
    low, high = 1, steps
    while low <= high:
        step = (low + high) // 2
        counts = counts_at(full, deltas, step, steps)
        answer = fits(counts)
        if answer is None:
            low = step + 1
        else:
            found = (counts, answer)
            high = step - 1
    return found


def scaled(workload: Workload, counts: Sequence[int]) -> Workload:
    """The workload with these pod counts, each pod set's requests per pod unchanged."""
    pod_sets = tuple(
        ps if count == ps.count else replace(ps, count=count)
        for ps, count in zip(workload.pod_sets, counts, strict=True)
    )
    return replace(workload, pod_sets=pod_sets)
