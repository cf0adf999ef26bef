"""The visibility API's answers from the core: a ClusterQueue's and a LocalQueue's pending
workloads in Kueue's order with their positions, held to a plain sort (`ordered`) as the
oracle, on states the queue manager keeps as workloads arrive, are admitted, leave and move."""

from __future__ import annotations

import dataclasses
import random

import pytest

from extender.core.api.models import LocalQueue, Workload
from extender.core.scheduling import ranked
from extender.core.scheduling.admission_fair_sharing import AfsConfig
from extender.core.scheduling.cycle import ClusterState
from extender.core.scheduling.visibility import PendingPositions, local_queue_key, ordered
from tests.builders import CQ, WL, flavor, run_until_quiet


def rows(page):
    return [
        (p.workload.name, p.workload.queue_name, p.position_in_cluster_queue,
         p.position_in_local_queue)
        for p in page
    ]  # fmt: skip


def expected(workloads: list[Workload], offset: int = 0, limit: int = 10**9):
    """Kueue's answer, the slow way: the whole queue sorted, LocalQueue positions counted."""
    out, seen = [], {}
    for position, w in enumerate(workloads):
        lq = local_queue_key(w)
        out.append((w.name, w.queue_name, position, seen.get(lq, 0)))
        seen[lq] = seen.get(lq, 0) + 1
    return out[offset : offset + limit]


def expected_lq(workloads, namespace, name, offset=0, limit=10**9):
    mine = [r for r, w in zip(expected(workloads), workloads, strict=True)
            if w.namespace == namespace and w.queue_name == name]  # fmt: skip
    return mine[offset : offset + limit]


def state(*local_queues: tuple[str, str, str], fair: bool = False) -> ClusterState:
    cqs = [
        dataclasses.replace(
            CQ(name).group(("default", {"cpu": "1"})).obj(), admission_fair_sharing=fair
        )
        for name in sorted({cq for _, _, cq in local_queues})
    ]
    s = ClusterState()
    s.configure(
        flavors=[flavor("default")],
        cluster_queues=cqs,
        local_queues=[LocalQueue(ns, name, cq) for ns, name, cq in local_queues],
    )
    return s


# ----- the answers, one table ----------------------------------------------------------------


def test_positions_priority_and_local_queue_as_kueue_lists_them():
    s = state(("default", "user-queue", "cq"), ("team-b", "other", "cq"))
    positions = s.queues.keep_positions()
    for w in (
        WL("old-low").queue("user-queue").priority(1).created(1).request("cpu", "9").obj(),
        WL("new-high").queue("user-queue").priority(9).created(5).request("cpu", "9").obj(),
        WL("b-tie", "team-b").queue("other").uid("b").created(3).request("cpu", "9").obj(),
        WL("a-tie").queue("user-queue").uid("a").created(3).request("cpu", "9").obj(),
        WL("oldest", "team-b").queue("other").created(0).request("cpu", "9").obj(),
    ):
        s.add_workload(w)
    assert rows(positions.cluster_queue("cq", 0, 1000)) == [
        ("new-high", "user-queue", 0, 0),
        ("old-low", "user-queue", 1, 1),
        ("oldest", "other", 2, 0),
        ("a-tie", "user-queue", 3, 2),
        ("b-tie", "other", 4, 1),
    ]
    # A page deep in the queue keeps every position it would have on the whole list.
    assert rows(positions.cluster_queue("cq", 3, 1)) == [("a-tie", "user-queue", 3, 2)]
    assert rows(positions.cluster_queue("cq", 2, 2)) == [
        ("oldest", "other", 2, 0),
        ("a-tie", "user-queue", 3, 2),
    ]
    assert rows(positions.local_queue("default", "user-queue", 1, 5)) == [
        ("old-low", "user-queue", 1, 1),
        ("a-tie", "user-queue", 3, 2),
    ]
    assert rows(positions.local_queue("team-b", "other", 0, 1)) == [("oldest", "other", 2, 0)]
    assert positions.cluster_queue("cq", 5, 10) == []
    assert positions.cluster_queue("cq", 0, 0) == []


def test_an_unknown_queue_is_none_and_a_local_queue_without_its_cluster_queue_is_empty():
    s = state(("default", "lq", "cq"))
    s.apply_local_queue(LocalQueue("default", "orphan", "no-such-cq"))
    positions = s.queues.keep_positions()
    s.add_workload(WL("waits").queue("orphan").request("cpu", "1").obj())  # parked: no CQ
    assert positions.cluster_queue("no-such-cq", 0, 10) is None
    assert positions.local_queue("default", "missing", 0, 10) is None
    assert positions.local_queue("other-ns", "lq", 0, 10) is None
    assert positions.local_queue("default", "orphan", 0, 10) == []
    assert positions.cluster_queue("cq", 0, 10) == []
    s.delete_cluster_queue("cq")
    assert positions.cluster_queue("cq", 0, 10) is None


def test_admitted_workloads_leave_and_inadmissible_ones_stay():
    """Kueue lists what waits in the heap and what was set aside as inadmissible alike; an
    admitted workload is no longer pending."""
    s = state(("default", "lq", "cq"))
    positions = s.queues.keep_positions()
    small = WL("small").created(0).request("cpu", "1").obj()
    big = WL("big").created(1).request("cpu", "8").obj()
    later = WL("later").created(2).request("cpu", "1").obj()
    for w in (small, big, later):
        s.add_workload(w)
    run_until_quiet(s)  # small is admitted; big fits nowhere and is set aside
    assert s.is_admitted(small.key)
    assert s.queues.queue_is_inadmissible("cq", big.key)
    assert rows(positions.cluster_queue("cq", 0, 10)) == [
        ("big", "lq", 0, 0),
        ("later", "lq", 1, 1),
    ]
    s.finish(small.key)  # quota back: later is admitted next
    run_until_quiet(s, 1.0)
    assert rows(positions.cluster_queue("cq", 0, 10)) == [("big", "lq", 0, 0)]


def test_a_workload_updated_in_place_moves_to_its_new_place():
    s = state(("default", "lq", "cq"), ("default", "other", "cq"))
    positions = s.queues.keep_positions()
    a = WL("a").created(0).request("cpu", "9").obj()
    b = WL("b").created(1).request("cpu", "9").obj()
    s.add_workload(a)
    s.add_workload(b)
    s.add_workload(dataclasses.replace(b, priority=5, queue_name="other"))
    assert rows(positions.cluster_queue("cq", 0, 10)) == [("b", "other", 0, 0), ("a", "lq", 1, 0)]
    assert rows(positions.local_queue("default", "lq", 0, 10)) == [("a", "lq", 1, 0)]


def test_deleting_a_local_queue_or_cluster_queue_takes_its_workloads_out():
    s = state(("default", "lq", "cq"), ("default", "other", "cq"))
    positions = s.queues.keep_positions()
    for i, q in enumerate(("lq", "other", "lq")):
        s.add_workload(WL(f"w{i}").queue(q).created(i).request("cpu", "9").obj())
    s.delete_local_queue("default/other")
    assert rows(positions.cluster_queue("cq", 0, 10)) == [("w0", "lq", 0, 0), ("w2", "lq", 1, 1)]
    assert positions.local_queue("default", "other", 0, 10) is None
    s.apply_local_queue(LocalQueue("default", "other", "cq"))  # it comes back: so does w1
    assert [r[0] for r in rows(positions.cluster_queue("cq", 0, 10))] == ["w0", "w1", "w2"]


# ----- the oracle: random histories ----------------------------------------------------------


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(ranked, "LOAD", 4)


@pytest.mark.parametrize("seed", range(6))
def test_random_histories_agree_with_a_plain_sort(small_chunks, seed):
    rng = random.Random(seed)
    lqs = [("ns-a", "lq-1", "cq-1"), ("ns-a", "lq-2", "cq-1"), ("ns-b", "lq-1", "cq-1"),
           ("ns-b", "lq-3", "cq-2")]  # fmt: skip
    s = state(*lqs)
    # Half the histories turn the index on before anything arrives, half once it is full.
    positions = s.queues.keep_positions() if seed % 2 else None
    now = 0.0
    names: list[str] = []
    for step in range(300):
        roll = rng.random()
        if roll < 0.55 or not names:
            ns, q, _ = rng.choice(lqs)
            name = f"w{step}"
            size = rng.choice(["1", "9"])  # "9" never fits: it waits for good
            s.add_workload(
                WL(name, ns).queue(q).priority(rng.randrange(3)).created(rng.randrange(20))
                .request("cpu", size).obj()
            )  # fmt: skip
            names.append(f"{ns}/{name}")
        elif roll < 0.75:
            key = names.pop(rng.randrange(len(names)))
            s.delete_workload(key)
        elif roll < 0.85:
            now += 1
            s.schedule(now)
        elif roll < 0.9:
            admitted = [a.workload.key for a in s.cache.admitted.values()]
            if admitted:
                s.finish(rng.choice(admitted))
        else:  # a workload updated: new priority, same queue
            key = rng.choice(names)
            w = s.queues.workloads.get(key)
            if w is not None and not s.is_admitted(key):
                s.add_workload(dataclasses.replace(w, priority=rng.randrange(3)))
    if positions is None:
        positions = s.queues.keep_positions()
    for cq in ("cq-1", "cq-2"):
        oracle = ordered(s.pending_workloads_in(cq))
        assert rows(positions.cluster_queue(cq, 0, 10**9)) == expected(oracle)
        for offset, limit in ((0, 3), (2, 5), (len(oracle) - 1, 10), (len(oracle), 1)):
            assert rows(positions.cluster_queue(cq, offset, limit)) == expected(
                oracle, offset, limit
            )
        for ns, q, owner in lqs:
            if owner != cq:
                continue
            for offset, limit in ((0, 10**9), (1, 2), (3, 100)):
                assert rows(positions.local_queue(ns, q, offset, limit)) == expected_lq(
                    oracle, ns, q, offset, limit
                )


# ----- admission fair sharing ----------------------------------------------------------------


def afs_positions(usage: dict[str, float]):
    positions = PendingPositions()
    positions.configure(["cq"], {f"default/{q}": "cq" for q in ("a", "b", "c", "d")})
    workloads = [
        WL(f"{q}{i}").queue(q).priority((i * 7 + len(q)) % 3).created(i).obj()
        for i in range(12)
        for q in ("a", "b", "c", "d")
        if (i + ord(q)) % 4
    ]
    for w in workloads:
        positions.add("cq", w)
    positions.set_usage("cq", usage)
    return positions, workloads


@pytest.mark.parametrize(
    "usage",
    [
        {"default/a": 3.0, "default/b": 1.0, "default/c": 2.0, "default/d": 0.5},  # no ties
        {"default/a": 1.0, "default/b": 1.0, "default/c": 2.0, "default/d": 1.0},  # some tie
        {"default/a": 0.0, "default/b": 0.0, "default/c": 0.0, "default/d": 0.0},  # all tie
        {"default/a": 2.0, "default/c": 2.0},  # never sampled: no usage yet
    ],
    ids=["no-ties", "three-tie", "all-tie", "two-unsampled"],
)
def test_with_admission_fair_sharing_the_local_queue_that_used_least_comes_first(
    small_chunks, usage
):
    positions, workloads = afs_positions(usage)
    oracle = ordered(workloads, lambda lq: usage.get(lq, 0.0))
    assert rows(positions.cluster_queue("cq", 0, 10**9)) == expected(oracle)
    for offset, limit in ((0, 5), (7, 9), (len(oracle) - 2, 5)):
        assert rows(positions.cluster_queue("cq", offset, limit)) == expected(oracle, offset, limit)
    for q in ("a", "b", "c", "d"):
        assert rows(positions.local_queue("default", q, 1, 4)) == expected_lq(
            oracle, "default", q, 1, 4
        )


def test_the_controller_publishes_fair_sharing_usage_from_its_ledger():
    s = ClusterState()
    cq = dataclasses.replace(
        CQ("cq").group(("default", {"cpu": "1"})).obj(), admission_fair_sharing=True
    )
    lqs = [LocalQueue("default", name, "cq") for name in ("heavy", "light")]
    s.configure(flavors=[flavor("default")], cluster_queues=[cq], local_queues=lqs)
    s.configure_fair_sharing(AfsConfig(600, 60))
    s.fair_usage.seed("default/heavy", {"cpu": 8}, now=0.0)
    positions = s.queues.keep_positions()
    s.add_workload(WL("h").queue("heavy").priority(9).created(0).request("cpu", "9").obj())
    s.add_workload(WL("l").queue("light").priority(1).created(1).request("cpu", "9").obj())
    # Until the loop publishes the ledger's usage, the order is plain Kueue order...
    assert [r[0] for r in rows(positions.cluster_queue("cq", 0, 10))] == ["h", "l"]
    s.queues.publish_fair_usage()
    # ...then the LocalQueue that used least comes first, whatever the priorities.
    assert rows(positions.cluster_queue("cq", 0, 10)) == [
        ("l", "light", 0, 0),
        ("h", "heavy", 1, 0),
    ]
    assert rows(positions.local_queue("default", "heavy", 0, 10)) == [("h", "heavy", 1, 0)]


# ----- readers on other threads --------------------------------------------------------------


class CountingGuard:
    """A guard that says how often it was taken and that it is never taken twice at once."""

    def __init__(self) -> None:
        self.held = False
        self.taken = 0

    def __enter__(self):
        assert not self.held, "taken while held"
        self.held = True
        self.taken += 1
        return self

    def __exit__(self, *exc):
        self.held = False


def test_the_writer_swaps_under_the_guard_and_a_view_taken_stays_whole():
    guard = CountingGuard()
    positions = PendingPositions(guard)
    positions.configure(["cq"], {"default/lq": "cq"})
    for i in range(5):
        positions.add("cq", WL(f"w{i}").created(i).obj())
    assert guard.taken >= 5  # each arrival put its sequences in place under the guard
    view = positions._view("cq")
    positions.remove("default/w0")
    positions.add("cq", WL("first").priority(9).obj())
    # The view taken before keeps answering as of then; a new one sees the changes.
    assert [p.workload.name for p in view.cluster_queue_page(0, 10)] == [f"w{i}" for i in range(5)]
    assert [p.workload.name for p in positions.cluster_queue("cq", 0, 2)] == ["first", "w1"]
