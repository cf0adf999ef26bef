"""Reclaimable pods (Kueue's ReclaimablePods, Beta, on): a running Job's finished pods give their
quota back through its Workload's status.reclaimablePods, and a waiting Workload is admitted
into it. On the API double with the real webhook; the Job's pods are played by its status, as
kube-controller-manager writes it (succeeded, active).

A ClusterQueue of 2 cpu is full with a Job of 1-cpu pods (parallelism 2, completions 4); a
1-cpu Job waits. Two pods succeed: the two completions left still fill both slots, so nothing
is reclaimed (Kueue's rule) and the second Job still waits. A third succeeds: one pod is left
to run, one is reclaimable, and the waiting Job is admitted into its cpu. The first Job runs on
all along (a finishing job is no resized job).
"""

from __future__ import annotations

import time
from typing import Any

from extender.kube.api import resources as r
from tests.controller.conftest import eventually
from tests.controller.test_kubeflow import condition
from tests.controller.test_pod_groups import group_pods, workload
from tests.controller.test_pods import kubelet, setup, ungated
from tests.controller.test_preemption import cluster_queue, flavor, local_queue


def job(name: str, parallelism: int, completions: int) -> dict[str, Any]:
    pod = {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
    }
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {"parallelism": parallelism, "completions": completions,
                 "template": {"spec": pod}},
    }  # fmt: skip


def pods_done(cluster: Any, name: str, succeeded: int, active: int) -> None:
    def change(status: dict[str, Any]) -> None:
        status["succeeded"], status["active"] = succeeded, active

    cluster.api.update_status("jobs", "default", name, change)


def started(cluster: Any, name: str) -> bool:
    return cluster.get("jobs", name, "default")["spec"].get("suspend") is False


def waits(cluster: Any, created: dict[str, Any]) -> bool:
    wl = cluster.workload_of(created)
    return wl is not None and condition(wl, "QuotaReserved").get("status") == "False"


def stays(check: Any, seconds: float = 1.0) -> None:
    """`check()` holds for `seconds` (the controller had the time to act, and did not)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert check()
        time.sleep(0.05)


def full_queue(cluster: Any, start_controller: Any, **settings: Any) -> tuple[Any, Any]:
    cluster.apply(flavor("pool-a"), cluster_queue("cq", 2), local_queue("user-queue", "cq"))
    start_controller(**settings)
    first = cluster.admin.create(r.JOBS, job("first", 2, 4), "default")
    eventually(lambda: started(cluster, "first"), what="the first Job admitted")
    second = cluster.admin.create(r.JOBS, job("second", 1, 1), "default")
    eventually(lambda: waits(cluster, second), what="the second Job waiting for quota")
    return first, second


def test_finished_pods_give_their_quota_to_a_waiting_job(cluster, start_controller):
    first, second = full_queue(cluster, start_controller)
    admitted = cluster.workload_of(first)

    pods_done(cluster, "first", succeeded=2, active=2)
    # Two completions remain for two slots: nothing reclaimable yet, and nothing admitted.
    stays(
        lambda: (
            "reclaimablePods" not in cluster.workload_of(first)["status"] and waits(cluster, second)
        )
    )

    pods_done(cluster, "first", succeeded=3, active=1)
    wl = eventually(
        lambda: (w := cluster.workload_of(first)) and w["status"].get("reclaimablePods") and w,
        what="status.reclaimablePods written",
    )
    assert wl["status"]["reclaimablePods"] == [{"name": "main", "count": 1}]
    eventually(
        lambda: started(cluster, "second"), what="the second Job admitted into the freed cpu"
    )
    second_wl = cluster.workload_of(second)
    assert condition(second_wl, "Admitted").get("status") == "True"

    # The first Job ran on, under the Workload it was admitted with.
    assert started(cluster, "first")
    assert cluster.workload_of(first)["metadata"]["uid"] == admitted["metadata"]["uid"]
    assert condition(cluster.workload_of(first), "Admitted").get("status") == "True"
    eventually(
        lambda: cluster.get("clusterqueues", "cq")["status"].get("admittedWorkloads") == 2,
        what="both Jobs admitted in the ClusterQueue's status",
    )
    assert cpu_used(cluster) == "2"  # 1 of the first Job's, 1 of the second's


def cpu_used(cluster: Any, cq: str = "cq") -> str | None:
    usage = cluster.get("clusterqueues", cq)["status"]["flavorsUsage"][0]["resources"]
    return next((u["total"] for u in usage if u["name"] == "cpu"), None)


def test_with_the_gate_off_nothing_is_reclaimed(cluster, start_controller):
    first, second = full_queue(cluster, start_controller, feature_gates={"ReclaimablePods": False})
    pods_done(cluster, "first", succeeded=3, active=1)
    stays(
        lambda: (
            "reclaimablePods" not in cluster.workload_of(first)["status"] and waits(cluster, second)
        )
    )
    assert cpu_used(cluster) == "2"


def test_a_pod_groups_succeeded_pods_give_their_quota_back(cluster, start_controller):
    """Kueue's pod-group example (two pods of 3 cpu, one role) in its 9-cpu ClusterQueue: one
    pod succeeds while the other runs, and the group holds one pod's cpu from then on."""
    setup(cluster)
    start_controller()
    pods = [cluster.admin.create(r.PODS, p, "default") for p in group_pods()]
    for each in pods:
        eventually(lambda p=each: ungated(cluster, p), what="each member let through")
    made = workload(cluster, "sample-group")
    [role] = made["spec"]["podSets"]
    for each in pods:
        kubelet(cluster, each, "Running")
    kubelet(cluster, pods[0], "Succeeded")
    wl = eventually(
        lambda: (
            (w := workload(cluster, "sample-group"))
            and (w.get("status") or {}).get("reclaimablePods")
            and w
        ),
        what="status.reclaimablePods written",
    )
    assert wl["status"]["reclaimablePods"] == [{"name": role["name"], "count": 1}]
    eventually(
        lambda: cpu_used(cluster, "cluster-queue") == "3",
        what="the ClusterQueue's cpu usage down to the running pod's",
    )
