"""Each reconciler against a recording in-memory client: what it writes, and what it does
when a write fails, was lost, or lands although the answer did not."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender.kube.api import resources as r
from extender.kube.api.client import ApiError, NotLeaderError, TransportError
from extender.kube.api.trim import workload_key
from extender.kube.controller.loop.controller import INLINE_CREATE_BATCH
from tests.fakes import Failure, FakeKube, controller_over, settle, unexpected, watch_event

V2 = "kueue.x-k8s.io/v1beta2"


def config(cpu: int = 4, preemption: dict | None = None) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": V2,
            "kind": "ResourceFlavor",
            "metadata": {"name": "spot"},
            "spec": {"nodeLabels": {"pool": "spot"}},
        },
        {
            "apiVersion": V2,
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "preemption": preemption or {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": cpu}]}
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": V2,
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": "default"},
            "spec": {"clusterQueue": "cq"},
        },
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 100,
        },
    ]


def job(name: str, cpu: str, *, suspend: bool = True, priority: str | None = None) -> dict:
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
    }
    if priority:
        pod["priorityClassName"] = priority
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "q"},
        },
        "spec": {"suspend": suspend, "parallelism": 1, "template": {"spec": pod}},
    }


def cluster(*jobs: dict, **kwargs: Any):
    fake = FakeKube()
    for obj in config(**kwargs):
        fake.add(obj)
    for obj in jobs:
        fake.add(obj)
    ctl, clock = controller_over(fake)
    return ctl, fake, clock


def wl_key(ctl, name: str) -> str:
    view = ctl.ctx.store.get(r.JOBS, f"default/{name}")
    return workload_key(view)


def started(fake: FakeKube, name: str) -> bool:
    return fake.current(r.JOBS, f"default/{name}")["spec"]["suspend"] is False


def play_watch(ctl, fake: FakeKube) -> None:
    """Deliver the current version of everything to the cache, as the watches would."""
    for plural, key in list(fake.objects):
        resource = {"jobs": r.JOBS, "workloads": r.WORKLOADS}.get(plural)
        if resource is not None:
            watch_event(ctl, fake, resource, key)


def run(ctl, fake, turns: int = 4) -> None:
    for _ in range(turns):
        settle(ctl, 1)
        play_watch(ctl, fake)
    assert unexpected(ctl) == 0


def set_job_status(fake: FakeKube, name: str, **status: Any) -> None:
    def change(obj: dict) -> None:
        obj.setdefault("status", {}).update(status)

    fake.change(r.JOBS, f"default/{name}", change)


# ----- Jobs ⇄ Workloads ----------------------------------------------------------------


def test_a_queued_job_gets_its_workload_then_is_admitted_and_started_in_one_patch():
    ctl, fake, _ = cluster(job("a", "3"))
    run(ctl, fake)
    key = wl_key(ctl, "a")
    workload = fake.current(r.WORKLOADS, key)
    owner = workload["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Job", "a", True)
    assert workload["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["name"] == "c"
    assert workload["status"]["admission"]["clusterQueue"] == "cq"
    assert started(fake, "a")
    job_patches = fake.writes("patch", "jobs")
    assert len(job_patches) == 1  # unsuspend and place in one write...
    body = job_patches[0].body
    assert body["metadata"]["resourceVersion"]  # ...conditional on the version decided on
    assert body["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "spot"}
    # Once its Workload exists, the cache no longer holds the Job's whole template.
    assert ctl.ctx.store.get(r.JOBS, "default/a").source is None


def test_higher_priority_jobs_get_their_workloads_first():
    ctl, fake, _ = cluster(
        *[job(f"low-{i}", "1") for i in range(12)], job("urgent", "1", priority="high")
    )
    ctl.turn()
    created = [a.body["metadata"]["ownerReferences"][0]["name"] for a in fake.writes("create")]
    assert created[0] == "urgent"
    assert len(created) == INLINE_CREATE_BATCH  # without the pool: a few per turn, then a cycle


def test_a_finished_job_finishes_its_workload_and_frees_its_quota():
    ctl, fake, _ = cluster(job("a", "3"), job("b", "3"))
    run(ctl, fake)
    assert started(fake, "a") != started(fake, "b")  # 3 + 3 > 4: one waits
    first = "a" if started(fake, "a") else "b"
    second = "b" if first == "a" else "a"

    def complete(obj: dict) -> None:
        obj["status"] = {"conditions": [{"type": "Complete", "status": "True", "message": "done"}]}

    fake.change(r.JOBS, f"default/{first}", complete)
    run(ctl, fake)
    finished = fake.current(r.WORKLOADS, wl_key(ctl, first))["status"]["conditions"]
    assert {"type": "Finished", "status": "True", "reason": "Succeeded"}.items() <= next(
        c for c in finished if c["type"] == "Finished"
    ).items()
    assert started(fake, second)


def test_a_queued_job_running_without_an_admission_is_suspended():
    ctl, fake, _ = cluster(job("escaped", "8", suspend=False))  # more than the quota
    run(ctl, fake)
    assert not started(fake, "escaped")
    assert ctl.ctx.state.admitted_count() == 0


def test_a_workload_whose_job_is_gone_is_deleted():
    ctl, fake, _ = cluster(job("a", "3"))
    run(ctl, fake)
    key = wl_key(ctl, "a")
    del fake.objects[("jobs", "default/a")]
    watch_event(ctl, fake, r.JOBS, "default/a")
    run(ctl, fake)
    assert fake.current(r.WORKLOADS, key) is None
    assert ctl.ctx.state.admitted_count() == 0


# ----- writes that fail ------------------------------------------------------------------


def admitted_keys(fake: FakeKube) -> set[str]:
    return {
        key
        for (plural, key), obj in fake.objects.items()
        if plural == "workloads" and (obj.get("status") or {}).get("admission")
    }


@pytest.mark.parametrize(
    "error",
    [
        ApiError(504, "Timeout", "the write may still be committed"),
        TransportError("connection-reset", "the answer was lost", sent=True),
    ],
    ids=["504", "connection reset"],
)
def test_an_admission_that_landed_but_whose_answer_was_lost_keeps_its_quota(error):
    ctl, fake, clock = cluster(job("a", "3"), job("b", "3"))
    settle(ctl, 1)  # Workloads created
    play_watch(ctl, fake)
    fake.fail_next(Failure("patch", "workloads", error, subresource="status", after=True))
    settle(ctl, 1)
    assert len(admitted_keys(fake)) == 1  # the write landed...
    assert ctl.ctx.state.admitted_count() == 1  # ...and its quota is still held here
    for _ in range(6):  # backoff passes, the watch is slow: the other never fits
        clock.advance(1.0)
        settle(ctl, 1)
    assert len(admitted_keys(fake)) == 1
    play_watch(ctl, fake)
    run(ctl, fake)
    assert len(admitted_keys(fake)) == 1
    assert sum(started(fake, n) for n in ("a", "b")) == 1


def test_an_admission_lost_before_it_landed_is_written_again_not_forgotten():
    ctl, fake, clock = cluster(job("a", "3"))
    settle(ctl, 1)
    play_watch(ctl, fake)
    error = ApiError(500, "InternalError", "etcd did not answer in time")
    fake.fail_next(Failure("patch", "workloads", error, subresource="status"))
    settle(ctl, 1)
    assert admitted_keys(fake) == set()
    assert ctl.ctx.state.admitted_count() == 1  # not known to have failed: quota held
    clock.advance(1.0)
    settle(ctl, 2)  # the same conditional write again
    assert len(admitted_keys(fake)) == 1
    assert started(fake, "a")


def test_a_refused_admission_is_undone_and_the_scheduler_backs_off():
    ctl, fake, clock = cluster(job("a", "3"), job("b", "1"))
    settle(ctl, 1)
    play_watch(ctl, fake)
    busy = ApiError(429, "TooManyRequests", "slow down", retry_after=2.0)
    fake.fail_next(Failure("patch", "workloads", busy, subresource="status"))
    settle(ctl, 1)
    assert admitted_keys(fake) == set()
    assert ctl.ctx.state.admitted_count() == 0  # certainly not written: both pending again
    clock.advance(1.0)
    settle(ctl, 1)
    assert admitted_keys(fake) == set()  # the server asked for 2 s
    clock.advance(1.5)
    run(ctl, fake)
    assert len(admitted_keys(fake)) == 2


def test_a_conflict_on_the_start_reads_the_job_again_and_starts_it():
    ctl, fake, _ = cluster(job("a", "3"))
    settle(ctl, 1)
    play_watch(ctl, fake)
    set_job_status(fake, "a", conditions=[{"type": "Suspended", "status": "True"}])  # unseen
    settle(ctl, 2)
    assert started(fake, "a")
    assert [a.verb for a in fake.actions if a.plural == "jobs"] == ["patch", "get", "patch"]


def test_a_lost_lease_stops_the_term_before_the_next_write():
    ctl, fake, _ = cluster(job("a", "3"))
    settle(ctl, 1)
    play_watch(ctl, fake)
    fake.fail_next(
        Failure("patch", "workloads", NotLeaderError("lease lost"), subresource="status")
    )
    with pytest.raises(NotLeaderError):
        settle(ctl, 1)
    assert admitted_keys(fake) == set()


# ----- eviction ---------------------------------------------------------------------------


def test_preemption_evicts_stops_the_job_then_requeues_it():
    ctl, fake, _ = cluster(job("low", "4"), preemption={"withinClusterQueue": "LowerPriority"})
    run(ctl, fake)
    assert started(fake, "low")
    set_job_status(fake, "low", active=1, startTime="2026-01-01T00:00:01Z")
    fake.add(job("high", "4", priority="high"))
    watch_event(ctl, fake, r.JOBS, "default/high")
    run(ctl, fake)
    low = fake.current(r.JOBS, "default/low")
    assert low["spec"]["suspend"] is True
    assert "startTime" not in low["status"]  # cleared, so the template may change
    assert "nodeSelector" not in low["spec"]["template"]["spec"]  # restored
    assert "tower.dev/cluster-queue" not in (low["metadata"].get("annotations") or {})
    assert fake.turned_true("Evicted") == [wl_key(ctl, "low")]
    assert not started(fake, "high")  # low's pods have not stopped yet
    set_job_status(fake, "low", active=0)
    run(ctl, fake)
    low_wl = fake.current(r.WORKLOADS, wl_key(ctl, "low"))
    assert low_wl["status"].get("admission") is None  # requeued
    assert started(fake, "high")


# ----- the webhook keeps a start suspended ------------------------------------------------


def test_a_start_the_webhook_keeps_suspended_is_told_once_and_not_retried_in_a_loop(caplog):
    ctl, fake, clock = cluster(job("a", "3"))
    ctl.ctx.username = "kubernetes-admin"
    original = fake.patch

    def guarded(resource, name, patch, namespace=None, **kwargs):
        answer = original(resource, name, patch, namespace, **kwargs)
        if resource is r.JOBS:  # the guard: only the controller's identity may unsuspend
            answer = fake.change(
                r.JOBS, f"{namespace}/{name}", lambda o: o["spec"].update(suspend=True)
            )
        return answer

    fake.patch = guarded  # type: ignore[method-assign]
    for _ in range(5):
        run(ctl, fake)
        clock.advance(1.0)
    starts = [a for a in fake.actions if a.plural == "jobs" and a.verb == "patch"]
    assert len(starts) == 1
    assert ctl.metrics.registry.get_sample_value("tower_job_start_refused_total") == 1
    errors = [rec.getMessage() for rec in caplog.records if rec.levelname == "ERROR"]
    assert errors == [
        "the admission webhook kept Job default/a suspended although its Workload is admitted: "
        "start the webhook with --controller-username kubernetes-admin (the identity this "
        "controller runs as); Tower tries again in 30s"
    ]
    # The Workload does not claim the Job runs: Kueue's PodsReady=False says why not.
    workload = fake.current(r.WORKLOADS, wl_key(ctl, "a"))
    pods_ready = next(c for c in workload["status"]["conditions"] if c["type"] == "PodsReady")
    assert (pods_ready["status"], pods_ready["reason"]) == ("False", "WaitForStart")
    assert "--controller-username kubernetes-admin" in pods_ready["message"]
    clock.advance(ctl.ctx.settings.start_refused_retry)
    run(ctl, fake)
    starts = [a for a in fake.actions if a.plural == "jobs" and a.verb == "patch"]
    assert len(starts) == 2  # tried again after the wait, quietly
    clock.advance(ctl.ctx.settings.start_refused_retry)
    run(ctl, fake)
    assert len([a for a in fake.actions if a.plural == "jobs" and a.verb == "patch"]) == 2
    assert ctl.metrics.registry.get_sample_value("tower_job_start_refused_total") == 2
    fake.patch = original  # type: ignore[method-assign]  # the webhook is fixed
    clock.advance(ctl.ctx.settings.start_refused_retry * 2)
    run(ctl, fake)
    assert started(fake, "a")
    workload = fake.current(r.WORKLOADS, wl_key(ctl, "a"))
    assert "PodsReady" not in {c["type"] for c in workload["status"]["conditions"]}


# ----- queue status ------------------------------------------------------------------------


def test_queue_status_is_written_when_it_changes_and_only_then():
    ctl, fake, clock = cluster(job("a", "3"))
    run(ctl, fake)
    cq_writes = fake.writes("patch", "clusterqueues")
    assert cq_writes
    status = fake.current(r.CLUSTER_QUEUES, "cq")["status"]
    assert status["admittedWorkloads"] == 1
    assert status["flavorsUsage"][0]["resources"][0]["total"] == "3"
    before = len(fake.writes("patch", "clusterqueues"))
    for _ in range(3):
        clock.advance(1.0)
        run(ctl, fake)
    assert len(fake.writes("patch", "clusterqueues")) == before  # nothing changed


def test_a_deleted_cluster_queue_leaves_no_metric_series_behind():
    ctl, fake, _ = cluster(job("a", "3"))
    run(ctl, fake)
    registry = ctl.metrics.registry
    labels = {"cluster_queue": "cq", "priority_class": "", "replica_role": "standalone"}
    assert registry.get_sample_value("kueue_admitted_workloads_total", labels)
    del fake.objects[("clusterqueues", "cq")]
    ctl.ctx.store.forget(r.CLUSTER_QUEUES, "cq")
    run(ctl, fake)
    names = {
        sample.name
        for family in registry.collect()
        for sample in family.samples
        if "cq" in sample.labels.values()
    }
    assert names == set()


def test_the_cache_keeps_jobs_small():
    """A Job with a large template is cached as a view without it once its Workload exists."""
    big = job("a", "1")
    big["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": f"V{i}", "value": "x" * 100} for i in range(50)
    ]
    ctl, fake, _ = cluster(copy.deepcopy(big))
    run(ctl, fake)
    view = ctl.ctx.store.get(r.JOBS, "default/a")
    assert view.source is None
    assert "containers" not in repr(view.templates)
