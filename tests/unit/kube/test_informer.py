"""An informer keeps its store in sync through broken streams: it resumes from the last
version it saw, lists again only on 410, and never stops on an error."""

from __future__ import annotations

import threading

from extender.kube.api import resources as r
from extender.kube.api.client import ApiError, TransportError
from extender.kube.api.informer import Informer
from extender.kube.api.store import Store
from extender.kube.api.workqueue import Backoff


def wl(name: str, rv: int) -> dict:
    return {"metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv)}}


class Scripted:
    """Answers lists and watches from a script; records what was asked."""

    def __init__(self, lists: list, watches: list) -> None:
        self.lists = list(lists)
        self.watches = list(watches)
        self.asked: list[tuple[str, str | None]] = []
        self.done = threading.Event()

    def list(self, resource, **kwargs):
        self.asked.append(("list", None))
        answer = self.lists.pop(0)
        if isinstance(answer, Exception):
            raise answer
        items, version = answer
        return [kwargs["transform"](dict(i)) for i in items], version

    def watch(self, resource, version, **kwargs):
        self.asked.append(("watch", version))
        if not self.watches:
            self.done.set()
            threading.Event().wait(5)
            return
        script = self.watches.pop(0)
        for step in script:
            if isinstance(step, Exception):
                raise step
            yield step


def run(client: Scripted) -> tuple[Store, Informer]:
    store = Store()
    stop = threading.Event()
    informer = Informer(client, store, r.WORKLOADS, stop=stop, backoff=Backoff(0.001, 0.01))
    informer.start()
    assert client.done.wait(5), client.asked
    stop.set()
    return store, informer


RESET = TransportError("connection-reset", "the server went away", sent=True)
GONE = {"type": "ERROR", "code": 410, "reason": "Expired", "message": "too old"}


def test_a_broken_stream_resumes_from_the_last_version_it_delivered():
    client = Scripted(
        lists=[([wl("a", 10)], "10")],
        watches=[
            [("MODIFIED", wl("a", 11)), ("BOOKMARK", wl("", 15)), RESET],
            [("ADDED", wl("b", 16))],
        ],
    )
    store, informer = run(client)
    assert client.asked == [("list", None), ("watch", "10"), ("watch", "15"), ("watch", "16")]
    assert store.keys(r.WORKLOADS) == ["default/a", "default/b"]
    assert informer.relists == 1


def test_410_lists_again_and_what_vanished_meanwhile_is_deleted():
    client = Scripted(
        lists=[([wl("a", 10), wl("b", 10)], "10"), ([wl("b", 30)], "30")],
        watches=[[("ERROR", GONE)]],
    )
    store, informer = run(client)
    assert client.asked == [("list", None), ("watch", "10"), ("list", None), ("watch", "30")]
    assert store.keys(r.WORKLOADS) == ["default/b"]
    assert informer.relists == 2


def test_an_unreachable_server_is_waited_for_never_fatal():
    refused = TransportError("connection-refused", "nothing listens", sent=False)
    client = Scripted(
        lists=[refused, ApiError(503, "ServiceUnavailable", "starting"), ([wl("a", 5)], "5")],
        watches=[],
    )
    store, informer = run(client)
    assert [a for a, _ in client.asked] == ["list", "list", "list", "watch"]
    assert informer.failures == 2
    assert store.synced(r.WORKLOADS).is_set()
