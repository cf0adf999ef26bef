"""The persistent sorted sequence against a plain sorted list (the oracle), through random
inserts and removals that split and join chunks; and old versions stay as they were."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.core.scheduling import ranked
from extender.core.scheduling.ranked import Ranked


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Chunks of 4 (split past 8, joined under 2): a few dozen items make many of them."""
    monkeypatch.setattr(ranked, "LOAD", 4)


def agrees(seq: Ranked[int], oracle: list[int]) -> None:
    seq.check()
    assert list(seq) == oracle
    assert len(seq) == len(oracle)
    for probe in {*oracle, -1, 10**6, *(x + 1 for x in oracle)}:
        assert seq.rank(probe) == sum(1 for x in oracle if x < probe), probe
    for start in range(-1, len(oracle) + 2):
        for stop in (start, start + 1, start + 3, len(oracle) + 5):
            assert seq.between(start, stop) == oracle[max(start, 0) : max(stop, 0)], (start, stop)
        assert list(seq.iterate(start)) == oracle[max(start, 0) :], start


operations = st.lists(st.tuples(st.booleans(), st.integers(0, 60)), max_size=150)


@given(operations)
@settings(max_examples=300, deadline=None)
def test_inserts_and_removals_agree_with_a_sorted_list(ops):
    seq: Ranked[int] = Ranked()
    oracle: list[int] = []
    for add, value in ops:
        if add and value not in oracle:
            seq = seq.insert(value)
            oracle = sorted([*oracle, value])
        elif not add and value in oracle:
            seq = seq.remove(value)
            oracle.remove(value)
    agrees(seq, oracle)


def test_a_long_churn_keeps_chunks_within_bounds_and_agrees():
    rng = random.Random(7)
    seq: Ranked[int] = Ranked()
    present: set[int] = set()
    for step in range(4000):
        value = rng.randrange(300)
        if value in present and rng.random() < 0.55:
            seq = seq.remove(value)
            present.discard(value)
        elif value not in present:
            seq = seq.insert(value)
            present.add(value)
        if step % 500 == 0:
            agrees(seq, sorted(present))
    agrees(seq, sorted(present))
    # Joined when small: never more chunks than twice the items over LOAD/2, plus one.
    assert len(seq._chunks) <= 2 * len(present) // (ranked.LOAD // 2) + 1


def test_built_at_once_is_the_same_as_built_one_at_a_time():
    values = random.Random(3).sample(range(1000), 100)
    one_by_one: Ranked[int] = Ranked()
    for v in values:
        one_by_one = one_by_one.insert(v)
    at_once = Ranked.of(values)
    at_once.check()
    assert list(at_once) == list(one_by_one) == sorted(values)
    agrees(at_once, sorted(values))


def test_an_old_version_is_unchanged_by_later_changes():
    old = Ranked.of(range(0, 40, 2))
    new = old.insert(7).remove(10).insert(41)
    assert list(old) == list(range(0, 40, 2))
    assert old.between(3, 6) == [6, 8, 10]
    assert new.between(3, 6) == [6, 7, 8]


def test_a_duplicate_or_a_missing_item_is_refused():
    seq = Ranked.of([1, 2, 3])
    with pytest.raises(ValueError, match="already"):
        seq.insert(2)
    with pytest.raises(KeyError):
        seq.remove(4)
    with pytest.raises(KeyError):
        Ranked().remove(1)


def test_tuples_compare_only_up_to_their_unique_key():
    """Entries end with a payload that cannot be ordered: comparisons never reach it."""

    class Payload:
        def __lt__(self, other):
            raise AssertionError("compared the payload")

        __gt__ = __lt__

    entries = [(-p, t, f"k{p}{t}", Payload()) for p in range(3) for t in range(20)]
    seq = Ranked.of(entries)
    for e in entries[::3]:
        seq = seq.remove(e)
    kept = [e for i, e in enumerate(entries) if i % 3]
    assert list(seq) == sorted(kept, key=lambda e: e[:3])
    assert [seq.rank(e) for e in sorted(kept, key=lambda e: e[:3])] == list(range(len(kept)))
