"""A sorted sequence that says "the i-th" and "how many come before" in O(log n), never changed.

Every insert or removal returns a new `Ranked` that shares all but one chunk with the old
one, so a reader on another thread keeps a whole, consistent version for as long as it
holds it, and the one writer never waits for a reader. Items are kept in chunks of about
`LOAD` (at most 2*LOAD; one left under LOAD/2 by a removal is joined with a neighbour): a
change copies one chunk and the tuple of chunks, O(LOAD + n/LOAD) references copied in C,
where a balanced tree would make O(log n) Python objects. Items must be totally ordered
and unique (a tuple ending in a unique key is: comparisons never reach past it).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from itertools import accumulate, chain, islice, pairwise
from operator import itemgetter
from typing import Any, Generic, Protocol, TypeVar


class _Ordered(Protocol):
    def __lt__(self, other: Any, /) -> bool: ...


T = TypeVar("T", bound=_Ordered)

# Chunks hold LOAD items on average; sqrt(n) is the cheapest for a change, and 256 is that
# for the 50,000 pending workloads the benchmark (bench/visibility.py) keeps in one queue.
LOAD = 256

# A chunk's last item, by which an item's chunk is found (bisect's key, called in C): no
# separate tuple of them to copy on every change.
_LAST = itemgetter(-1)


class Ranked(Generic[T]):
    """A persistent sorted sequence with rank and select (see the module's docstring)."""

    __slots__ = ("_chunks", "_size", "_starts")

    def __init__(self, chunks: tuple[tuple[T, ...], ...] = (), size: int = 0) -> None:
        self._chunks = chunks
        self._size = size
        # Each chunk's first position, made by the first reader that needs it (a writer
        # never does; two readers making it at once make the same tuple).
        self._starts: tuple[int, ...] | None = None

    @classmethod
    def of(cls, items: Iterable[T]) -> Ranked[T]:
        """A sequence of these items, sorted once (O(n log n)), in full chunks."""
        ordered = sorted(items)
        chunks = tuple(tuple(ordered[i : i + LOAD]) for i in range(0, len(ordered), LOAD))
        return cls(chunks, len(ordered))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[T]:
        return chain.from_iterable(self._chunks)

    def __repr__(self) -> str:
        return f"Ranked({list(self)!r})"

    # ----- changes: each returns a new sequence --------------------------------------

    def insert(self, item: T) -> Ranked[T]:
        """This sequence with `item` in its place (ValueError if an equal item is here)."""
        chunks = self._chunks
        if not chunks:
            return Ranked(((item,),), 1)
        j = bisect_left(chunks, item, key=_LAST)
        if j == len(chunks):
            j -= 1  # past every item: the end of the last chunk
        chunk = chunks[j]
        i = bisect_left(chunk, item)
        if i < len(chunk) and not item < chunk[i] and not chunk[i] < item:
            raise ValueError(f"{item!r} is already in the sequence")
        grown = chunk[:i] + (item,) + chunk[i:]  # noqa: RUF005 (a third faster than unpacking)
        return self._replace(j, j + 1, _split(grown), self._size + 1)

    def remove(self, item: T) -> Ranked[T]:
        """This sequence without `item` (KeyError if it is not here)."""
        chunks = self._chunks
        j = bisect_left(chunks, item, key=_LAST)
        if j == len(chunks):
            raise KeyError(item)
        chunk = chunks[j]
        i = bisect_left(chunk, item)
        if i == len(chunk) or (chunk[i] is not item and (item < chunk[i] or chunk[i] < item)):
            raise KeyError(item)
        shrunk = chunk[:i] + chunk[i + 1 :]
        if len(shrunk) >= LOAD // 2 or len(chunks) == 1:
            parts = (shrunk,) if shrunk else ()
            return self._replace(j, j + 1, parts, self._size - 1)
        # Too small: joined with a neighbour (split again if that makes it too big), so
        # the tuple of chunks stays O(n/LOAD) long however the removals fall.
        if j + 1 < len(chunks):
            return self._replace(j, j + 2, _split(shrunk + chunks[j + 1]), self._size - 1)
        return self._replace(j - 1, j + 1, _split(chunks[j - 1] + shrunk), self._size - 1)

    def _replace(
        self, start: int, stop: int, parts: tuple[tuple[T, ...], ...], size: int
    ) -> Ranked[T]:
        return Ranked(self._chunks[:start] + parts + self._chunks[stop:], size)

    # ----- questions ---------------------------------------------------------------------

    def _first_positions(self) -> tuple[int, ...]:
        starts = self._starts
        if starts is None:
            starts = self._starts = (0, *accumulate(map(len, self._chunks)))
        return starts

    def rank(self, item: T) -> int:
        """How many items come before `item` (its position, if it is here)."""
        j = bisect_left(self._chunks, item, key=_LAST)
        if j == len(self._chunks):
            return self._size
        return self._first_positions()[j] + bisect_left(self._chunks[j], item)

    def between(self, start: int, stop: int) -> list[T]:
        """The items at positions start, ..., stop - 1 (clipped to the sequence):
        O(log n + stop - start)."""
        start, stop = max(start, 0), min(stop, self._size)
        if start >= stop:
            return []
        return list(islice(self.iterate(start), stop - start))

    def iterate(self, start: int = 0) -> Iterator[T]:
        """The items from position `start` on, as they are read (O(log n) to begin)."""
        start = max(start, 0)
        if start >= self._size:
            return iter(())
        starts = self._first_positions()
        j = bisect_right(starts, start) - 1
        first = self._chunks[j][start - starts[j] :]
        return chain(first, chain.from_iterable(islice(self._chunks, j + 1, None)))

    def check(self) -> None:
        """Raise AssertionError if the chunks break the invariants (for tests)."""
        chunks = self._chunks
        items = list(self)
        assert len(items) == self._size, "size"
        assert all(a < b for a, b in pairwise(items)), "order"
        assert all(0 < len(c) <= 2 * LOAD for c in chunks), "chunk sizes"


def _split(chunk: tuple[T, ...]) -> tuple[tuple[T, ...], ...]:
    """One chunk, or two halves of one grown past 2*LOAD."""
    if len(chunk) <= 2 * LOAD:
        return (chunk,)
    half = len(chunk) // 2
    return (chunk[:half], chunk[half:])
