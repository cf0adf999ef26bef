import threading
import time

from prometheus_client import CollectorRegistry, generate_latest

from webhook import metrics
from webhook.metrics import Tally


def sample(name, **labels):
    value = metrics.REGISTRY.get_sample_value(name, labels)
    return value or 0.0


def test_tally_writes_exact_counts_and_histogram_once_per_interval():
    now = [0.0]
    tally = Tally(interval=1.0, clock=lambda: now[0])
    path = "/test-tally"
    before = sample("tower_webhook_requests_total", path=path, code="200", outcome="patched")
    for seconds in (0.0004, 0.003, 0.003, 2.0):
        tally.record(path, "200", "patched", seconds)
    # Nothing written until the interval has passed.
    assert (
        sample("tower_webhook_requests_total", path=path, code="200", outcome="patched") == before
    )
    now[0] = 1.5
    tally.record(path, "200", "patched", 0.02)
    assert (
        sample("tower_webhook_requests_total", path=path, code="200", outcome="patched")
        == before + 5
    )
    assert sample("tower_webhook_request_duration_seconds_bucket", path=path, le="0.0005") == 1
    assert sample("tower_webhook_request_duration_seconds_bucket", path=path, le="0.005") == 3
    assert sample("tower_webhook_request_duration_seconds_bucket", path=path, le="0.025") == 4
    assert sample("tower_webhook_request_duration_seconds_bucket", path=path, le="+Inf") == 5
    assert sample("tower_webhook_request_duration_seconds_count", path=path) == 5
    assert abs(sample("tower_webhook_request_duration_seconds_sum", path=path) - 2.0264) < 1e-9
    assert generate_latest(CollectorRegistry()) == b""


def test_a_failed_write_keeps_the_counts_for_the_next_flush(monkeypatch, caplog):
    now = [0.0]
    tally = Tally(interval=1.0, clock=lambda: now[0])
    path = "/test-tally-failing"
    before = sample("tower_webhook_requests_total", path=path, code="200", outcome="allowed")
    labels = metrics.REQUESTS.labels

    def missing_directory(*args):
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(metrics.REQUESTS, "labels", missing_directory)
    for _ in range(3):
        tally.record(path, "200", "allowed", 0.001)
    now[0] = 1.5
    tally.record(path, "200", "allowed", 0.001)  # due: the write fails, the request does not
    now[0] = 3.0
    tally.record(path, "200", "allowed", 0.001)  # fails again: said once
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        "webhook metrics not written ([Errno 2] No such file or directory); counts are kept "
        "until they can be"
    ]

    monkeypatch.setattr(metrics.REQUESTS, "labels", labels)
    now[0] = 4.5
    tally.record(path, "200", "allowed", 0.001)
    assert (
        sample("tower_webhook_requests_total", path=path, code="200", outcome="allowed")
        == before + 6
    )
    assert sample("tower_webhook_request_duration_seconds_count", path=path) == 6
    assert caplog.records[-1].getMessage() == "webhook metrics written again"


def test_with_the_flusher_running_a_request_never_writes_metrics(monkeypatch):
    tally = Tally(interval=60.0)  # the real clock: the first record starts the flusher thread
    writers = []
    labels = metrics.REQUESTS.labels

    def spy(*args):
        writers.append(threading.get_ident())
        return labels(*args)

    monkeypatch.setattr(metrics.REQUESTS, "labels", spy)
    tally.record("/test-tally-thread", "200", "allowed", 0.001)
    tally._next_flush = time.monotonic() - 1.0  # a flush is due; the thread sleeps on
    tally.record("/test-tally-thread", "200", "allowed", 0.001)
    assert writers == []  # written by the flusher thread, in its time
    tally.flush()  # what the thread will do
    assert writers == [threading.get_ident()]
