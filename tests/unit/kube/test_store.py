"""The store: fresh lists replace, watch events apply in order, our own writes win, handlers
are told what changed, and the owner index follows."""

from __future__ import annotations

from extender.kube.api import resources as r
from extender.kube.api.store import Store
from extender.kube.api.trim import owner_index


def wl(name: str, rv: int, owner: str | None = None) -> dict:
    meta: dict = {"name": name, "namespace": "default", "resourceVersion": str(rv)}
    if owner:
        meta["ownerReferences"] = [{"kind": "Job", "name": owner, "controller": True}]
    return {"metadata": meta}


def store_with_log() -> tuple[Store, list]:
    store = Store()
    store.register(r.WORKLOADS)
    store.add_index(r.WORKLOADS, "owner", owner_index)
    seen: list = []
    store.subscribe(r.WORKLOADS, lambda key, old, new: seen.append((key, new is None)))
    return store, seen


def test_a_list_replaces_everything_and_tells_only_what_changed():
    store, seen = store_with_log()
    store.replace(r.WORKLOADS, [wl("a", 1), wl("b", 1)])
    assert store.synced(r.WORKLOADS).is_set()
    seen.clear()
    store.replace(r.WORKLOADS, [wl("a", 1), wl("c", 5)])  # a relist after 410
    assert sorted(seen) == [("default/b", True), ("default/c", False)]
    assert store.keys(r.WORKLOADS) == ["default/a", "default/c"]


def test_an_older_watch_event_never_replaces_a_newer_object():
    store, seen = store_with_log()
    store.replace(r.WORKLOADS, [wl("a", 1)])
    store.record(r.WORKLOADS, wl("a", 7))  # the answer of our own write
    seen.clear()
    assert store.apply(r.WORKLOADS, "MODIFIED", wl("a", 5)) is None  # late, stale
    assert store.apply(r.WORKLOADS, "MODIFIED", wl("a", 7)) is None  # the same version
    assert store.get(r.WORKLOADS, "default/a")["metadata"]["resourceVersion"] == "7"
    assert store.apply(r.WORKLOADS, "MODIFIED", wl("a", 9)) == "default/a"
    assert seen == [("default/a", False)]


def test_an_answer_is_told_once_and_its_watch_event_not_again():
    """The answer of a write (or a read) may carry others' changes too: the handlers hear of
    it as of a watch event, and the watch event of the same version is then dropped."""
    store, seen = store_with_log()
    store.replace(r.WORKLOADS, [wl("a", 1)])
    seen.clear()
    store.record(r.WORKLOADS, wl("a", 2))
    assert seen == [("default/a", False)]
    assert store.apply(r.WORKLOADS, "MODIFIED", wl("a", 2)) is None
    assert store.record(r.WORKLOADS, wl("a", 1))["metadata"]["resourceVersion"] == "2"
    assert seen == [("default/a", False)]


def test_deletion_is_told_and_the_owner_index_follows():
    store, seen = store_with_log()
    store.replace(r.WORKLOADS, [wl("a", 1, owner="job-1"), wl("b", 1, owner="job-1")])
    assert store.by_index(r.WORKLOADS, "owner", "Job/default/job-1") == ["default/a", "default/b"]
    seen.clear()
    store.apply(r.WORKLOADS, "DELETED", wl("a", 3, owner="job-1"))
    assert seen == [("default/a", True)]
    assert store.by_index(r.WORKLOADS, "owner", "Job/default/job-1") == ["default/b"]
    store.apply(r.WORKLOADS, "MODIFIED", wl("b", 4))  # orphaned: its owner reference went
    assert store.by_index(r.WORKLOADS, "owner", "Job/default/job-1") == []


def test_an_event_without_a_name_is_ignored():
    store, seen = store_with_log()
    assert store.apply(r.WORKLOADS, "ADDED", {"metadata": {"namespace": "default"}}) is None
    assert store.apply(r.WORKLOADS, "ADDED", {"metadata": {"name": "x"}}) is None
    assert seen == []


def test_a_failing_handler_does_not_stop_the_others_or_the_watch():
    store = Store()
    store.register(r.WORKLOADS)
    seen = []

    def broken(key, old, new):
        raise RuntimeError("a bug")

    store.subscribe(r.WORKLOADS, broken)
    store.subscribe(r.WORKLOADS, lambda key, old, new: seen.append(key))
    store.apply(r.WORKLOADS, "ADDED", wl("a", 1))
    assert seen == ["default/a"]
    assert store.handler_failures == 1


def test_the_answer_of_a_write_sent_before_a_deletion_does_not_bring_the_object_back():
    """A start patch answered at version 7, the object deleted at 8, and the answer read
    after the DELETED event: the object stays gone (the controller would otherwise hold its
    Workload for a job that no longer exists)."""
    store, seen = store_with_log()
    store.replace(r.WORKLOADS, [wl("a", 5, owner="job")])
    assert store.apply(r.WORKLOADS, "DELETED", wl("a", 8, owner="job")) == "default/a"
    seen.clear()
    assert store.record(r.WORKLOADS, wl("a", 7, owner="job")) is None
    assert store.get(r.WORKLOADS, "default/a") is None
    assert store.by_index(r.WORKLOADS, "owner", "Job/default/job") == []
    assert seen == []
    # The same name created again is a new object, at a newer version.
    assert store.record(r.WORKLOADS, wl("a", 9))["metadata"]["resourceVersion"] == "9"
    assert seen == [("default/a", False)]
