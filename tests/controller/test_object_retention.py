"""objectRetentionPolicies.workloads through the API double: a finished Workload is deleted once
afterFinished has passed (its Job stays); the Job of a Workload Tower deactivated is deleted
once afterDeactivatedByKueue has passed, and its Workload with it; a Workload deactivated by
hand, or with no policy, is kept. With the Configuration file's parse, as `--config` reads it."""

from __future__ import annotations

import time
from typing import Any

import pytest

from extender.core.admission.retention import WorkloadRetention
from extender.core.config.kueue_config import parse
from extender.core.config.schema import ConfigError
from extender.kube.api.objects import seconds_at
from extender.kube.api.resources import WORKLOADS
from tests.controller.conftest import eventually
from tests.controller.test_seed import CQ, FLAVOR, LQ

LIMIT = "kueue.x-k8s.io/max-exec-time-seconds"


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    status = (obj or {}).get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), {})


def events(cluster: Any, reason: str) -> list[tuple[str, str, str]]:
    return [
        (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["message"])
        for e in cluster.api.list("events", "default")
        if e.get("reason") == reason
    ]


def stays(check: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert check()
        time.sleep(0.1)


def test_a_finished_workload_is_deleted_after_its_retention_and_its_job_stays(
    cluster, start_controller
):
    cluster.apply(FLAVOR, CQ, LQ)
    start_controller(workload_retention=WorkloadRetention(after_finished=2.0))
    job = cluster.job("done", "1", duration="0.5s")
    wl = eventually(lambda: cluster.workload_of(job), what="the Workload")
    name = wl["metadata"]["name"]
    finished = eventually(
        lambda: (
            (w := cluster.get("workloads", name, "default"))
            and condition(w, "Finished").get("status") == "True"
            and w
        ),
        what="the Workload finished",
    )
    eventually(lambda: cluster.get("workloads", name, "default") is None, timeout=15,
               what="the finished Workload deleted")  # fmt: skip
    gone_at = time.time()
    kept_for = gone_at - seconds_at(condition(finished, "Finished")["lastTransitionTime"])
    assert 1.0 <= kept_for < 5, kept_for  # 2 s, at the API's whole-second precision
    assert cluster.get("jobs", "done", "default") is not None, "the Job is not deleted"
    eventually(lambda: events(cluster, "Deleted"), what="the Event")
    assert events(cluster, "Deleted") == [
        ("Workload", name, "Deleted finished workload due to elapsed retention")
    ]


def test_without_a_policy_a_finished_workload_stays(cluster, start_controller):
    cluster.apply(FLAVOR, CQ, LQ)
    start_controller()
    job = cluster.job("done", "1", duration="0.2s")
    wl = eventually(lambda: cluster.workload_of(job), what="the Workload")
    name = wl["metadata"]["name"]
    eventually(
        lambda: (
            condition(cluster.get("workloads", name, "default"), "Finished").get("status") == "True"
        ),
        what="the Workload finished",
    )
    stays(lambda: cluster.get("workloads", name, "default") is not None, 1.5)


def test_the_job_of_a_workload_tower_deactivated_is_deleted_after_its_retention(
    cluster, start_controller
):
    cluster.apply(FLAVOR, CQ, LQ)
    start_controller(workload_retention=WorkloadRetention(after_deactivated_by_kueue=1.0))
    job = cluster.job("short", "1", duration="600s", labels={LIMIT: "1"})
    wl = eventually(lambda: cluster.workload_of(job), what="the Workload")
    name = wl["metadata"]["name"]
    evicted = eventually(
        lambda: (
            (w := cluster.get("workloads", name, "default"))
            and condition(w, "Evicted").get("reason")
            == "DeactivatedDueToMaximumExecutionTimeExceeded"
            and condition(w, "Evicted")
        ),
        what="deactivated by its execution-time limit",
    )
    eventually(lambda: cluster.get("jobs", "short", "default") is None, timeout=15,
               what="the Job deleted")  # fmt: skip
    waited = time.time() - seconds_at(evicted["lastTransitionTime"])
    assert waited >= 0.5, waited
    eventually(lambda: cluster.get("workloads", name, "default") is None,
               what="its Workload deleted with it")  # fmt: skip
    eventually(lambda: events(cluster, "Deleted"), what="the Event")
    assert events(cluster, "Deleted") == [
        ("Job", "short", "Deleted job: deactivation retention period expired")
    ]


def test_a_workload_deactivated_by_hand_and_its_job_are_kept(cluster, start_controller):
    cluster.apply(FLAVOR, CQ, LQ)
    start_controller(
        workload_retention=WorkloadRetention(after_finished=0.0, after_deactivated_by_kueue=0.0)
    )
    job = cluster.job("held", "1", duration="600s")
    wl = eventually(lambda: cluster.workload_of(job), what="the Workload")
    name = wl["metadata"]["name"]
    eventually(
        lambda: (
            condition(cluster.get("workloads", name, "default"), "Admitted").get("status") == "True"
        ),
        what="admitted",
    )
    cluster.admin.patch(WORKLOADS, name, {"spec": {"active": False}}, "default")
    eventually(
        lambda: (
            condition(cluster.get("workloads", name, "default"), "Evicted").get("reason")
            == "Deactivated"
        ),
        what="evicted as deactivated by hand",
    )
    stays(
        lambda: (
            cluster.get("workloads", name, "default") is not None
            and cluster.get("jobs", "held", "default") is not None
        ),
        1.5,
    )
    assert events(cluster, "Deleted") == []


@pytest.mark.parametrize(
    ("section", "want"),
    [
        (None, WorkloadRetention()),
        ({"workloads": {}}, WorkloadRetention()),
        ({"workloads": {"afterFinished": "1h30m"}}, WorkloadRetention(after_finished=5400.0)),
        (
            {"workloads": {"afterFinished": "0s", "afterDeactivatedByKueue": "10m"}},
            WorkloadRetention(after_finished=0.0, after_deactivated_by_kueue=600.0),
        ),
    ],
    ids=["no section: nothing deleted", "no durations", "afterFinished", "both, 0 is at once"],
)
def test_the_configuration_gives_the_policy(section, want):
    doc: dict[str, Any] = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
    if section is not None:
        doc["objectRetentionPolicies"] = section
    config = parse(doc)
    assert config.workload_retention == want
    assert not [w for w in config.warnings("f") if "objectRetentionPolicies" in w]


def test_a_negative_retention_is_refused_naming_the_field():
    doc = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "objectRetentionPolicies": {"workloads": {"afterDeactivatedByKueue": "-1m"}},
    }
    with pytest.raises(ConfigError, match=r"^objectRetentionPolicies\.workloads\."):
        parse(doc)
