"""A LeaderWorkerSet's group Workloads follow the set as Kueue v0.19.2's reconciler has them
(leaderworkerset_reconciler.go): its new queue name and WorkloadPriorityClass label reach each
group's Workload, and a rolling update with maxSurge has a Workload for each surge group while
it lasts (the LWS controller's status.replicas counts them), gone once it is done."""

from __future__ import annotations

from typing import Any

from tests.controller.conftest import eventually
from tests.controller.test_kubeflow import condition, load
from tests.controller.test_pod_groups import LWS, LWS_NAME, lws_crd, lws_workloads, workload
from tests.controller.test_pods import EXAMPLES, preemption_setup

__all__ = ["lws_crd"]  # the fixture, used by name

QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"


def sample(replicas: int = 1, **labels: str) -> dict[str, Any]:
    [lws] = load(EXAMPLES / "serving" / "sample-leaderworkerset.yaml")
    lws["spec"]["replicas"] = replicas
    lws["metadata"]["labels"].update(labels)
    return lws


def test_a_new_queue_name_reaches_each_groups_workload(cluster, start_controller, lws_crd):
    preemption_setup(cluster)
    start_controller()
    created = cluster.admin.create(LWS, sample(2, **{QUEUE: "nowhere"}), "default")
    names = lws_workloads(cluster, created["metadata"]["uid"], 2)
    for name in names:
        made = eventually(lambda n=name: workload(cluster, n), what="each group's Workload")
        assert made["spec"]["queueName"] == "nowhere"
    # No group is ready (no pod runs): Kueue's webhook lets the queue change.
    cluster.admin.patch(LWS, LWS_NAME, {"metadata": {"labels": {QUEUE: "user-queue"}}}, "default")
    for name in names:
        eventually(
            lambda n=name: condition(workload(cluster, n), "Admitted").get("status") == "True",
            what="each group admitted in its new queue",
        )
        assert workload(cluster, name)["spec"]["queueName"] == "user-queue"


def test_a_new_priority_class_reaches_each_groups_workload(cluster, start_controller, lws_crd):
    preemption_setup(cluster)
    start_controller()
    created = cluster.admin.create(LWS, sample(1, **{PRIORITY: "low"}), "default")
    [name] = lws_workloads(cluster, created["metadata"]["uid"], 1)
    made = eventually(lambda: workload(cluster, name), what="the group's Workload")
    assert (made["spec"]["priorityClassRef"]["name"], made["spec"]["priority"]) == ("low", 10)
    cluster.admin.patch(LWS, LWS_NAME, {"metadata": {"labels": {PRIORITY: "high"}}}, "default")

    def followed() -> bool:
        spec = workload(cluster, name)["spec"]
        return (spec["priorityClassRef"]["name"], spec["priority"]) == ("high", 100)

    eventually(followed, what="the Workload's priority class")


def test_a_rollout_with_surge_has_a_workload_per_surge_group(cluster, start_controller, lws_crd):
    preemption_setup(cluster)
    start_controller()
    body = sample(2)
    body["spec"]["rolloutStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 1},
    }
    created = cluster.admin.create(LWS, body, "default")
    uid = created["metadata"]["uid"]
    first, second, surge = lws_workloads(cluster, uid, 3)
    eventually(lambda: workload(cluster, second), what="the groups' Workloads")

    def status(replicas: int, updated: int) -> None:
        def change(written: dict[str, Any]) -> None:
            written.update(replicas=replicas, updatedReplicas=updated, readyReplicas=2)

        cluster.api.update_status("leaderworkersets", "default", LWS_NAME, change)

    status(3, 0)  # the LWS controller runs a surge group while it updates the others
    eventually(lambda: workload(cluster, surge), what="the surge group's Workload")
    assert workload(cluster, first) is not None
    status(3, 2)  # every group updated: the surge group goes
    eventually(lambda: workload(cluster, surge) is None, what="the surge group's Workload gone")
    assert workload(cluster, first) is not None
    assert workload(cluster, second) is not None


def test_a_set_scaled_to_zero_has_no_group_workload_left(cluster, start_controller, lws_crd):
    """Kueue's filterWorkloads at replicas 0: every group's Workload is deleted."""
    preemption_setup(cluster)
    start_controller()
    created = cluster.admin.create(LWS, sample(2), "default")
    names = lws_workloads(cluster, created["metadata"]["uid"], 2)
    for name in names:
        eventually(lambda n=name: workload(cluster, n), what="each group's Workload")
    cluster.admin.patch(LWS, LWS_NAME, {"spec": {"replicas": 0}}, "default")
    eventually(
        lambda: all(workload(cluster, n) is None for n in names), what="the group Workloads gone"
    )
    # The set still follows: scaled up again, its first group is made anew.
    cluster.admin.patch(LWS, LWS_NAME, {"spec": {"replicas": 1}}, "default")
    eventually(lambda: workload(cluster, names[0]), what="the first group's Workload again")
