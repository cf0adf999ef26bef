"""A finished Workload through the API double, as Kueue's finish.Finish leaves it: Finished=True
added, QuotaReserved and Admitted kept True with the admission, and the quota free all the same:
for the next job now, and for a controller that starts later."""

from __future__ import annotations

from typing import Any

from tests.controller.conftest import eventually
from tests.controller.test_seed import CQ, FLAVOR, LQ


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    status = (obj or {}).get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), {})


def finished(cluster: Any, job: dict[str, Any]) -> dict[str, Any]:
    return eventually(
        lambda: (
            (wl := cluster.workload_of(job))
            and condition(wl, "Finished").get("status") == "True"
            and wl
        ),
        timeout=15,
        what=f"the Workload of {job['metadata']['name']} finished",
    )


def unsuspended(cluster: Any, name: str) -> bool:
    return cluster.get("jobs", name, "default")["spec"]["suspend"] is False


def test_a_finished_workload_keeps_its_reservation_and_admission_and_frees_the_quota(
    cluster, start_controller
):
    cluster.apply(FLAVOR, CQ, LQ)
    start_controller()
    done = cluster.job("done", "4", duration="0.3s")  # the whole 4-cpu ClusterQueue
    wl = finished(cluster, done)
    assert condition(wl, "QuotaReserved").get("status") == "True", wl["status"]
    assert condition(wl, "QuotaReserved").get("reason") == "QuotaReserved", wl["status"]
    assert condition(wl, "Admitted").get("status") == "True", wl["status"]
    assert wl["status"]["admission"]["clusterQueue"] == CQ["metadata"]["name"], wl["status"]
    cluster.job("next", "4", duration="600s")
    eventually(lambda: unsuspended(cluster, "next"), what="the next job admitted in the room")


def test_a_controller_started_after_a_finish_counts_no_quota_for_it(cluster, start_controller):
    cluster.apply(FLAVOR, CQ, LQ)
    first = start_controller()
    done = cluster.job("done", "4", duration="0.3s")
    finished(cluster, done)
    first.halt()
    start_controller()
    cluster.job("next", "4", duration="600s")
    eventually(lambda: unsuspended(cluster, "next"), what="the next job admitted in the room")
    status = eventually(
        lambda: (
            (cq := cluster.get("clusterqueues", CQ["metadata"]["name"]))
            and (cq.get("status") or {}).get("admittedWorkloads") == 1
            and cq["status"]
        ),
        what="the ClusterQueue counting one admitted Workload",
    )
    used = {r["name"]: r["total"] for f in status["flavorsUsage"] for r in f["resources"]}
    assert used["cpu"] == "4", status["flavorsUsage"]
