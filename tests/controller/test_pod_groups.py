"""Kueue's pod-group example and its sample StatefulSet through the API double, the real webhook
and the controller: a group is one Workload, made once all its members exist, admitted whole
and let through together; it ends when all its pods succeeded; evicted, its running pods are
deleted and its quota held until they stop. A StatefulSet is one Workload of all its replicas,
made up front; its pods, gated, are let through under it, replacements included; it scales only
to zero (its Workload held, its quota given back) and back; its queue name is followed. No kubelet nor StatefulSet controller runs here: the test makes the pods
and sets the status they would."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from extender.core.jobframework.adapter import workload_name
from extender.kube.api import resources as r
from extender.kube.api.client import ApiError
from tests import yamlc
from tests.controller.conftest import eventually
from tests.controller.test_kubectl_tower import tower
from tests.controller.test_kubeflow import condition, load
from tests.controller.test_pods import (
    EXAMPLES,
    FINALIZER,
    GATE,
    kubelet,
    preemption_setup,
    setup,
    ungated,
)

POD_SUSPENDING = "kueue.x-k8s.io/pod-suspending-parent"
STATEFULSETS = r.Resource("apps", "v1", "statefulsets", "StatefulSet", True)


def group_pods() -> list[dict[str, Any]]:
    return load(EXAMPLES / "pods" / "kueue-pod-group.yaml")


def workload(cluster: Any, name: str) -> dict[str, Any] | None:
    return cluster.get("workloads", name, "default")


def events(cluster: Any, reason: str) -> list[str]:
    return [
        e.get("message", "")
        for e in cluster.api.list("events", "default")
        if e.get("reason") == reason
    ]


def test_kueues_pod_group_waits_for_its_members_then_runs_whole_and_finishes(
    cluster, start_controller
):
    setup(cluster)
    start_controller()
    leader, worker = group_pods()
    first = cluster.admin.create(r.PODS, leader, "default")
    assert GATE in first["spec"]["schedulingGates"]
    assert FINALIZER in first["metadata"]["finalizers"]
    # One member of two: no Workload yet, and the pod says why.
    said = eventually(lambda: events(cluster, "ErrWorkloadCompose"), what="the reason")
    assert "has 1 of its 2 pods" in said[0], said
    assert workload(cluster, "sample-group") is None
    second = cluster.admin.create(r.PODS, worker, "default")
    made = eventually(lambda: workload(cluster, "sample-group"), what="the group's Workload")
    assert made["metadata"]["annotations"]["kueue.x-k8s.io/is-group-workload"] == "true"
    [role] = made["spec"]["podSets"]  # both pods ask for 3 cpu: one role
    assert role["count"] == 2
    assert role["name"] == first["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"]
    owners = {o["name"] for o in made["metadata"]["ownerReferences"]}
    assert owners == {first["metadata"]["name"], second["metadata"]["name"]}
    # Admitted whole: both let through, each on the flavor's nodes.
    for each in (first, second):
        running = eventually(lambda p=each: ungated(cluster, p), what="each member ungated")
        assert running["spec"]["nodeSelector"] == {"instance-type": "spot"}
        assert running["metadata"]["labels"]["kueue.x-k8s.io/podset"] == role["name"]
    said = tower(cluster, "why", f"pod/{second['metadata']['name']}", "-n", "default", "-o", "json")
    assert said.returncode == 0, said.stderr
    answer = json.loads(said.stdout)
    assert (answer["state"], answer["workload"]) == ("Admitted", "sample-group")
    # One succeeds: the group runs on. Both: the Workload is Finished, the finalizers go.
    kubelet(cluster, first, "Running")
    kubelet(cluster, second, "Running")
    kubelet(cluster, first, "Succeeded")
    assert condition(workload(cluster, "sample-group"), "Finished").get("status") != "True"
    kubelet(cluster, second, "Succeeded")
    done = eventually(
        lambda: (
            condition(workload(cluster, "sample-group"), "Finished").get("status") == "True"
            and workload(cluster, "sample-group")
        ),
        what="the group finished",
    )
    assert condition(done, "Finished")["message"] == "Pods succeeded: 2/2."
    for each in (first, second):
        eventually(
            lambda p=each: (
                FINALIZER
                not in (
                    cluster.get("pods", p["metadata"]["name"], "default")["metadata"].get(
                        "finalizers"
                    )
                    or []
                )
            ),
            what="the finalizer off",
        )


def test_a_group_that_does_not_fit_waits_whole_and_says_why(cluster, start_controller):
    setup(cluster)
    start_controller()
    members = []
    for pod in group_pods():
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = 5  # 10 of 9 cpu
        members.append(cluster.admin.create(r.PODS, pod, "default"))
    message = eventually(
        lambda: condition(workload(cluster, "sample-group"), "QuotaReserved").get("message"),
        what="its reason",
    )
    assert "needs 10 cpu" in message, message
    for each in members:
        assert (
            GATE
            in cluster.get("pods", each["metadata"]["name"], "default")["spec"]["schedulingGates"]
        )


def test_a_group_of_two_shapes_is_two_pod_sets_and_a_third_member_is_excess(
    cluster, start_controller
):
    setup(cluster)
    start_controller()
    leader, worker = group_pods()
    leader["spec"]["containers"][0]["resources"]["requests"]["cpu"] = 1
    made = [cluster.admin.create(r.PODS, p, "default") for p in (leader, worker)]
    wl = eventually(lambda: workload(cluster, "sample-group"), what="the Workload")
    roles = {p["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] for p in made}
    assert sorted(ps["name"] for ps in wl["spec"]["podSets"]) == sorted(roles)
    assert [ps["count"] for ps in wl["spec"]["podSets"]] == [1, 1]
    for each in made:
        eventually(lambda p=each: ungated(cluster, p), what="each member ungated")
    extra = copy.deepcopy(worker)
    extra["metadata"]["generateName"] = "sample-extra-"
    third = cluster.admin.create(r.PODS, extra, "default")
    eventually(
        lambda: (
            cluster.get("pods", third["metadata"]["name"], "default") is None
            or cluster.get("pods", third["metadata"]["name"], "default")["metadata"].get(
                "deletionTimestamp"
            )
        ),
        what="the excess pod deleted",
    )
    assert any("Excess pod deleted" in m for m in events(cluster, "ExcessPodDeleted"))


def test_a_failed_member_is_replaced_under_the_same_admission(cluster, start_controller):
    setup(cluster)
    start_controller()
    made = [cluster.admin.create(r.PODS, p, "default") for p in group_pods()]
    for each in made:
        eventually(lambda p=each: ungated(cluster, p), what="each member ungated")
        kubelet(cluster, each, "Running")
    kubelet(cluster, made[1], "Failed")
    waiting = eventually(
        lambda: (
            condition(workload(cluster, "sample-group"), "WaitingForReplacementPods").get("status")
            == "True"
            and condition(workload(cluster, "sample-group"), "WaitingForReplacementPods")
        ),
        what="Kueue's WaitingForReplacementPods",
    )
    assert (waiting["reason"], waiting["message"]) == (
        "PodsFailed",
        "Some Failed pods need replacement",
    )
    # Retriable by default: the group goes on, and the replacement is let through at once.
    replacement = copy.deepcopy(group_pods()[1])
    again = cluster.admin.create(r.PODS, replacement, "default")
    eventually(lambda: ungated(cluster, again), what="the replacement ungated")
    eventually(
        lambda: (
            condition(workload(cluster, "sample-group"), "WaitingForReplacementPods").get("reason")
            == "PodsReady"
        ),
        what="no pods need replacement",
    )
    failed = made[1]["metadata"]["name"]
    eventually(
        lambda: (
            FINALIZER
            not in (cluster.get("pods", failed, "default")["metadata"].get("finalizers") or [])
        ),
        what="the failed member let go",
    )
    assert condition(workload(cluster, "sample-group"), "Finished").get("status") != "True"


def test_a_deleted_member_that_ran_is_let_go_when_its_group_has_no_workload(
    cluster, start_controller
):
    """A MultiKueue worker's race, made here in order: the pods ran and succeeded; the leader
    is gone, the other is being deleted, and the group's Workload went before Tower took
    Kueue's finalizer off. Left held, the pod would stay Terminating for ever."""
    setup(cluster)
    leader, member = (cluster.admin.create(r.PODS, p, "default") for p in group_pods())
    for each in (leader, member):
        kubelet(cluster, each, "Running")
        kubelet(cluster, each, "Succeeded")
    cluster.admin.patch(
        r.PODS, leader["metadata"]["name"], {"metadata": {"finalizers": None}}, "default"
    )
    cluster.admin.delete(r.PODS, leader["metadata"]["name"], "default")
    cluster.admin.delete(r.PODS, member["metadata"]["name"], "default")
    held = cluster.get("pods", member["metadata"]["name"], "default")
    assert held["metadata"]["deletionTimestamp"]
    assert FINALIZER in held["metadata"]["finalizers"]
    start_controller()
    eventually(
        lambda: cluster.get("pods", member["metadata"]["name"], "default") is None,
        what="the deleted member gone",
    )
    assert workload(cluster, "sample-group") is None


def test_a_finished_group_without_a_workload_is_let_go_and_gets_none(cluster, start_controller):
    """Kueue's rule: a group whose pods all succeeded is finished; if its Workload is gone
    (deleted, or never made), the pods' finalizers come off and no Workload is made again."""
    setup(cluster)
    made = [cluster.admin.create(r.PODS, p, "default") for p in group_pods()]
    for each in made:
        kubelet(cluster, each, "Running")
        kubelet(cluster, each, "Succeeded")
    start_controller()
    for each in made:
        eventually(
            lambda p=each: (
                FINALIZER
                not in (cluster.get("pods", p["metadata"]["name"], "default") or {})
                .get("metadata", {})
                .get("finalizers", [])
            ),
            what="each finished member let go",
        )
    assert workload(cluster, "sample-group") is None


def test_an_evicted_group_is_deleted_and_holds_its_quota_until_its_pods_stop(
    cluster, start_controller
):
    preemption_setup(cluster)
    start_controller()
    made = []
    for pod in group_pods():
        pod["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "low"
        made.append(cluster.admin.create(r.PODS, pod, "default"))
    for each in made:
        eventually(lambda p=each: ungated(cluster, p), what="each member ungated")
        kubelet(cluster, each, "Running")
    urgent = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "urgent",
            "labels": {
                "kueue.x-k8s.io/queue-name": "user-queue",
                "kueue.x-k8s.io/priority-class": "high",
            },
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": 6}}}
                    ],
                }
            }
        },
    }
    cluster.admin.create(r.JOBS, urgent, "default")
    # Both running members are deleted (held by the finalizer, they stop as a kubelet ends them).
    for each in made:
        eventually(
            lambda p=each: cluster.get("pods", p["metadata"]["name"], "default")["metadata"].get(
                "deletionTimestamp"
            ),
            what="each member deleted",
        )
    group = workload(cluster, "sample-group")
    assert condition(group, "QuotaReserved").get("status") == "True"  # its pods still run
    assert cluster.get("jobs", "urgent", "default")["spec"]["suspend"] is True
    for each in made:
        kubelet(cluster, each, "Failed")
    eventually(
        lambda: (
            condition(workload(cluster, "sample-group"), "QuotaReserved").get("status") == "False"
        ),
        what="the group's quota given back",
    )
    eventually(
        lambda: cluster.get("jobs", "urgent", "default")["spec"]["suspend"] is False,
        what="the urgent Job started",
    )


def test_a_pod_given_its_group_labels_after_creation_runs_and_finishes(cluster, start_controller):
    """Kueue's e2e "Pod should be admitted after the group labels are added": a pod created
    gated without a queue label (no webhook of Tower's sees it) joins its group by an update.
    It is stamped with its role hash from its spec as created, so the flavor's nodeSelector
    that admission adds does not make it look like a pod beyond the group (deleted, and the
    group's Workload with it): it runs, and its group finishes."""
    setup(cluster)
    start_controller()
    pod = cluster.admin.create(r.PODS, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "pod-0", "labels": {"app-role": "worker"},
                     "annotations": {POD_SUSPENDING: "OtherController"}},
        "spec": {"restartPolicy": "Never", "schedulingGates": [GATE],
                 "containers": [{"name": "c", "image": "busybox",
                                 "resources": {"requests": {"cpu": "1"}}}]},
    }, "default")  # fmt: skip
    assert "kueue.x-k8s.io/role-hash" not in pod["metadata"]["annotations"]
    pod["metadata"]["labels"].update({
        "kueue.x-k8s.io/pod-group-name": "test-group",
        "kueue.x-k8s.io/queue-name": "user-queue",
        "kueue.x-k8s.io/managed": "true",
    })  # fmt: skip
    pod["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = "1"
    cluster.admin.update(r.PODS, pod)
    made = eventually(lambda: workload(cluster, "test-group"), what="the group's Workload")
    [pod_set] = made["spec"]["podSets"]
    running = eventually(lambda: ungated(cluster, pod), what="pod-0 let through")
    assert running["spec"]["nodeSelector"] == {"instance-type": "spot"}
    kubelet(cluster, pod, "Running")
    kubelet(cluster, pod, "Succeeded")
    eventually(
        lambda: condition(workload(cluster, "test-group"), "Finished").get("status") == "True",
        what="the group finished",
    )
    assert not events(cluster, "ExcessPodDeleted")
    kept = cluster.get("pods", "pod-0", "default")
    assert kept["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] == pod_set["name"]


def statefulset_pod(created: dict[str, Any], ordinal: int) -> dict[str, Any]:
    """A pod as the StatefulSet controller makes it from the marked template."""
    template = created["spec"]["template"]
    name = created["metadata"]["name"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **copy.deepcopy(template["metadata"]),
            "name": f"{name}-{ordinal}",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": name,
                    "uid": created["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": copy.deepcopy(template["spec"]),
    }


@pytest.mark.parametrize(
    ("gates", "where"),
    [({}, "annotations"), ({"WorkloadIdentifierAnnotations": False}, "labels")],
    ids=["WorkloadIdentifierAnnotations on (Kueue's default)", "the gate off"],
)
def test_kueues_sample_statefulset_is_one_workload_admitted_whole(
    gates, where, cluster, start_controller
):
    setup(cluster)
    start_controller(feature_gates=gates)
    [sample] = load(EXAMPLES / "serving" / "sample-statefulset.yaml")
    created = cluster.admin.create(STATEFULSETS, sample, "default")
    template = created["spec"]["template"]["metadata"]
    assert template["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] == "statefulset"
    assert template["labels"]["kueue.x-k8s.io/queue-name"] == "user-queue"
    name = workload_name("StatefulSet", "apps", "nginx-statefulset", created["metadata"]["uid"])
    # The Workload is made up front, for all three replicas.
    made = eventually(lambda: workload(cluster, name), what="the StatefulSet's Workload")
    [main] = made["spec"]["podSets"]
    assert (main["name"], main["count"]) == ("main", 3)
    assert made["metadata"]["annotations"]["kueue.x-k8s.io/job-owner-gvk"] == (
        "apps/v1, Kind=StatefulSet"
    )
    eventually(
        lambda: condition(workload(cluster, name), "Admitted").get("status") == "True",
        what="admitted",
    )
    pods = [cluster.admin.create(r.PODS, statefulset_pod(created, i), "default") for i in range(3)]
    for each in pods:
        assert GATE in each["spec"]["schedulingGates"]
        assert FINALIZER not in (each["metadata"].get("finalizers") or [])
        running = eventually(lambda p=each: ungated(cluster, p), what="each pod let through")
        assert running["spec"]["nodeSelector"] == {"instance-type": "spot"}
        # Told its group as Kueue's StatefulSet pod reconciler tells it.
        meta = cluster.get("pods", each["metadata"]["name"], "default")["metadata"]
        assert meta[where].pop("kueue.x-k8s.io/pod-group-name") == name
        assert "kueue.x-k8s.io/pod-group-name" not in meta["labels"] | meta["annotations"]
        ours = (POD_SUSPENDING, "tower.dev/cluster-queue")
        assert {k: v for k, v in meta["annotations"].items() if k not in ours} == {
            "kueue.x-k8s.io/pod-group-total-count": "3",
            "kueue.x-k8s.io/pod-group-fast-admission": "true",
            "kueue.x-k8s.io/pod-group-serving": "true",
            "kueue.x-k8s.io/pod-group-pod-index-label": "apps.kubernetes.io/pod-index",
            "kueue.x-k8s.io/role-hash": "main",
        }
    said = tower(cluster, "why", "statefulset/nginx-statefulset", "-n", "default", "-o", "json")
    assert said.returncode == 0, said.stderr
    answer = json.loads(said.stdout)
    assert (answer["kind"], answer["state"]) == ("StatefulSet", "1 Admitted")
    assert answer["workloads"][0]["workload"] == name
    said = tower(cluster, "why", "pod/nginx-statefulset-2", "-n", "default", "-o", "json")
    assert (json.loads(said.stdout)["state"], json.loads(said.stdout)["workload"]) == (
        "Admitted",
        name,
    )
    # A pod deleted and made again (same name) is let through under the same admission.
    cluster.admin.delete(r.PODS, "nginx-statefulset-1", "default")
    again = cluster.admin.create(r.PODS, statefulset_pod(created, 1), "default")
    eventually(lambda: ungated(cluster, again), what="the recreated pod let through")

    # A pod beyond the admitted count (as `kubectl scale`, which no webhook sees, makes) stays
    # gated: never more running pods than the quota holds.
    extra = cluster.admin.create(r.PODS, statefulset_pod(created, 3), "default")
    said = eventually(lambda: events(cluster, "BeyondAdmission"), what="why the extra pod waits")
    assert "is admitted for 3 pods of podSet main, and as many run" in said[0], said
    assert ungated(cluster, extra) is None
    cluster.admin.delete(r.PODS, "nginx-statefulset-3", "default")

    # Kueue's rule: only to zero and back.
    with pytest.raises(ApiError) as refused:
        cluster.admin.patch(STATEFULSETS, "nginx-statefulset", {"spec": {"replicas": 2}}, "default")
    assert "spec.replicas: cannot change from 3 to 2" in str(refused.value)
    # Scaled to zero (Kueue's rule): the Workload is kept, its quota given back and held.
    uid = workload(cluster, name)["metadata"]["uid"]
    cluster.admin.patch(STATEFULSETS, "nginx-statefulset", {"spec": {"replicas": 0}}, "default")
    for pod in ("nginx-statefulset-0", "nginx-statefulset-1", "nginx-statefulset-2"):
        cluster.admin.delete(r.PODS, pod, "default")  # as the StatefulSet controller does
    held = eventually(
        lambda: (
            (w := workload(cluster, name))
            and condition(w, "QuotaReserved").get("reason") == "OnHold"
            and w
        ),
        what="the Workload on hold",
    )
    assert held["metadata"]["uid"] == uid
    assert condition(held, "QuotaReserved")["status"] == "False"
    assert condition(held, "Admitted")["status"] == "False"
    assert "admission" not in held.get("status", {}) or held["status"]["admission"] is None
    said = tower(cluster, "queue", "cluster-queue", "-o", "json")
    assert json.loads(said.stdout) == [], said.stdout  # on hold: not waiting for quota
    # Scaled up (to another size, through zero): the same Workload, at the new size, admitted.
    cluster.admin.patch(STATEFULSETS, "nginx-statefulset", {"spec": {"replicas": 1}}, "default")
    back = eventually(
        lambda: (
            (w := workload(cluster, name))
            and condition(w, "Admitted").get("status") == "True"
            and w
        ),
        what="the held Workload admitted again",
    )
    assert back["metadata"]["uid"] == uid
    assert back["spec"]["podSets"][0]["count"] == 1
    assert condition(back, "QuotaReserved")["status"] == "True"
    pod = cluster.admin.create(r.PODS, statefulset_pod(created, 0), "default")
    eventually(lambda: ungated(cluster, pod), what="its pod let through")
    cluster.admin.delete(STATEFULSETS, "nginx-statefulset", "default")
    eventually(lambda: workload(cluster, name) is None, what="the Workload gone with it")


def test_a_statefulsets_new_queue_name_reaches_its_workload_and_pods(cluster, start_controller):
    """Kueue's statefulset reconciler: a StatefulSet queued to a LocalQueue that does not
    exist, relabelled to one that does, has its Workload and its gated pods follow."""
    setup(cluster)
    start_controller()
    [sample] = load(EXAMPLES / "serving" / "sample-statefulset.yaml")
    sample["spec"]["replicas"] = 1
    sample["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "nowhere"
    created = cluster.admin.create(STATEFULSETS, sample, "default")
    name = workload_name("StatefulSet", "apps", "nginx-statefulset", created["metadata"]["uid"])
    made = eventually(lambda: workload(cluster, name), what="the StatefulSet's Workload")
    assert made["spec"]["queueName"] == "nowhere"
    pod = cluster.admin.create(r.PODS, statefulset_pod(created, 0), "default")
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "nowhere"
    relabel = {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "user-queue"}}}
    cluster.admin.patch(STATEFULSETS, "nginx-statefulset", relabel, "default")
    eventually(
        lambda: workload(cluster, name)["spec"]["queueName"] == "user-queue",
        what="the Workload's queueName",
    )
    eventually(
        lambda: (
            cluster.get("pods", "nginx-statefulset-0", "default")["metadata"]["labels"][
                "kueue.x-k8s.io/queue-name"
            ]
            == "user-queue"
        ),
        what="its pod's queue-name label",
    )
    eventually(
        lambda: condition(workload(cluster, name), "Admitted").get("status") == "True",
        what="admitted in its new queue",
    )
    eventually(lambda: ungated(cluster, pod), what="its pod let through")


def test_a_statefulset_that_does_not_fit_keeps_its_pods_gated(cluster, start_controller):
    setup(cluster)
    start_controller()
    [sample] = load(EXAMPLES / "serving" / "sample-statefulset.yaml")
    sample["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = 4
    created = cluster.admin.create(STATEFULSETS, sample, "default")  # 12 of 9 cpu
    name = workload_name("StatefulSet", "apps", "nginx-statefulset", created["metadata"]["uid"])
    message = eventually(
        lambda: condition(workload(cluster, name), "QuotaReserved").get("message"),
        what="its reason",
    )
    assert "needs 12 cpu" in message, message
    made = cluster.admin.create(r.PODS, statefulset_pod(created, 0), "default")
    assert GATE in made["spec"]["schedulingGates"]
    assert ungated(cluster, made) is None
    text = tower(cluster, "why", "statefulset/nginx-statefulset", "-n", "default").stdout
    assert text.startswith("StatefulSet default/nginx-statefulset\nState:       1 Pending"), text
    listed = json.loads(tower(cluster, "queue", "cluster-queue", "-o", "json").stdout)
    assert [(row["workload"], row["positionInClusterQueue"]) for row in listed] == [(name, 1)]
    foreseen = tower(cluster, "forecast", "-o", "json")
    assert foreseen.returncode == 0, foreseen.stderr
    assert [row["workload"] for row in json.loads(foreseen.stdout)] == [name]


LWS = r.Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", True)
LWS_NAME = "nginx-leaderworkerset"


def lws_pods(created: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """A group's pods as the LeaderWorkerSet controller makes them (through its StatefulSets):
    the leader from the leader template, the workers naming their leader."""
    spec = created["spec"]["leaderWorkerTemplate"]
    out = []
    for worker in range(spec["size"]):
        template = spec["workerTemplate"] if worker else spec["leaderTemplate"]
        meta = copy.deepcopy(template.get("metadata") or {})
        labels = meta.setdefault("labels", {})
        labels.update(
            {
                "leaderworkerset.sigs.k8s.io/name": LWS_NAME,
                "leaderworkerset.sigs.k8s.io/group-index": str(index),
                "leaderworkerset.sigs.k8s.io/worker-index": str(worker),
            }
        )
        name = f"{LWS_NAME}-{index}" + (f"-{worker}" if worker else "")
        if worker:
            meta.setdefault("annotations", {})["leaderworkerset.sigs.k8s.io/leader-name"] = (
                f"{LWS_NAME}-{index}"
            )
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {**meta, "name": name},
                "spec": copy.deepcopy(template["spec"]),
            }
        )
    return out


def lws_workloads(cluster: Any, uid: str, replicas: int) -> list[str]:
    return [
        workload_name("LeaderWorkerSet", "leaderworkerset.x-k8s.io", f"{LWS_NAME}-{i}", uid)
        for i in range(replicas)
    ]


@pytest.fixture
def lws_crd(cluster):

    from tests.controller.conftest import CRDS

    crd = yamlc.safe_load(
        (EXAMPLES.parents[1] / "lws" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml").read_text()
    )
    cluster.admin.create(CRDS, crd)


def test_kueues_sample_leaderworkerset_is_one_workload_per_group(
    cluster, start_controller, lws_crd
):
    setup(cluster)
    start_controller()
    [sample] = load(EXAMPLES / "serving" / "sample-leaderworkerset.yaml")
    created = cluster.admin.create(LWS, sample, "default")
    for which in ("leaderTemplate", "workerTemplate"):
        meta = created["spec"]["leaderWorkerTemplate"][which]["metadata"]
        assert meta["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] == (
            "leaderworkerset.x-k8s.io/leaderworkerset"
        )
        assert meta["labels"]["kueue.x-k8s.io/queue-name"] == "user-queue"
    names = lws_workloads(cluster, created["metadata"]["uid"], 2)
    for name in names:
        made = eventually(lambda n=name: workload(cluster, n), what="each group's Workload")
        assert [(p["name"], p["count"]) for p in made["spec"]["podSets"]] == [
            ("leader", 1),
            ("worker", 2),
        ]
        eventually(
            lambda n=name: condition(workload(cluster, n), "Admitted").get("status") == "True",
            what="each group admitted",
        )
    for index in range(2):
        pods = [cluster.admin.create(r.PODS, p, "default") for p in lws_pods(created, index)]
        for each in pods:
            assert GATE in each["spec"]["schedulingGates"]
            running = eventually(lambda p=each: ungated(cluster, p), what="each pod let through")
            annotations = running["metadata"]["annotations"]
            assert annotations["kueue.x-k8s.io/pod-group-name"] == names[index]
            role = (
                "worker" if "leaderworkerset.sigs.k8s.io/leader-name" in annotations else "leader"
            )
            assert annotations["kueue.x-k8s.io/role-hash"] == role
            assert running["metadata"]["labels"]["kueue.x-k8s.io/podset"] == role

    # Scaling is group by group; the size is fixed while queued.
    cluster.admin.patch(LWS, LWS_NAME, {"spec": {"replicas": 3}}, "default")
    third = lws_workloads(cluster, created["metadata"]["uid"], 3)[2]
    eventually(lambda: workload(cluster, third), what="the third group's Workload")
    cluster.admin.patch(LWS, LWS_NAME, {"spec": {"replicas": 1}}, "default")
    eventually(
        lambda: workload(cluster, third) is None and workload(cluster, names[1]) is None,
        what="the groups beyond 1 gone",
    )
    assert workload(cluster, names[0]) is not None
    with pytest.raises(ApiError) as refused:
        cluster.admin.patch(
            LWS, LWS_NAME, {"spec": {"leaderWorkerTemplate": {"size": 4}}}, "default"
        )
    assert "spec.leaderWorkerTemplate.size: cannot change from 3 to 4" in str(refused.value)


def test_a_leaderworkerset_group_that_does_not_fit_waits_gated(cluster, start_controller, lws_crd):
    setup(cluster)
    start_controller()
    [sample] = load(EXAMPLES / "serving" / "sample-leaderworkerset.yaml")
    worker = sample["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    worker["resources"]["requests"]["cpu"] = 3  # each group: 100m + 2 × 3 cpu; 9 cpu in all
    created = cluster.admin.create(LWS, sample, "default")
    first, second = lws_workloads(cluster, created["metadata"]["uid"], 2)
    eventually(
        lambda: (
            condition(workload(cluster, first), "Admitted").get("status") == "True"
            or condition(workload(cluster, second), "Admitted").get("status") == "True"
        ),
        what="one group admitted",
    )
    waiting = next(
        n
        for n in (first, second)
        if condition(workload(cluster, n), "Admitted").get("status") != "True"
    )
    message = eventually(
        lambda: condition(workload(cluster, waiting), "QuotaReserved").get("message"),
        what="the other's reason",
    )
    assert "needs" in message, message
    index = (first, second).index(waiting)
    pods = [cluster.admin.create(r.PODS, p, "default") for p in lws_pods(created, index)]
    eventually(
        lambda: all(
            cluster.get("pods", p["metadata"]["name"], "default")["metadata"]
            .get("annotations", {})
            .get("kueue.x-k8s.io/pod-group-name")
            == waiting
            for p in pods
        ),
        what="its pods told their group",
    )
    for each in pods:
        assert ungated(cluster, each) is None


def test_a_group_is_ready_when_all_its_pods_are(cluster, start_controller):
    """WaitForPodsReady: a group's Workload is PodsReady once as many pods as admitted run,
    every one Ready (Kueue's rule), and is not evicted for waiting."""
    from tests.controller.test_pods_ready import wait_config

    setup(cluster)
    start_controller(wait_for_pods_ready=wait_config(timeout=30.0))
    made = [cluster.admin.create(r.PODS, p, "default") for p in group_pods()]
    for each in made:
        eventually(lambda p=each: ungated(cluster, p), what="each member ungated")
        kubelet(cluster, each, "Running")
    ready = {"type": "Ready", "status": "True"}
    cluster.admin.patch(
        r.PODS, made[0]["metadata"]["name"], {"status": {"conditions": [ready]}}, "default",
        subresource="status",
    )  # fmt: skip
    eventually(
        lambda: condition(workload(cluster, "sample-group"), "PodsReady").get("status") == "False",
        what="PodsReady False while one pod is not ready",
    )
    cluster.admin.patch(
        r.PODS, made[1]["metadata"]["name"], {"status": {"conditions": [ready]}}, "default",
        subresource="status",
    )  # fmt: skip
    eventually(
        lambda: condition(workload(cluster, "sample-group"), "PodsReady").get("status") == "True",
        what="PodsReady once both are",
    )


def test_a_statefulset_runs_without_the_pod_integration_named(cluster, start_controller):
    """Kueue's implicit pod integration: `statefulset` on and `pod` not, the StatefulSet's
    pods are followed (and a plain pod is not)."""
    from tests.controller.test_pods import example_pod

    setup(cluster)
    start_controller(integrations=("batch/job", "statefulset"))
    plain = cluster.admin.create(r.PODS, example_pod(), "default")
    [sample] = load(EXAMPLES / "serving" / "sample-statefulset.yaml")
    created = cluster.admin.create(STATEFULSETS, sample, "default")
    made = cluster.admin.create(r.PODS, statefulset_pod(created, 0), "default")
    # Seen after the plain pod: by then the plain pod was looked at, and left alone.
    eventually(lambda: ungated(cluster, made), what="its pod let through")
    assert cluster.workload_of(plain) is None
