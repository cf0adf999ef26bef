"""Forecasts: where each duration comes from, and start times a known state implies."""

import math

import pytest

from extender.core.api.models import Admission, PodSetAssignment
from extender.sim.forecast import UNKNOWN, Duration, duration_of, forecast, runtimes
from tests.builders import CQ, state_with


def job(deadline=None, expected=None):
    annotations = {"tower.dev/expected-duration": expected} if expected else {}
    spec = {"activeDeadlineSeconds": deadline} if deadline else {}
    return {"metadata": {"annotations": annotations}, "spec": spec}


HISTORY = {"default/lq": [60.0, 100.0, 300.0]}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (job(deadline=600, expected="2m"), Duration(600.0, "activeDeadlineSeconds", True)),
        (job(expected="2m"), Duration(120.0, "tower.dev/expected-duration")),
        (job(expected="soon"), Duration(100.0, "median of 3 finished in LocalQueue default/lq")),
        (job(), Duration(100.0, "median of 3 finished in LocalQueue default/lq")),
        (None, Duration(100.0, "median of 3 finished in LocalQueue default/lq")),
    ],
    ids=["deadline-first", "annotation", "bad-annotation", "history", "no-job"],
)
def test_where_a_duration_comes_from(obj, expected):
    assert duration_of(obj, "default/lq", HISTORY) == expected


def test_without_anything_the_duration_is_unknown():
    assert duration_of(job(), "default/other", HISTORY) == UNKNOWN


def finished(name, admitted, done, queue="lq"):
    def condition(kind, when):
        return {"type": kind, "status": "True", "lastTransitionTime": when}

    return {
        "metadata": {"namespace": "default", "name": name},
        "spec": {"queueName": queue},
        "status": {"conditions": [condition("Admitted", admitted), condition("Finished", done)]},
    }


def test_runtimes_are_admitted_to_finished_by_local_queue():
    history = runtimes(
        [
            finished("a", "2026-11-30T10:00:00Z", "2026-11-30T10:01:00Z"),
            finished("b", "2026-11-30T09:00:00Z", "2026-11-30T09:05:00Z"),
            finished("c", "2026-11-30T10:00:00Z", "2026-11-30T10:00:30Z", queue="other"),
            {"metadata": {"namespace": "default", "name": "never"}, "spec": {"queueName": "lq"}},
        ]
    )
    assert history == {"default/lq": [300.0, 60.0], "default/other": [30.0]}


def workload(name, created, cpu="3"):
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"namespace": "default", "name": name, "uid": f"uid-{name}",
                     "creationTimestamp": created},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}]},
    }  # fmt: skip


def test_a_known_state_gives_known_start_times():
    state = state_with(CQ("cq").group(("default", {"cpu": "4"})).obj())
    now = 1_000_000.0
    running = workload("running", "2026-11-30T09:00:00Z")
    admission = Admission("cq", (PodSetAssignment("main", {"cpu": "default"}, {"cpu": 3000}, 1),))
    estimates = forecast(
        state,
        [(running, admission, 40.0, Duration(100.0, "activeDeadlineSeconds", True))],
        [
            (workload("b", "2026-11-30T09:01:00Z"), Duration(50.0, "tower.dev/expected-duration")),
            (workload("c", "2026-11-30T09:02:00Z"), UNKNOWN),
            (workload("d", "2026-11-30T09:03:00Z"), Duration(10.0, "x")),
        ],
        now,
    )
    assert estimates["default/b"].start == now + 60  # the running one has 60 s left
    assert estimates["default/b"].at_latest is True
    assert estimates["default/c"].start == now + 110  # then b's 50 s
    assert estimates["default/c"].basis == ("activeDeadlineSeconds", "tower.dev/expected-duration")
    assert estimates["default/d"].start is None  # behind c, whose duration nobody knows
    assert math.isinf(UNKNOWN.seconds)
