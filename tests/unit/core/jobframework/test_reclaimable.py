"""Reclaimable pods read from a job's status, per kind, and the quota an admission holds after
them: tables after Kueue's job_controller_test.go, jobset_controller_test.go and
workload_test.go (TestNewInfo's reclaimable rows)."""

from __future__ import annotations

from typing import Any

import pytest

from extender.core.api.models import Admission, PodSet, PodSetAssignment
from extender.core.jobframework import reclaimable
from extender.core.jobframework.groups import Member


def job(
    parallelism: int | None,
    completions: int | None,
    succeeded: int = 0,
    *,
    indexed: str | None = None,
    failed: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    status: dict[str, Any] = {"succeeded": succeeded}
    if indexed is not None or failed is not None:
        spec["completionMode"] = "Indexed"
        status["completedIndexes"] = indexed or ""
        if failed is not None:
            status["failedIndexes"] = failed
    return {"spec": spec, "status": status}


@pytest.mark.parametrize(
    ("obj", "want"),
    [
        (job(1, 4, succeeded=3), ()),
        (job(2, 4, succeeded=0), ()),
        (job(2, 4, succeeded=2), ()),
        (job(2, 4, succeeded=3), (("main", 1),)),
        (job(2, 4, succeeded=4), (("main", 2),)),
        (job(3, None, succeeded=1), (("main", 1),)),
        (job(5, 10, succeeded=7), (("main", 2),)),
        (job(None, None, succeeded=1), ()),
        (job(2, 4, succeeded=3, indexed="0,2"), ()),
        (job(2, 4, indexed="0-2"), (("main", 1),)),
        (job(2, 4, indexed="0-1", failed="1-2"), (("main", 1),)),
        (job(2, 4, indexed="3-1,x,0"), ()),
        (job(3, 4, indexed="0-9"), (("main", 3),)),
    ],
    ids=[
        "a single-pod Job reclaims nothing",
        "nothing done yet",
        "the completions left still fill every slot",
        "one completion left of two slots: one pod reclaimable",
        "every completion done: the whole parallelism",
        "completions unset: they follow parallelism",
        "three left of five slots: two reclaimable",
        "parallelism unset: one pod, nothing reclaimable",
        "an Indexed Job counts its indexes, not status.succeeded",
        "an Indexed Job: indexes 0-2 done",
        "an Indexed Job: failed and completed indexes counted once",
        "an Indexed Job: a descending or malformed interval is skipped",
        "an Indexed Job: indexes past its completions are not counted",
    ],
)
def test_a_jobs_reclaimable_pods(obj, want):
    assert reclaimable.batch_job(obj) == want
    assert reclaimable.of_job("batch/job", obj) == want


def jobset(*statuses: tuple[str, int]) -> dict[str, Any]:
    def rjob(name: str, replicas: int, parallelism: int, completions: int) -> dict[str, Any]:
        spec = {"parallelism": parallelism, "completions": completions}
        return {"name": name, "replicas": replicas, "template": {"spec": spec}}

    return {
        "spec": {"replicatedJobs": [rjob("Driver", 1, 1, 1), rjob("workers", 3, 2, 2)]},
        "status": {"replicatedJobsStatus": [{"name": n, "succeeded": s} for n, s in statuses]},
    }


@pytest.mark.parametrize(
    ("obj", "want"),
    [
        (jobset(), ()),
        (jobset(("Driver", 0), ("workers", 0)), ()),
        (jobset(("workers", 2)), (("workers", 4),)),
        (jobset(("Driver", 1), ("workers", 3)), (("driver", 1), ("workers", 6))),
        (jobset(("workers", 4)), ()),
    ],
    ids=[
        "no status yet",
        "nothing succeeded",
        "two of three worker Jobs succeeded: their pods, named in lower case",
        "every replicated job succeeded",
        "more succeeded than replicas: a status Kueue does not trust",
    ],
)
def test_a_jobsets_reclaimable_pods(obj, want):
    assert reclaimable.of_job("jobset.x-k8s.io/jobset", obj) == want


def test_a_kind_without_reclaimable_pods_says_none():
    assert reclaimable.of_job("ray.io/raycluster", {"status": {}}) is None


def test_counts_are_capped_at_the_pod_sets_and_compared_as_kueue_does():
    assert reclaimable.limited((("main", 5), ("other", 2)), {"main": 3}) == (
        ("main", 3),
        ("other", 2),
    )
    written = reclaimable.from_status(
        {"status": {"reclaimablePods": [{"name": "main", "count": 1}, {"name": 3}]}}
    )
    assert written == {"main": 1}
    assert reclaimable.same((("main", 1),), written)
    assert not reclaimable.same((("main", 2),), written)
    assert not reclaimable.same((), written)
    assert reclaimable.status_value(()) is None
    assert reclaimable.status_value((("main", 1),)) == [{"name": "main", "count": 1}]


def admission(count: int, cpu: int) -> Admission:
    return Admission("cq", (PodSetAssignment("main", {"cpu": "default"}, {"cpu": cpu}, count),))


@pytest.mark.parametrize(
    ("held", "counts", "reclaim", "want_count", "want_cpu"),
    [
        (admission(4, 4000), {"main": 4}, {}, 4, 4000),
        (admission(4, 4000), {"main": 4}, {"main": 1}, 3, 3000),
        (admission(4, 4000), {"main": 4}, {"main": 9}, 0, 0),
        (admission(2, 2000), {"main": 4}, {"main": 1}, 2, 2000),
        (admission(2, 2000), {"main": 4}, {"main": 3}, 1, 1000),
    ],
    ids=[
        "nothing reclaimable: the admission as written",
        "one pod of four reclaimable: three pods' cpu",
        "more reclaimable than pods: none held, never below",
        "partially admitted at 2 of 4, one reclaimable: still 2 left to run",
        "partially admitted at 2 of 4, three reclaimable: one pod's cpu",
    ],
)
def test_an_admission_holds_quota_for_the_pods_that_remain(
    held, counts, reclaim, want_count, want_cpu
):
    after = reclaimable.admission_after(held, counts, reclaim)
    assert after.pod_set_assignments[0].count == want_count
    assert reclaimable.usage_after(held, counts, reclaim) == {("default", "cpu"): want_cpu}


def test_a_waiting_workload_asks_for_the_pods_that_remain():
    sets = (PodSet("main", 4, {"cpu": 1000}, min_count=3), PodSet("other", 1, {"cpu": 500}))
    after = reclaimable.pod_sets_after(sets, {"main": 2, "nothing": 1})
    assert [(p.name, p.count, p.min_count) for p in after] == [
        ("main", 2, 2),
        ("other", 1, None),
    ]
    assert after[0].total() == {"cpu": 2000}


def member(role: str, phase: str) -> Member:
    return Member(name=f"{role}-{phase}", uid="", role=role, gated=False, phase=phase,
                  running=phase == "", holds=True)  # fmt: skip


def test_a_pod_groups_succeeded_pods_by_role_unless_it_serves():
    members = [member("a", "Succeeded"), member("b", ""), member("a", "Succeeded"),
               member("b", "Failed"), member("b", "Succeeded")]  # fmt: skip
    assert reclaimable.pod_group(members, serving=False) == (("a", 2), ("b", 1))
    assert reclaimable.pod_group(members, serving=True) == ()
