"""A pod another controller suspends (`kueue.x-k8s.io/pod-suspending-parent` naming a kind
Tower does not queue) joins a plain group by its labels, as Kueue's e2e pod_test.go "Pod
should be admitted after the group labels are added" has it: created gated and unlabelled,
then given the group's and the queue's labels, it is the group's Workload and let through."""

from __future__ import annotations

from extender.kube.api import resources as r
from tests.controller.conftest import eventually
from tests.controller.test_pods import GATE, setup, ungated


def test_a_pod_suspended_by_another_controller_runs_in_its_group(cluster, start_controller):
    setup(cluster)
    start_controller()
    pod = cluster.admin.create(r.PODS, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "pod-0", "labels": {"app-role": "worker"},
                     "annotations": {"kueue.x-k8s.io/pod-suspending-parent": "OtherController"}},
        "spec": {"restartPolicy": "Never", "schedulingGates": [GATE],
                 "containers": [{"name": "c", "image": "busybox",
                                 "resources": {"requests": {"cpu": "1"}}}]},
    }, "default")  # fmt: skip
    pod["metadata"]["labels"].update({
        "kueue.x-k8s.io/pod-group-name": "test-group",
        "kueue.x-k8s.io/queue-name": "user-queue",
        "kueue.x-k8s.io/managed": "true",
    })  # fmt: skip
    pod["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = "1"
    cluster.admin.update(r.PODS, pod)
    made = eventually(
        lambda: cluster.get("workloads", "test-group", "default"), what="the Workload"
    )
    assert made["spec"]["queueName"] == "user-queue"
    let_through = eventually(lambda: ungated(cluster, pod), what="pod-0 ungated")
    assert let_through["metadata"]["labels"]["kueue.x-k8s.io/local-queue-name"] == "user-queue"
