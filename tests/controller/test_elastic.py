"""Kueue's elastic jobs through Workload slices, on the API double with the real webhook.

Kueue's sample-scalable-job.yaml (a Job annotated `kueue.x-k8s.io/elastic-job: "true"`, 100m a
pod) in a ClusterQueue of 1 cpu: admitted as its first slice, its pods let through from
behind the elastic scheduling gate; scaled down in place (no requeue); scaled up on a busy
queue, a new slice that waits saying why while the old one keeps its quota, then replaces it
once admitted. A slice is preempted as any Workload is; a scale-up slice preempts a
lower-priority Job, never its old slice. Kueue's refusals: elastic with
partial admission. The gate off: the annotation is ignored, a resized Job is queued again.
RayCluster and RayJob: Kueue's autoscaling RayJob is accepted; a RayCluster's workers scale
through slices. The double runs no pods: the test makes the Job's pods as its controller
would (gated, as the webhook's template says).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from extender.core.jobframework import registry
from extender.kube.api import resources as r
from extender.kube.api.client import ApiError
from tests import yamlc
from tests.controller.conftest import CRDS, eventually
from tests.controller.test_kubeflow import condition, load
from tests.controller.test_preemption import cluster_queue, flavor, local_queue

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLES = DATA / "kueue-v0.19.2" / "examples"
GATE = "kueue.x-k8s.io/elastic-job"
REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"
SLICE_NAME = "kueue.x-k8s.io/workload-slice-name"


def scalable_job() -> dict[str, Any]:
    [job] = load(EXAMPLES / "jobs" / "sample-scalable-job.yaml")
    return job


def slices_of(cluster: Any, job: dict[str, Any]) -> list[dict[str, Any]]:
    uid = job["metadata"]["uid"]
    found = [
        wl
        for wl in cluster.api.list("workloads", job["metadata"]["namespace"])
        if (wl["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") == uid
    ]
    # Oldest first; a slice made in the same second as the one it replaces comes after it.
    return sorted(
        found,
        key=lambda w: (
            w["metadata"]["creationTimestamp"],
            REPLACEMENT_FOR in (w["metadata"].get("annotations") or {}),
            w["metadata"]["name"],
        ),
    )


def status_of(wl: dict[str, Any], kind: str) -> str | None:
    return condition(wl, kind).get("status")


def counts(wl: dict[str, Any]) -> dict[str, int]:
    return {p["name"]: p["count"] for p in wl["spec"]["podSets"]}


def events(cluster: Any, reason: str) -> list[str]:
    return [
        e.get("message", "")
        for e in cluster.api.list("events", "default")
        if e.get("reason") == reason
    ]


def make_pods(cluster: Any, job: dict[str, Any], first: int, last: int) -> None:
    """Pods as the Job controller makes them from the Job's template (the webhook's gate in
    it, Tower's podset label from the start)."""
    live = cluster.get("jobs", job["metadata"]["name"], "default")
    template = live["spec"]["template"]
    for i in range(first, last):
        labels = {
            **(template["metadata"].get("labels") or {}),
            "batch.kubernetes.io/controller-uid": job["metadata"]["uid"],
        }
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{job['metadata']['name']}-{i}", "labels": labels},
            "spec": copy.deepcopy(template["spec"]),
        }
        cluster.admin.create(r.PODS, pod, "default")


def gated_pods(cluster: Any) -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in cluster.api.list("pods", "default")
        if any(g.get("name") == GATE for g in p["spec"].get("schedulingGates") or [])
    )


def one_cpu(cluster: Any, **cq: Any) -> None:
    cluster.apply(flavor("pool-a"), cluster_queue("cq", "1", **cq), local_queue("user-queue", "cq"))


def admitted(cluster: Any, job: dict[str, Any]) -> dict[str, Any]:
    def first() -> dict[str, Any] | None:
        found = slices_of(cluster, job)
        return found[0] if found and status_of(found[0], "Admitted") == "True" else None

    return eventually(first, what="the elastic Job's first slice admitted")


def test_kueues_scalable_job_scales_down_in_place_and_up_through_a_slice(cluster, start_controller):
    one_cpu(cluster)
    running = start_controller()
    job = cluster.admin.create(r.JOBS, scalable_job(), "default")
    gates = job["spec"]["template"]["spec"]["schedulingGates"]
    assert {"name": GATE} in gates  # the webhook gates its pods, as Kueue's does

    first = admitted(cluster, job)
    name = first["metadata"]["name"]
    assert name.startswith("job-sample-elastic-job-")
    assert first["metadata"]["annotations"][GATE] == "true"
    assert first["metadata"]["annotations"][SLICE_NAME] == name
    assert counts(first) == {"main": 3}
    eventually(lambda: not cluster.get("jobs", "sample-elastic-job", "default")["spec"]["suspend"])
    make_pods(cluster, job, 0, 3)
    eventually(lambda: gated_pods(cluster) == [], what="its 3 pods let through")

    # Scale down: the same Workload, 2 pods, its quota given back; never suspended.
    cluster.admin.patch(r.JOBS, "sample-elastic-job", {"spec": {"parallelism": 2}}, "default")
    eventually(lambda: counts(slices_of(cluster, job)[0]) == {"main": 2}, what="scaled down")
    [down] = slices_of(cluster, job)
    assert down["metadata"]["uid"] == first["metadata"]["uid"]
    assert status_of(down, "QuotaReserved") == "True"

    # The queue fills: 2 x 100m + 750m of 1 cpu (750m did not fit beside 3 x 100m).
    cluster.job("filler", "750m")
    eventually(lambda: cluster.get("jobs", "filler", "default")["spec"]["suspend"] is False,
               what="the filler admitted in the room the scale-down gave back")  # fmt: skip

    # Scale up to 5: a new slice waits (300m more, 50m free); the old keeps its quota.
    cluster.admin.patch(r.JOBS, "sample-elastic-job", {"spec": {"parallelism": 5}}, "default")

    def waiting() -> dict[str, Any] | None:
        found = slices_of(cluster, job)
        if len(found) != 2:
            return None
        new = found[1]
        reserved = condition(new, "QuotaReserved")
        return new if reserved.get("status") == "False" and reserved.get("message") else None

    new = eventually(waiting, what="a scale-up slice waiting for quota")
    assert new["metadata"]["annotations"][REPLACEMENT_FOR] == f"default/{name}"
    assert new["metadata"]["annotations"][SLICE_NAME] == name
    assert counts(new) == {"main": 5}
    message = condition(new, "QuotaReserved")["message"]
    assert f"counting the quota of default/{name}, the slice it replaces" in message, message
    old = slices_of(cluster, job)[0]
    assert status_of(old, "QuotaReserved") == "True"  # held until the new one is admitted
    assert not cluster.get("jobs", "sample-elastic-job", "default")["spec"]["suspend"]
    make_pods(cluster, job, 3, 6)  # the Job controller makes 3 more: they stay gated
    eventually(lambda: len(gated_pods(cluster)) == 3, what="the new pods held by the gate")

    # Room: the filler goes, the slice is admitted and replaces the old one.
    cluster.admin.delete(r.JOBS, "filler", "default")

    def replaced() -> bool:
        old_now = cluster.get("workloads", name, "default")
        return status_of(old_now, "Finished") == "True"

    eventually(replaced, what="the old slice finished")
    old = cluster.get("workloads", name, "default")
    finished = condition(old, "Finished")
    assert finished["reason"] == "WorkloadSliceReplaced"
    assert finished["message"].startswith(
        f"Replaced to accommodate a workload (UID: {new['metadata']['uid']}, JobUID: "
    )
    new = cluster.get("workloads", new["metadata"]["name"], "default")
    assert status_of(new, "Admitted") == "True"
    eventually(lambda: len(gated_pods(cluster)) == 1, what="two more pods let through (5 of 6)")
    assert not cluster.get("jobs", "sample-elastic-job", "default")["spec"]["suspend"]
    assert events(cluster, "PodSetsChanged") == []  # never stopped and queued again
    counter = running.controller.ctx.metrics.cluster_queue.replaced_slices
    assert counter.labels("cq")._value.get() == 1  # kueue_replaced_workload_slices_total


def test_an_admitted_slice_is_preempted_as_any_workload(cluster, start_controller):
    one_cpu(cluster, preemption={"withinClusterQueue": "LowerPriority"})
    cluster.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        }
    )
    start_controller()
    job = cluster.admin.create(r.JOBS, scalable_job(), "default")
    first = admitted(cluster, job)
    cluster.job("urgent", "900m", labels={"kueue.x-k8s.io/priority-class": "high"})

    def preempted() -> dict[str, Any] | None:
        wl = cluster.get("workloads", first["metadata"]["name"], "default")
        return wl if status_of(wl, "Preempted") == "True" else None

    wl = eventually(preempted, what="the elastic Job's slice preempted")
    assert condition(wl, "Evicted")["reason"] == "Preempted"
    eventually(lambda: cluster.get("jobs", "sample-elastic-job", "default")["spec"]["suspend"])
    eventually(lambda: cluster.get("jobs", "urgent", "default")["spec"]["suspend"] is False)
    eventually(lambda: status_of(cluster.get("workloads", first["metadata"]["name"], "default"),
                                 "QuotaReserved") == "False", what="the slice queued again")  # fmt: skip
    assert len(slices_of(cluster, job)) == 1  # queued again as it is: no new slice


def test_an_old_slice_preempted_while_its_scale_up_waits_leaves_the_new_slice_to_run_the_job(
    cluster, start_controller
):
    one_cpu(cluster, preemption={"withinClusterQueue": "LowerPriority"})
    cluster.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        }
    )
    start_controller()
    job = cluster.admin.create(r.JOBS, scalable_job(), "default")
    first = admitted(cluster, job)
    cluster.job("filler", "650m")
    eventually(lambda: cluster.get("jobs", "filler", "default")["spec"]["suspend"] is False)
    cluster.admin.patch(r.JOBS, "sample-elastic-job", {"spec": {"parallelism": 5}}, "default")
    new = eventually(lambda: len(slices_of(cluster, job)) == 2 and slices_of(cluster, job)[1],
                     what="a scale-up slice")  # fmt: skip
    cluster.job("urgent", "900m", labels={"kueue.x-k8s.io/priority-class": "high"})

    def old_finished() -> dict[str, Any] | None:
        wl = cluster.get("workloads", first["metadata"]["name"], "default")
        return wl if status_of(wl, "Finished") == "True" else None

    old = eventually(old_finished, what="the preempted old slice finished")
    assert condition(old, "Evicted").get("reason") == "Preempted"
    assert condition(old, "Finished")["reason"] == "WorkloadSliceReplaced"
    eventually(lambda: cluster.get("jobs", "sample-elastic-job", "default")["spec"]["suspend"],
               what="the elastic Job stopped")  # fmt: skip
    eventually(lambda: cluster.get("jobs", "urgent", "default")["spec"]["suspend"] is False,
               what="the urgent Job admitted")  # fmt: skip
    cluster.admin.delete(r.JOBS, "filler", "default")  # preempted too, it would go first
    cluster.admin.delete(r.JOBS, "urgent", "default")
    eventually(lambda: not cluster.get("jobs", "sample-elastic-job", "default")["spec"]["suspend"],
               what="the elastic Job started again by its new slice")  # fmt: skip
    now = cluster.get("workloads", new["metadata"]["name"], "default")
    assert status_of(now, "Admitted") == "True"
    assert counts(now) == {"main": 5}


def test_a_scale_up_slice_preempts_a_lower_priority_job_and_never_its_old_slice(
    cluster, start_controller
):
    one_cpu(cluster, preemption={"withinClusterQueue": "LowerPriority"})
    cluster.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        }
    )
    start_controller()
    elastic = scalable_job()
    elastic["metadata"].setdefault("labels", {})["kueue.x-k8s.io/priority-class"] = "high"
    job = cluster.admin.create(r.JOBS, elastic, "default")
    first = admitted(cluster, job)
    name = first["metadata"]["name"]
    cluster.job("filler", "650m")  # 300m + 650m of 1 cpu: 50m free
    eventually(lambda: cluster.get("jobs", "filler", "default")["spec"]["suspend"] is False)

    # Scale up to 5: 200m more than its old slice holds, only the filler can make room.
    cluster.admin.patch(r.JOBS, "sample-elastic-job", {"spec": {"parallelism": 5}}, "default")

    def filler_preempted() -> dict[str, Any] | None:
        [wl] = [
            w for w in cluster.api.list("workloads", "default")
            if w["metadata"]["name"].startswith("job-filler-")
        ]  # fmt: skip
        return wl if status_of(wl, "Preempted") == "True" else None

    victim = eventually(filler_preempted, what="the filler preempted by the scale-up slice")
    assert "Preempted to accommodate a workload" in condition(victim, "Preempted")["message"]
    eventually(lambda: cluster.get("jobs", "filler", "default")["spec"]["suspend"],
               what="the filler stopped")  # fmt: skip

    def replaced() -> dict[str, Any] | None:
        old = cluster.get("workloads", name, "default")
        return old if status_of(old, "Finished") == "True" else None

    old = eventually(replaced, what="the old slice replaced by the admitted new one")
    assert condition(old, "Finished")["reason"] == "WorkloadSliceReplaced"
    assert status_of(old, "Preempted") != "True"  # never a victim of its own replacement
    new = slices_of(cluster, job)[-1]
    assert new["metadata"]["annotations"][REPLACEMENT_FOR] == f"default/{name}"
    assert status_of(new, "Admitted") == "True"
    assert counts(new) == {"main": 5}
    assert not cluster.get("jobs", "sample-elastic-job", "default")["spec"]["suspend"]
    assert events(cluster, "PodSetsChanged") == []


def test_elastic_with_partial_admission_is_refused_with_kueues_message(cluster):
    job = scalable_job()
    job["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] = "2"
    with pytest.raises(ApiError) as refused:
        cluster.admin.create(r.JOBS, job, "default")
    assert (
        'metadata.annotations[kueue.x-k8s.io/job-min-parallelism]: Invalid value: "2": partial '
        "admission and elastic job cannot be used together" in str(refused.value)
    )


def test_a_running_partially_admitted_job_may_not_change_its_parallelism(cluster, start_controller):
    one_cpu(cluster)
    start_controller()
    job = scalable_job()
    del job["metadata"]["annotations"][GATE]
    job["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] = "1"
    cluster.admin.create(r.JOBS, job, "default")
    eventually(lambda: not cluster.get("jobs", "sample-elastic-job", "default")["spec"]["suspend"])
    with pytest.raises(ApiError) as refused:
        cluster.admin.patch(r.JOBS, "sample-elastic-job", {"spec": {"parallelism": 4}}, "default")
    assert (
        "spec.parallelism: Forbidden: cannot change when partial admission is enabled and the "
        "job is not suspended" in str(refused.value)
    )


def test_the_elastic_annotation_cannot_be_taken_off(cluster, start_controller):
    one_cpu(cluster)
    start_controller()
    cluster.admin.create(r.JOBS, scalable_job(), "default")
    with pytest.raises(ApiError) as refused:
        cluster.admin.patch(
            r.JOBS, "sample-elastic-job", {"metadata": {"annotations": {GATE: None}}}, "default"
        )
    assert (
        "metadata.annotations[kueue.x-k8s.io/elastic-job]: Invalid value: false: field is "
        "immutable" in str(refused.value)
    )


def test_with_the_gate_off_a_resized_elastic_job_is_queued_again(cluster, start_controller):
    one_cpu(cluster)
    start_controller(feature_gates={"ElasticJobsViaWorkloadSlices": False})
    job = cluster.admin.create(r.JOBS, scalable_job(), "default")
    wl = eventually(lambda: cluster.workload_of(job), what="its Workload")
    assert REPLACEMENT_FOR not in (wl["metadata"].get("annotations") or {})
    assert SLICE_NAME not in (wl["metadata"].get("annotations") or {})
    eventually(lambda: not cluster.get("jobs", "sample-elastic-job", "default")["spec"]["suspend"])
    cluster.admin.patch(r.JOBS, "sample-elastic-job", {"spec": {"parallelism": 5}}, "default")
    eventually(lambda: events(cluster, "PodSetsChanged"), what="stopped and queued again")

    def queued_again() -> dict[str, Any] | None:
        found = slices_of(cluster, job)
        fresh = [w for w in found if w["metadata"]["uid"] != wl["metadata"]["uid"]]
        return fresh[0] if len(found) == 1 and fresh else None

    again = eventually(queued_again, what="one Workload made again at the new size")
    assert counts(again) == {"main": 5}
    assert REPLACEMENT_FOR not in (again["metadata"].get("annotations") or {})


def ray_crd(cluster: Any, plural: str) -> None:
    cluster.admin.create(
        CRDS, yamlc.safe_load((DATA / "kuberay" / f"ray.io_{plural}.yaml").read_text())
    )


def test_kueues_autoscaling_rayjob_is_accepted_with_its_pods_gated(cluster, start_controller):
    ray_crd(cluster, "rayjobs")
    cluster.apply(flavor("pool-a"), cluster_queue("cq", "4"), local_queue("user-queue", "cq"))
    start_controller()
    [sample] = load(EXAMPLES / "ray" / "ray-job-autoscaling-sample.yaml")
    rayjobs = r.resource_of(registry.ADAPTERS["ray.io/rayjob"])
    job = cluster.admin.create(rayjobs, sample, "default")
    cluster_spec = job["spec"]["rayClusterSpec"]
    assert {"name": GATE} in cluster_spec["headGroupSpec"]["template"]["spec"]["schedulingGates"]
    for group in cluster_spec["workerGroupSpecs"]:
        assert {"name": GATE} in group["template"]["spec"]["schedulingGates"]
    wl = eventually(lambda: slices_of(cluster, job), what="its first slice")[0]
    assert wl["metadata"]["annotations"][GATE] == "true"
    eventually(lambda: cluster.get("rayjobs", sample["metadata"]["name"], "default")["spec"]
               .get("suspend") is False, what="the RayJob started")  # fmt: skip

    without = copy.deepcopy(sample)
    without["metadata"]["name"] = "not-elastic"
    del without["metadata"]["annotations"][GATE]
    with pytest.raises(ApiError) as refused:
        cluster.admin.create(rayjobs, without, "default")
    assert (
        "spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value: true: a kueue managed job "
        "should only use autoscaling when workload slicing is enabled" in str(refused.value)
    )


def test_a_rayclusters_workers_scale_through_slices(cluster, start_controller):
    ray_crd(cluster, "rayclusters")
    one_cpu(cluster)
    cluster.admin.patch(r.CLUSTER_QUEUES, "cq", {"spec": {"resourceGroups": [{
        "coveredResources": ["cpu", "memory"],
        "flavors": [{"name": "pool-a", "resources": [
            {"name": "cpu", "nominalQuota": "4"}, {"name": "memory", "nominalQuota": "64Gi"}]}],
    }]}})  # fmt: skip
    start_controller()
    [sample] = load(EXAMPLES / "ray" / "ray-cluster-sample.yaml")
    sample["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "user-queue"
    sample["metadata"].setdefault("annotations", {})[GATE] = "true"
    sample["spec"]["enableInTreeAutoscaling"] = True
    rayclusters = r.resource_of(registry.ADAPTERS["ray.io/raycluster"])
    made = cluster.admin.create(rayclusters, sample, "default")
    name = made["metadata"]["name"]
    first = eventually(
        lambda: [w for w in slices_of(cluster, made) if status_of(w, "Admitted") == "True"],
        what="the RayCluster's first slice admitted",
    )[0]
    group = made["spec"]["workerGroupSpecs"][0]
    pod_set = group["groupName"].lower()
    was = counts(first)[pod_set]

    def set_workers(n: int) -> None:
        live = cluster.get("rayclusters", name, "default")
        groups = copy.deepcopy(live["spec"]["workerGroupSpecs"])
        groups[0]["replicas"] = n
        groups[0]["maxReplicas"] = max(n, groups[0].get("maxReplicas") or n)
        cluster.admin.patch(rayclusters, name, {"spec": {"workerGroupSpecs": groups}}, "default")

    set_workers(was + 1)  # the autoscaler adds a worker: a new slice, admitted, replaces
    eventually(
        lambda: status_of(cluster.get("workloads", first["metadata"]["name"], "default"),
                          "Finished") == "True",
        what="the first slice replaced",
    )  # fmt: skip
    [now] = [w for w in slices_of(cluster, made) if status_of(w, "Finished") != "True"]
    assert counts(now)[pod_set] == was + 1
    assert status_of(now, "Admitted") == "True"
    set_workers(was)  # and takes it away: the same slice, in place
    eventually(lambda: counts(cluster.get("workloads", now["metadata"]["name"], "default"))[
        pod_set] == was, what="scaled down in place")  # fmt: skip
    assert cluster.get("rayclusters", name, "default")["spec"].get("suspend") in (None, False)
