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
