"""The real server: `python -m webhook` under gunicorn over TLS, certificates from `python -m certs`."""

import json
import os
import signal
import socket
import ssl
import threading
import time
from pathlib import Path

import pytest
from cryptography import x509

from tests.fixtures import admission_review
from tests.servers import generate, start_webhook

SEED = json.dumps(admission_review("01-mutate.job-CREATE-generateName.seed-job")).encode()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    certs = tmp_path_factory.mktemp("certs")
    generate(certs)
    srv = start_webhook(
        certs, tmp_path_factory.mktemp("metrics"), "--max-body-bytes", str(3 * 1024 * 1024)
    )
    proc = srv.proc
    yield srv
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    log = proc.stdout.read().decode()
    assert "Traceback" not in log, log


def test_mutates_the_seed_job_over_verified_tls(server):
    status, body = server.post("/mutate-batch-v1-job", SEED)
    assert status == 200
    answer = json.loads(body)["response"]
    assert answer["allowed"] is True
    assert answer["patchType"] == "JSONPatch"


def test_connections_are_kept_alive(server):
    conn = server.connect()
    try:
        assert server.post("/mutate-batch-v1-job", SEED, conn=conn)[0] == 200
        first = conn.sock
        for _ in range(4):
            assert server.post("/mutate-batch-v1-job", SEED, conn=conn)[0] == 200
            assert conn.sock is first  # http.client would have reconnected if we had closed
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("body", "content_type", "want"),
    [
        (b"{nope", "application/json", b"body is not JSON"),
        (SEED, "text/plain", b"Content-Type must be application/json"),
        (
            b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{}}',
            "application/json",
            b"AdmissionReview request has no uid",
        ),
        (
            b"[" + b" " * (4 * 1024 * 1024) + b"]",
            "application/json",
            b"body of 4194306 bytes is over the 3145728 limit",
        ),
    ],
    ids=["not JSON", "wrong content type", "no uid", "over 3 MiB"],
)
def test_bad_input_over_https_is_a_one_line_400(server, body, content_type, want):
    status, text = server.post("/mutate-batch-v1-job", body, content_type)
    assert status == 400
    assert text.startswith(want)
    assert text.count(b"\n") == 1


def test_get_on_a_webhook_path_is_400(server):
    conn = server.connect()
    conn.request("GET", "/mutate-batch-v1-job")
    response = conn.getresponse()
    assert (response.status, response.read()) == (
        400,
        b"method GET is not allowed: webhooks are POSTed\n",
    )


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated")
def test_tls_older_than_1_2_is_refused(server):
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.load_verify_locations(str(server.certs / "ca.crt"))
    old.maximum_version = ssl.TLSVersion.TLSv1_1
    old.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    with socket.create_connection(("127.0.0.1", server.port)) as raw, pytest.raises(ssl.SSLError):
        old.wrap_socket(raw, server_hostname="127.0.0.1")


def test_metrics_are_merged_across_workers(server):
    for _ in range(6):
        server.post("/validate-batch-v1-job", SEED)
    wanted = (
        'tower_webhook_requests_total{code="200",outcome="allowed",path="/validate-batch-v1-job"}'
    )
    deadline = time.monotonic() + 5  # workers write their counts once a second
    while True:
        conn = server.connect()
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        rows = [row for row in text.splitlines() if row.startswith(wanted)]
        if rows and float(rows[0].split()[-1]) >= 6:
            break
        assert time.monotonic() < deadline, text
        time.sleep(0.3)


def peer_serial(server):
    with (
        socket.create_connection(("127.0.0.1", server.port)) as raw,
        server.context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def test_certificate_rotation_under_load_drops_nothing(server):
    before = peer_serial(server)
    failures, served = [], [0]
    stop = threading.Event()

    def load():
        while not stop.is_set():
            try:
                status, _ = server.post("/mutate-batch-v1-job", SEED)
                if status != 200:
                    failures.append(status)
                served[0] += 1
            except Exception as err:
                failures.append(repr(err))

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    generate(server.certs, "--reuse-ca")  # rotate: same CA, new serving certificate
    deadline = time.monotonic() + 10
    while peer_serial(server) == before and time.monotonic() < deadline:
        time.sleep(0.1)
    # Each worker looks at the files at most once a second, on a new connection: a second
    # after one of them served the new certificate, every one does.
    time.sleep(1.5)
    stop.set()
    for t in threads:
        t.join()
    assert [peer_serial(server) == before for _ in range(8)] == [False] * 8
    assert failures == []
    assert served[0] > 20


def _tcp_sockets(pid: int, port: int) -> tuple[int, int]:
    """(listening, established) IPv4 sockets on `port` that process `pid` holds."""
    inodes = set()
    fds = Path(f"/proc/{pid}/fd")
    for fd in fds.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    listening = established = 0
    for row in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = row.split()
        local_port = int(fields[1].rsplit(":", 1)[1], 16)
        if local_port != port or fields[9] not in inodes:
            continue
        listening += fields[3] == "0A"
        established += fields[3] == "01"
    return listening, established


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads sockets from Linux /proc")
def test_each_worker_listens_and_a_burst_of_connections_reaches_both(server):
    children = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children")
    deadline = time.monotonic() + 10  # /readyz answered once the first worker was up
    while True:
        workers = [int(pid) for pid in children.read_text().split()]
        if len(workers) == 2 and all(_tcp_sockets(pid, server.port)[0] for pid in workers):
            break
        assert time.monotonic() < deadline, workers
        time.sleep(0.1)
    # The kernel, not a race to accept(), picks the worker: each has its own listening socket.
    assert [_tcp_sockets(pid, server.port)[0] for pid in workers] == [1, 1]
    assert _tcp_sockets(server.proc.pid, server.port)[0] == 0

    before = [_tcp_sockets(pid, server.port)[1] for pid in workers]
    raw = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(32)]
    opened = []

    def handshake(sock: socket.socket) -> None:
        tls = server.context.wrap_socket(sock, server_hostname="127.0.0.1")
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: tower\r\n\r\n")
        tls.recv(1024)
        opened.append(tls)

    threads = [threading.Thread(target=handshake, args=(sock,)) for sock in raw]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        after = [_tcp_sockets(pid, server.port)[1] for pid in workers]
        held = sorted(a - b for a, b in zip(after, before, strict=True))
        assert sum(held) == 32
        # Spread by hash, 30 or more of 32 land on one worker about once in 4 million runs.
        # Racing to accept() on one socket, one worker often took nearly all of them.
        assert held[0] >= 3, held
    finally:
        for tls in opened:
            tls.close()


def test_a_metrics_directory_that_does_not_exist_yet_is_made(tmp_path):
    generate(tmp_path / "certs")
    server = start_webhook(tmp_path / "certs", tmp_path / "not-yet" / "metrics", workers=1)
    try:
        for _ in range(3):
            assert server.post("/mutate-batch-v1-job", SEED)[0] == 200
        wanted = (
            'tower_webhook_requests_total{code="200",outcome="patched",path="/mutate-batch-v1-job"}'
        )
        deadline = time.monotonic() + 5  # the worker writes its counts once a second
        while True:
            conn = server.connect()
            conn.request("GET", "/metrics")
            response = conn.getresponse()
            text = response.read().decode()
            rows = [row for row in text.splitlines() if row.startswith(wanted)]
            if response.status == 200 and rows and float(rows[0].split()[-1]) == 3:
                break
            assert time.monotonic() < deadline, (response.status, text[-500:])
            time.sleep(0.3)
    finally:
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=20) == 0
    log = server.proc.stdout.read().decode()
    assert "Traceback" not in log, log


def test_the_log_says_at_which_address_it_listens(tmp_path):
    """gunicorn's own line reads `Listening at:  (1)` when each worker opens its own socket
    (reuse_port); Tower's says the address."""
    generate(tmp_path / "certs")
    server = start_webhook(tmp_path / "certs", tmp_path / "metrics", workers=1)
    server.proc.send_signal(signal.SIGTERM)
    output = server.proc.communicate(timeout=30)[0].decode()
    wanted = f"Listening at: https://127.0.0.1:{server.port} (1 workers, each on its own socket)"
    assert wanted in output, output
