"""The real client over real sockets: what each failure is, and what it means for a write."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable

import pytest
from kubernetes import config as k8s_config

from extender.kube.api import resources as r
from extender.kube.api.client import (
    ApiError,
    NotLeaderError,
    RequestBudget,
    RestClient,
    TransportError,
)


class RawServer:
    """Accepts connections on 127.0.0.1 and does to each what `behave(conn, request)` says."""

    def __init__(self, behave: Callable[[socket.socket, bytes], None]) -> None:
        self.behave = behave
        self.requests: list[bytes] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            ),
            0,
        )
        while len(body) < length:
            body += conn.recv(65536)
        self.requests.append(head.split(b"\r\n")[0])
        self.behave(conn, body)

    def close(self) -> None:
        self.sock.close()


def answer(status: int, body: dict, headers: str = "") -> Callable[[socket.socket, bytes], None]:
    def behave(conn: socket.socket, _: bytes) -> None:
        data = json.dumps(body).encode()
        conn.sendall(
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{headers}"
            f"Content-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        conn.close()

    return behave


def hang_up(conn: socket.socket, _: bytes) -> None:
    conn.close()


def never_answer(conn: socket.socket, _: bytes) -> None:
    threading.Event().wait(5)
    conn.close()


def client_for(tmp_path, port: int, **kwargs) -> RestClient:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(config))
    api = k8s_config.new_client_from_config(config_file=str(path))
    return RestClient(api, RequestBudget(1000, 1000), timeout=0.5, **kwargs)


def status(code: int, reason: str) -> dict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "message": f"it said {code}",
        "code": code,
    }


PATCH = {"status": {"x": 1}, "metadata": {"resourceVersion": "5"}}


def patch(client: RestClient) -> None:
    client.patch(r.WORKLOADS, "w", PATCH, "default", subresource="status")


def test_nothing_listening_is_refused_and_certainly_not_written(tmp_path):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    seen = []
    client = client_for(tmp_path, port, on_error=lambda verb, code: seen.append((verb, code)))
    with pytest.raises(TransportError) as err:
        patch(client)
    assert (err.value.kind, err.value.retriable, err.value.ambiguous) == (
        "connection-refused",
        True,
        False,
    )
    assert seen == [("PATCH", "connection-refused")]


@pytest.mark.parametrize(
    ("behave", "kind"),
    [(hang_up, "connection-reset"), (never_answer, "timeout")],
    ids=["closed without an answer", "no answer before the timeout"],
)
def test_a_write_sent_without_an_answer_is_ambiguous(tmp_path, behave, kind):
    server = RawServer(behave)
    try:
        with pytest.raises(TransportError) as err:
            patch(client_for(tmp_path, server.port))
    finally:
        server.close()
    assert (err.value.kind, err.value.retriable, err.value.ambiguous) == (kind, True, True)
    assert server.requests == [
        b"PATCH /apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads/w/status HTTP/1.1"
    ]


@pytest.mark.parametrize(
    ("code", "reason", "headers", "retriable", "ambiguous", "retry_after"),
    [
        (429, "TooManyRequests", "Retry-After: 3\r\n", True, False, 3.0),
        (503, "ServiceUnavailable", "", True, False, None),
        (500, "InternalError", "", True, True, None),
        (504, "Timeout", "", True, True, None),
        (409, "Conflict", "", False, False, None),
        (422, "Invalid", "", False, False, None),
    ],
)
def test_what_an_error_status_means(
    tmp_path, code, reason, headers, retriable, ambiguous, retry_after
):
    server = RawServer(answer(code, status(code, reason), headers))
    try:
        with pytest.raises(ApiError) as err:
            patch(client_for(tmp_path, server.port))
    finally:
        server.close()
    assert (err.value.status, err.value.reason, err.value.message) == (
        code,
        reason,
        f"it said {code}",
    )
    assert (err.value.retriable, err.value.ambiguous, err.value.retry_after) == (
        retriable,
        ambiguous,
        retry_after,
    )


def test_the_fence_stops_a_write_before_it_is_sent_but_not_a_read(tmp_path):
    server = RawServer(answer(200, {"kind": "Workload", "metadata": {"name": "w"}}))

    def deposed() -> None:
        raise NotLeaderError("not leading")

    client = client_for(tmp_path, server.port, fence=deposed)
    try:
        with pytest.raises(NotLeaderError):
            patch(client)
        assert server.requests == []
        assert client.get(r.WORKLOADS, "w", "default")["metadata"]["name"] == "w"
    finally:
        server.close()
    assert len(server.requests) == 1


def test_a_paged_list_is_watched_from_its_first_pages_version(tmp_path):
    pages = iter(
        [
            {"kind": "JobList", "metadata": {"resourceVersion": "200", "continue": "next"},
             "items": [{"metadata": {"name": "b", "namespace": "default"}}]},
            {"kind": "JobList", "metadata": {"resourceVersion": "260"},
             "items": [{"metadata": {"name": "c", "namespace": "default"}}]},
        ]
    )  # fmt: skip
    server = RawServer(lambda c, b: answer(200, next(pages), "Connection: close\r\n")(c, b))
    try:
        items, version = client_for(tmp_path, server.port).list(r.JOBS, page=1)
    finally:
        server.close()
    assert [i["metadata"]["name"] for i in items] == ["b", "c"]
    assert version == "200"
    assert b"continue=next" in server.requests[1]
