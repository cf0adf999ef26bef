"""WaitForPodsReady's writes against the recording client, in virtual time: what each step costs."""

from __future__ import annotations

import pytest

from extender.core.admission.pods_ready import RequeuingStrategy, WaitForPodsReady
from extender.kube.api import resources as r
from tests.fakes import FakeKube, controller_over
from tests.unit.kube.test_reconcilers import config, job, run, set_job_status, started, wl_key

WAIT = WaitForPodsReady(60.0, False, 60.0, RequeuingStrategy("Eviction", None, 10, 100))


def cluster(**settings):
    fake = FakeKube()
    for obj in (*config(), job("a", "1")):
        fake.add(obj)
    ctl, clock = controller_over(fake, **settings)
    return ctl, fake, clock


def status_writes(fake):
    return [a for a in fake.writes("patch", "workloads") if a.subresource == "status"]


def pods_ready(fake, ctl):
    wl = fake.current(r.WORKLOADS, wl_key(ctl, "a"))
    return next((c for c in wl["status"]["conditions"] if c["type"] == "PodsReady"), None)


def test_pods_ready_costs_one_write_once_ready_the_wait_goes_in_the_admission():
    ctl, fake, _ = cluster(wait_for_pods_ready=WAIT)
    run(ctl, fake)
    admission = status_writes(fake)
    assert len(admission) == 1
    assert pods_ready(fake, ctl)["reason"] == "WaitForStart"
    set_job_status(fake, "a", active=1, ready=1)
    run(ctl, fake)
    written = status_writes(fake)[len(admission) :]
    assert len(written) == 1
    assert (pods_ready(fake, ctl)["status"], pods_ready(fake, ctl)["reason"]) == ("True", "Started")
    run(ctl, fake)  # nothing more to say
    assert len(status_writes(fake)) == len(admission) + 1


def test_without_the_setting_no_pods_ready_is_written():
    ctl, fake, _ = cluster()
    run(ctl, fake)
    set_job_status(fake, "a", active=1, ready=1)
    run(ctl, fake)
    assert pods_ready(fake, ctl) is None


def test_the_timeout_is_kept_in_virtual_time_and_the_backoff_too():
    ctl, fake, clock = cluster(wait_for_pods_ready=WAIT)
    run(ctl, fake)
    clock.advance(59)
    run(ctl, fake)
    wl = fake.current(r.WORKLOADS, wl_key(ctl, "a"))
    assert not any(c["type"] == "Evicted" for c in wl["status"]["conditions"])
    clock.advance(2)
    run(ctl, fake)
    run(ctl, fake)  # evicted, stopped (no active pods here), requeued
    wl = fake.current(r.WORKLOADS, wl_key(ctl, "a"))
    evicted = next(c for c in wl["status"]["conditions"] if c["type"] == "Evicted")
    assert (evicted["status"], evicted["reason"]) == ("True", "PodsReadyTimeout")
    assert wl["status"]["requeueState"]["count"] == 1
    assert "admission" not in wl["status"] or wl["status"]["admission"] is None
    clock.advance(5)  # within the 10 s backoff: not admitted again
    run(ctl, fake)
    assert not ctl.ctx.state.is_admitted(wl_key(ctl, "a"))
    clock.advance(6)
    run(ctl, fake)
    assert ctl.ctx.state.is_admitted(wl_key(ctl, "a"))
    requeued = next(
        c
        for c in fake.current(r.WORKLOADS, wl_key(ctl, "a"))["status"]["conditions"]
        if c["type"] == "Requeued"
    )
    assert (requeued["status"], requeued["reason"]) == ("True", "BackoffFinished")


@pytest.mark.parametrize(("timestamp", "next_admitted"), [("Eviction", "d"), ("Creation", "a")])
def test_requeuing_timestamp_decides_where_a_timed_out_workload_queues(timestamp, next_admitted):
    fake = FakeKube()
    for obj in (*config(), job("a", "3"), job("b", "3"), job("d", "3")):
        fake.add(obj)  # created together: a, b, d in that order
    wait = WaitForPodsReady(60.0, False, 60.0, RequeuingStrategy(timestamp, None, 10, 100))
    ctl, clock = controller_over(fake, wait_for_pods_ready=wait)
    run(ctl, fake)
    assert [n for n in "abd" if started(fake, n)] == ["a"]
    clock.advance(61)  # a times out and gives its quota to b
    run(ctl, fake)
    assert [n for n in "abd" if started(fake, n)] == ["b"]
    set_job_status(fake, "b", active=1, ready=1)
    clock.advance(11)  # a's backoff is over: a and d wait
    run(ctl, fake)
    set_job_status(fake, "b", active=0, conditions=[{"type": "Complete", "status": "True"}])
    run(ctl, fake)
    assert [n for n in "ad" if started(fake, n)] == [next_admitted]
