"""Kueue v0.19.2 test/e2e/singlecluster/baseline/job_test.go, ported case by case."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.operators import wait_for_active_pods_and_terminate
from tests.e2e.kueue.util import (
    BEHAVIOR_EXIT_FAST,
    BEHAVIOR_WAIT_FOR_DELETION_FAIL_ON_EXIT,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    TIMEOUT,
    Cluster,
    condition,
    consistently,
    eventually,
    has_quota_reservation,
    is_admitted,
    is_finished,
    make_admission_check,
    make_cluster_queue,
    make_flavor_quotas,
    make_job,
    make_local_queue,
    make_resource_flavor,
    make_workload_priority_class,
    set_admission_check_active,
    set_container_defaults,
    set_workloads_admission_check,
)

pytestmark = pytest.mark.e2e
GO = "singlecluster/baseline/job_test.go"


def sample_job(namespace: str, **overrides: Any) -> dict:
    """The BeforeEach's sampleJob: queue main, agnhost waiting for deletion, 200m cpu, 20Mi."""
    return make_job(
        "test-job",
        namespace,
        queue="main",
        requests={"cpu": "200m", "memory": "20Mi"},
        **overrides,
    )


@kueue_case(GO, "Kueue Creating a Job without a matching LocalQueue Should stay in suspended")
def test_without_a_matching_local_queue_stays_suspended(cluster: Cluster, ns: str) -> None:
    job = cluster.batch.create_namespaced_job(ns, sample_job(ns))
    eventually(
        lambda: cluster.batch.read_namespaced_job("test-job", ns).spec.suspend is True,
        TIMEOUT,
        "the job to be suspended",
    )
    wl_name = cluster.workload_for_job(job, ns)

    def created_without_reservation() -> bool:
        wl = cluster.workload(wl_name, ns)
        assert wl is not None, f"workload {wl_name} not created"
        return not has_quota_reservation(wl)

    eventually(created_without_reservation, TIMEOUT, "the workload, without quota")
    cluster.batch.delete_namespaced_job("test-job", ns)


@pytest.fixture
def queueing(cluster: Cluster, ns: str) -> Iterator[dict[str, str]]:
    """When("Creating a Job With Queueing")'s BeforeEach and AfterEach."""
    on_demand, spot, cq = f"on-demand-{ns}", f"spot-{ns}", f"cluster-queue-{ns}"
    cluster.create(
        "resourceflavors", make_resource_flavor(on_demand, {"instance-type": "on-demand"})
    )
    cluster.create("resourceflavors", make_resource_flavor(spot, {"instance-type": "spot"}))
    cluster.create_active(
        "clusterqueues",
        make_cluster_queue(
            cq,
            make_flavor_quotas(on_demand, cpu="1", memory="1Gi"),
            make_flavor_quotas(spot, cpu="1", memory="1Gi"),
            preemption={"withinClusterQueue": "LowerPriority"},
        ),
    )
    cluster.create_active("localqueues", make_local_queue("main", ns, cq), ns)
    yield {"cluster_queue": cq, "on_demand": on_demand, "spot": spot}
    cluster.batch.delete_collection_namespaced_cron_job(ns)
    cluster.batch.delete_collection_namespaced_job(ns, propagation_policy="Background")
    for wl in cluster.list("workloads", ns):
        cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
    cluster.delete("localqueues", "main", ns)
    cluster.expect_deleted("clusterqueues", cq)
    cluster.expect_deleted("resourceflavors", on_demand)
    cluster.expect_deleted("resourceflavors", spot)


@kueue_case(GO, "Kueue Creating a Job With Queueing Should unsuspend a job and set nodeSelectors")
def test_unsuspends_a_job_and_sets_node_selectors(
    cluster: Cluster, ns: str, queueing: dict[str, str]
) -> None:
    job = cluster.batch.create_namespaced_job(ns, sample_job(ns, args=BEHAVIOR_EXIT_FAST))
    cluster.expect_job_unsuspended_with_node_selectors(
        "test-job", ns, {"instance-type": "on-demand"}
    )
    wl_name = cluster.workload_for_job(job, ns)
    eventually(
        lambda: is_finished(cluster.workload(wl_name, ns)), LONG_TIMEOUT, "the workload to finish"
    )


@kueue_case(
    GO,
    "Kueue Creating a Job With Queueing Should finish workload if the job is deleted with "
    "PropagationPolicy=DeletePropagationOrphan",
)
def test_finishes_the_workload_of_a_job_deleted_with_orphan(
    cluster: Cluster, ns: str, queueing: dict[str, str]
) -> None:
    job = cluster.batch.create_namespaced_job(ns, make_job("job", ns, queue="main"))
    wl_name = cluster.workload_for_job(job, ns)
    eventually(lambda: is_admitted(cluster.workload(wl_name, ns)), TIMEOUT, "admission")
    cluster.batch.delete_namespaced_job("job", ns, propagation_policy="Orphan")

    def finished_without_finalizers() -> bool:
        wl = cluster.workload(wl_name, ns)
        assert wl is not None, "the workload is gone"
        assert is_finished(wl), "not finished"
        assert not wl["metadata"].get("finalizers"), wl["metadata"].get("finalizers")
        return True

    eventually(finished_without_finalizers, TIMEOUT, "the workload to finish, finalizers gone")
    for pod in cluster.core.list_namespaced_pod(ns).items:
        cluster.core.delete_namespaced_pod(pod.metadata.name, ns, grace_period_seconds=0)


@kueue_case(GO, "Kueue Creating a Job With Queueing Should allow to schedule Jobs via CronJob")
def test_schedules_jobs_via_cron_job(cluster: Cluster, ns: str, queueing: dict[str, str]) -> None:
    container = {
        "name": "c",
        "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
        "args": BEHAVIOR_EXIT_FAST,
        "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}},
    }
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "test-cronjob", "namespace": ns},
        "spec": {
            "schedule": "* * * * *",
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {
                "metadata": {"labels": {"kueue.x-k8s.io/queue-name": "main"}},
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "terminationGracePeriodSeconds": 1,
                            "containers": [container],
                        }
                    }
                },
            },
        },
    }
    created = cluster.batch.create_namespaced_cron_job(ns, cron)
    # "Patch the last start time to be in the past so that it starts immediately".
    past = created.metadata.creation_timestamp.timestamp() - 120
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(past))
    cluster.batch.patch_namespaced_cron_job_status(
        "test-cronjob", ns, {"status": {"lastScheduleTime": stamp}}
    )
    jobs = eventually(
        lambda: cluster.batch.list_namespaced_job(ns).items, MEDIUM_TIMEOUT, "the CronJob's Job"
    )
    assert len(jobs) == 1, [j.metadata.name for j in jobs]
    job = jobs[0]
    cluster.expect_job_unsuspended_with_node_selectors(
        job.metadata.name, ns, {"instance-type": "on-demand"}
    )
    wl = cluster.workload(cluster.workload_for_job(job, ns), ns)
    assert has_quota_reservation(wl), wl
    assert wl["status"]["admission"]["clusterQueue"] == queueing["cluster_queue"]
    cluster.batch.delete_namespaced_cron_job("test-cronjob", ns)


@kueue_case(GO, "Kueue Creating a Job With Queueing Should run with prebuilt workload")
def test_runs_with_a_prebuilt_workload(cluster: Cluster, ns: str, queueing: dict[str, str]) -> None:
    job = sample_job(ns, args=BEHAVIOR_WAIT_FOR_DELETION_FAIL_ON_EXIT)
    job["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] = "prebuilt-wl"
    job["spec"]["backoffLimit"] = 0
    container = job["spec"]["template"]["spec"]["containers"][0]
    set_container_defaults(container)
    wl = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "prebuilt-wl",
            "namespace": ns,
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
        },
        "spec": {
            "queueName": "main",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
                }
            ],
        },
    }
    cluster.create("workloads", wl, ns)
    created = cluster.batch.create_namespaced_job(ns, job)

    def adopted() -> bool:
        workload = cluster.workload("prebuilt-wl", ns)
        assert workload is not None
        live = cluster.api.sanitize_for_serialization(
            cluster.batch.read_namespaced_job("test-job", ns).spec.template.spec.containers
        )
        assert workload["spec"]["podSets"][0]["template"]["spec"]["containers"] == live
        owners = workload["metadata"].get("ownerReferences") or []
        assert any(o["uid"] == created.metadata.uid and o["kind"] == "Job" for o in owners), owners
        return True

    eventually(adopted, TIMEOUT, "the prebuilt workload adopted by the job")
    cluster.expect_job_unsuspended_with_node_selectors(
        "test-job", ns, {"instance-type": "on-demand"}
    )
    eventually(
        lambda: cluster.batch.read_namespaced_job("test-job", ns).status.active == 1,
        MEDIUM_TIMEOUT,
        "one active pod",
    )

    def queue_labels() -> bool:
        pods = cluster.core.list_namespaced_pod(ns, label_selector="job-name=test-job").items
        assert pods, "no pods"
        for pod in pods:
            labels = pod.metadata.labels or {}
            assert labels.get("kueue.x-k8s.io/cluster-queue-name") == queueing["cluster_queue"], (
                labels
            )
            assert labels.get("kueue.x-k8s.io/local-queue-name") == "main", labels
        return True

    eventually(queue_labels, TIMEOUT, "the pods' queue labels")
    for pod in cluster.core.list_namespaced_pod(ns).items:
        cluster.core.delete_namespaced_pod(pod.metadata.name, ns)
    eventually(
        lambda: is_finished(cluster.workload("prebuilt-wl", ns)),
        LONG_TIMEOUT,
        "the workload to finish",
    )

    def finalized_or_gone() -> bool:
        workload = cluster.workload("prebuilt-wl", ns)
        return workload is None or not workload["metadata"].get("finalizers")

    eventually(finalized_or_gone, TIMEOUT, "the workload finalized or gone")


@kueue_case(
    GO,
    "Kueue Creating a Job With Queueing Should readmit preempted job with workloadPriorityClass "
    "into a separate flavor",
)
def test_readmits_a_preempted_job_into_a_separate_flavor(
    cluster: Cluster, ns: str, queueing: dict[str, str]
) -> None:
    cluster.batch.create_namespaced_job(ns, sample_job(ns))
    high = f"high-workload-{ns}"
    cluster.create(
        "workloadpriorityclasses",
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
         "metadata": {"name": high}, "value": 300},
    )  # fmt: skip
    try:
        cluster.expect_job_unsuspended_with_node_selectors(
            "test-job", ns, {"instance-type": "on-demand"}
        )
        preemptor = make_job("high-with-wpc", ns, queue="main", requests={"cpu": "1"})
        preemptor["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = high
        preemptor["spec"]["template"]["spec"]["nodeSelector"] = {"instance-type": "on-demand"}
        cluster.batch.create_namespaced_job(ns, preemptor)
        cluster.expect_job_unsuspended_with_node_selectors(
            "high-with-wpc", ns, {"instance-type": "on-demand"}
        )
        cluster.expect_job_unsuspended_with_node_selectors(
            "test-job", ns, {"instance-type": "spot"}
        )
    finally:
        cluster.delete("workloadpriorityclasses", high)


@kueue_case(
    GO,
    "Kueue Creating a Job With Queueing Should partially admit the Job if configured and not fully fits",
)
def test_partially_admits_a_job_that_does_not_fully_fit(
    cluster: Cluster, ns: str, queueing: dict[str, str]
) -> None:
    job = make_job(
        "job", ns, queue="main", args=BEHAVIOR_EXIT_FAST, requests={"cpu": "500m"},
        parallelism=3, completions=4,
    )  # fmt: skip
    job["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": "1"}
    created = cluster.batch.create_namespaced_job(ns, job)
    cluster.expect_job_unsuspended_with_node_selectors("job", ns, {"instance-type": "on-demand"})

    def counts() -> bool:
        spec = cluster.batch.read_namespaced_job("job", ns).spec
        assert (spec.parallelism, spec.completions) == (2, 4), (spec.parallelism, spec.completions)
        return True

    eventually(counts, TIMEOUT, "parallelism 2 and completions 4")
    wl_name = cluster.workload_for_job(created, ns)
    eventually(
        lambda: is_finished(cluster.workload(wl_name, ns)), LONG_TIMEOUT, "the workload to finish"
    )


def _forbidden_update(cluster: Cluster, name: str, ns: str, label: str, value: str) -> None:
    """The update of a running (or queued) Job's label that Kueue's webhook refuses."""
    job = cluster.batch.read_namespaced_job(name, ns)
    job.metadata.labels[label] = value
    with pytest.raises(client.ApiException) as refused:
        cluster.batch.replace_namespaced_job(name, ns, job)
    assert refused.value.status == 403, refused.value.body


PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


@kueue_case(
    GO,
    "Kueue Creating a Job With Queueing Should allow updating the workload's priority through the job",
)
def test_updates_the_workloads_priority_through_the_job(
    cluster: Cluster, ns: str, queueing: dict[str, str]
) -> None:
    classes = {f"{n}-priority-{ns}": v for n, v in (("low", 100), ("mid", 200), ("high", 300))}
    for name, value in classes.items():
        cluster.create("workloadpriorityclasses", make_workload_priority_class(name, value))
    low, mid, high = classes
    try:
        one = sample_job(ns)
        one["metadata"]["labels"][PRIORITY_LABEL] = mid
        one["spec"]["template"]["spec"]["nodeSelector"] = {"instance-type": "on-demand"}
        cluster.batch.create_namespaced_job(ns, one)
        cluster.expect_job_unsuspended_with_node_selectors(
            "test-job", ns, {"instance-type": "on-demand"}
        )

        def queue_labels() -> bool:
            pods = cluster.core.list_namespaced_pod(ns, label_selector="job-name=test-job").items
            assert pods, "no pods"
            for pod in pods:
                labels = pod.metadata.labels or {}
                assert labels.get("kueue.x-k8s.io/cluster-queue-name") == queueing["cluster_queue"]
                assert labels.get("kueue.x-k8s.io/local-queue-name") == "main"
            return True

        eventually(queue_labels, TIMEOUT, "the pods' queue labels")
        eventually(lambda: _forbidden_update(cluster, "test-job", ns, PRIORITY_LABEL, "") or True,
                   TIMEOUT, "the priority label refused while running")  # fmt: skip
        two = make_job("test-job-2", ns, queue="main", requests={"cpu": "1", "memory": "20Mi"})
        two["metadata"]["labels"][PRIORITY_LABEL] = low
        two["spec"]["template"]["spec"]["nodeSelector"] = {"instance-type": "on-demand"}
        created = cluster.batch.create_namespaced_job(ns, two)
        wl_name = cluster.workload_for_job(created, ns)

        def waiting() -> bool:
            assert cluster.batch.read_namespaced_job("test-job-2", ns).spec.suspend is True
            wl = cluster.workload(wl_name, ns)
            assert wl is not None
            assert not has_quota_reservation(wl), wl
            return True

        eventually(waiting, TIMEOUT, "job-two queued without quota")
        job = cluster.batch.read_namespaced_job("test-job-2", ns)
        job.metadata.labels[PRIORITY_LABEL] = high
        cluster.batch.replace_namespaced_job("test-job-2", ns, job)
        eventually(
            lambda: (cluster.workload(wl_name, ns) or {}).get("spec", {}).get("priority") == 300,
            TIMEOUT,
            "the workload's priority 300",
        )
        eventually(
            lambda: cluster.batch.read_namespaced_job("test-job-2", ns).spec.suspend is False,
            MEDIUM_TIMEOUT,
            "job-two running",
        )
    finally:
        for name in classes:
            cluster.delete("workloadpriorityclasses", name)


@kueue_case(GO, "Kueue Creating a Job With Queueing Should deduplicate env variables")
def test_deduplicates_env_variables(cluster: Cluster, ns: str, queueing: dict[str, str]) -> None:
    high = f"high-{ns}"
    cluster.create("workloadpriorityclasses", make_workload_priority_class(high, 100))
    try:
        low_job = make_job("low", ns, queue="main")
        low_job["spec"]["template"]["spec"]["nodeSelector"] = {"instance-type": "on-demand"}
        low_job["spec"]["template"]["spec"]["containers"] = [
            {"name": "c", "image": "sleep", "resources": {"requests": {"cpu": "1"}},
             "env": [{"name": "TEST_ENV", "value": "test1"}, {"name": "TEST_ENV", "value": "test2"}]}
        ]  # fmt: skip
        created_low = cluster.batch.create_namespaced_job(ns, low_job)
        low_wl = cluster.workload_for_job(created_low, ns)

        def deduplicated() -> bool:
            wl = cluster.workload(low_wl, ns)
            assert wl is not None
            [pod_set] = wl["spec"]["podSets"]
            [container] = pod_set["template"]["spec"]["containers"]
            assert container.get("env") == [{"name": "TEST_ENV", "value": "test2"}], container
            assert is_admitted(wl)
            return True

        eventually(deduplicated, TIMEOUT, "the low workload, env deduplicated, admitted")
        high_job = make_job("high", ns, queue="main", requests={})
        high_job["metadata"]["labels"][PRIORITY_LABEL] = high
        high_job["spec"]["template"]["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": "1"}
        }
        high_job["spec"]["template"]["spec"]["nodeSelector"] = {"instance-type": "on-demand"}
        cluster.batch.create_namespaced_job(ns, high_job)

        def preempted() -> bool:
            wl = cluster.workload(low_wl, ns)
            assert condition(wl, "Evicted").get("status") == "True", wl
            assert condition(wl, "Preempted").get("status") == "True", wl
            return True

        eventually(preempted, TIMEOUT, "the low workload preempted")
        env = cluster.batch.read_namespaced_job("low", ns).spec.template.spec.containers[0].env
        assert [(e.name, e.value) for e in env] == [("TEST_ENV", "test1"), ("TEST_ENV", "test2")]

        def not_updated() -> None:
            for event in cluster.core.list_namespaced_event(ns).items:
                assert event.reason != "UpdatedWorkload", event.message

        consistently(not_updated, 0.3)
    finally:
        cluster.delete("workloadpriorityclasses", high)


@kueue_case(
    GO,
    "Kueue Creating a Job With Queueing Should not allow removing the workload's priority through the job",
)
def test_refuses_removing_the_workloads_priority_through_the_job(
    cluster: Cluster, ns: str, queueing: dict[str, str]
) -> None:
    sample = f"sample-priority-{ns}"
    cluster.create("workloadpriorityclasses", make_workload_priority_class(sample, 100))
    try:
        job = sample_job(ns)
        job["metadata"]["labels"][PRIORITY_LABEL] = sample
        job["spec"]["template"]["spec"]["nodeSelector"] = {"instance-type": "on-demand"}
        container = job["spec"]["template"]["spec"]["containers"][0]
        container["resources"] = {"requests": {"cpu": "2", "memory": "20Mi"},
                                  "limits": {"cpu": "2", "memory": "20Mi"}}  # fmt: skip
        created = cluster.batch.create_namespaced_job(ns, job)
        eventually(
            lambda: cluster.batch.read_namespaced_job("test-job", ns).spec.suspend is True,
            TIMEOUT,
            "the job suspended",
        )
        wl_name = cluster.workload_for_job(created, ns)

        def with_priority_class() -> bool:
            wl = cluster.workload(wl_name, ns)
            assert wl is not None
            ref = wl["spec"].get("priorityClassRef") or {}
            assert ref.get("name") == sample, wl["spec"]
            assert wl["spec"].get("priority") == 100, wl["spec"]
            return True

        eventually(with_priority_class, TIMEOUT, "the workload's priority class")
        eventually(lambda: not has_quota_reservation(cluster.workload(wl_name, ns)), TIMEOUT, "")
        eventually(lambda: _forbidden_update(cluster, "test-job", ns, PRIORITY_LABEL, "") or True,
                   TIMEOUT, "removing the priority refused")  # fmt: skip
    finally:
        cluster.delete("workloadpriorityclasses", sample)


@pytest.fixture
def two_step(cluster: Cluster, ns: str) -> Iterator[dict[str, str]]:
    """When("Creating a Job In a Twostepadmission Queue")'s BeforeEach and AfterEach."""
    check, on_demand, cq = f"check1-{ns}", f"on-demand-{ns}", f"cluster-queue-{ns}"
    cluster.create("admissionchecks", make_admission_check(check, "ac-controller"))
    set_admission_check_active(cluster, check)
    cluster.create(
        "resourceflavors", make_resource_flavor(on_demand, {"instance-type": "on-demand"})
    )
    cluster.create_active(
        "clusterqueues",
        make_cluster_queue(
            cq,
            make_flavor_quotas(on_demand, cpu="1", memory="1Gi"),
            admissionChecksStrategy={"admissionChecks": [{"name": check}]},
        ),
    )
    cluster.create_active("localqueues", make_local_queue("main", ns, cq), ns)
    yield {"check": check, "cluster_queue": cq}
    cluster.batch.delete_collection_namespaced_job(ns, propagation_policy="Background")
    for wl in cluster.list("workloads", ns):
        cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
    cluster.delete("localqueues", "main", ns)
    cluster.expect_deleted("clusterqueues", cq)
    cluster.expect_deleted("resourceflavors", on_demand)
    cluster.expect_deleted("admissionchecks", check)


def _check_added(cluster: Cluster, wl_name: str, ns: str, check: str) -> None:
    def added() -> bool:
        wl = cluster.workload(wl_name, ns)
        assert wl is not None
        names = {c["name"] for c in (wl.get("status") or {}).get("admissionChecks") or []}
        assert names == {check}, names
        return True

    eventually(added, TIMEOUT, "the check added to the workload")


@kueue_case(
    GO,
    "Kueue Creating a Job In a Twostepadmission Queue Should unsuspend a job only after all checks are cleared",
)
def test_unsuspends_a_job_only_after_all_checks_are_cleared(
    cluster: Cluster, ns: str, two_step: dict[str, str]
) -> None:
    created = cluster.batch.create_namespaced_job(ns, sample_job(ns, args=BEHAVIOR_EXIT_FAST))
    wl_name = cluster.workload_for_job(created, ns)
    _check_added(cluster, wl_name, ns, two_step["check"])

    def reserved() -> bool:
        wl = cluster.workload(wl_name, ns)
        assert has_quota_reservation(wl), wl
        assert wl["status"]["admission"]["clusterQueue"] == two_step["cluster_queue"]
        return True

    eventually(reserved, TIMEOUT, "quota reserved")

    def still_suspended() -> None:
        assert cluster.batch.read_namespaced_job("test-job", ns).spec.suspend is True

    consistently(still_suspended, 0.3)
    set_workloads_admission_check(cluster, wl_name, ns, two_step["check"], "Ready")
    cluster.expect_job_unsuspended_with_node_selectors(
        "test-job", ns, {"instance-type": "on-demand"}
    )
    eventually(
        lambda: is_finished(cluster.workload(wl_name, ns)), LONG_TIMEOUT, "the workload to finish"
    )


@kueue_case(
    GO,
    "Kueue Creating a Job In a Twostepadmission Queue Should suspend a job when its checks become invalid",
)
def test_suspends_a_job_when_its_checks_become_invalid(
    cluster: Cluster, ns: str, two_step: dict[str, str]
) -> None:
    created = cluster.batch.create_namespaced_job(ns, sample_job(ns))
    wl_name = cluster.workload_for_job(created, ns)
    _check_added(cluster, wl_name, ns, two_step["check"])
    set_workloads_admission_check(cluster, wl_name, ns, two_step["check"], "Ready")
    cluster.expect_job_unsuspended_with_node_selectors(
        "test-job", ns, {"instance-type": "on-demand"}
    )
    set_workloads_admission_check(cluster, wl_name, ns, two_step["check"], "Rejected")
    eventually(
        lambda: cluster.batch.read_namespaced_job("test-job", ns).spec.suspend is True,
        TIMEOUT,
        "the job suspended again",
    )


# ----- elastic Jobs (ElasticJobsViaWorkloadSlices) ---------------------------------------

ELASTIC = {"kueue.x-k8s.io/elastic-job": "true"}
FLAVOR_TOLERATION = {"key": "example.com/test-taint", "operator": "Exists", "effect": "NoSchedule"}


def _running_pods(cluster: Cluster, ns: str, job: str) -> list[Any]:
    """findRunningPods: the Job's pods in phase Running."""
    pods = cluster.core.list_namespaced_pod(
        ns, label_selector=f"batch.kubernetes.io/job-name={job}"
    ).items
    return [p for p in pods if p.status.phase == "Running"]


@pytest.fixture
def elastic_on_demand(cluster: Cluster, ns: str) -> Iterator[str]:
    """When("Creating an elastic Job with a ResourceFlavor that has nodeLabels and tolerations")'s
    BeforeEach and AfterEach."""
    flavor, cq = f"on-demand-{ns}", f"cluster-queue-{ns}"
    rf = make_resource_flavor(flavor, {"instance-type": "on-demand"})
    rf["spec"]["tolerations"] = [FLAVOR_TOLERATION]
    cluster.create("resourceflavors", rf)
    cluster.create_active(
        "clusterqueues", make_cluster_queue(cq, make_flavor_quotas(flavor, cpu="4", memory="4Gi"))
    )
    cluster.create_active("localqueues", make_local_queue("main", ns, cq), ns)
    yield ns
    cluster.batch.delete_collection_namespaced_job(ns, propagation_policy="Background")
    for wl in cluster.list("workloads", ns):
        cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
    cluster.delete("localqueues", "main", ns)
    cluster.expect_deleted("clusterqueues", cq)
    cluster.expect_deleted("resourceflavors", flavor)


@kueue_case(
    GO,
    "Kueue Creating an elastic Job with a ResourceFlavor that has nodeLabels and tolerations "
    "should inject flavor nodeLabels and tolerations into the Job and pods at admission and "
    "after scale-up",
)
def test_an_elastic_job_gets_its_flavors_labels_and_tolerations_before_and_after_scale_up(
    cluster: Cluster, ns: str, elastic_on_demand: str
) -> None:
    selector = {"instance-type": "on-demand"}
    job = make_job(
        "elastic-flavor-injection", ns, queue="main", requests={"cpu": "200m", "memory": "20Mi"},
        parallelism=2, completions=10,
    )  # fmt: skip
    job["metadata"]["annotations"] = dict(ELASTIC)
    cluster.batch.create_namespaced_job(ns, job)
    name = "elastic-flavor-injection"

    def one_admitted() -> dict:
        found = cluster.list("workloads", ns)
        assert len(found) == 1, f"{len(found)} workloads"
        assert is_admitted(found[0]), "not admitted"
        return found[0]

    old = eventually(one_admitted, MEDIUM_TIMEOUT, "the workload admitted")
    cluster.expect_job_unsuspended_with_node_selectors(name, ns, selector)

    def tolerated() -> bool:
        tolerations = cluster.batch.read_namespaced_job(name, ns).spec.template.spec.tolerations
        assert any(t.key == FLAVOR_TOLERATION["key"] for t in tolerations or []), tolerations
        return True

    eventually(tolerated, MEDIUM_TIMEOUT, "the flavor's toleration on the Job's template")

    def running(count: int) -> Callable[[], bool]:
        def check() -> bool:
            pods = _running_pods(cluster, ns, name)
            assert len(pods) == count, f"{len(pods)} running pods"
            for pod in pods:
                assert pod.spec.node_selector == selector, pod.spec.node_selector
                assert any(t.key == FLAVOR_TOLERATION["key"] for t in pod.spec.tolerations or [])
            ready = cluster.batch.read_namespaced_job(name, ns).status.ready
            assert ready == count, f"status.ready {ready}"
            return True

        return check

    eventually(running(2), LONG_TIMEOUT, "2 running pods with the flavor's placement")
    cluster.batch.patch_namespaced_job(name, ns, {"spec": {"parallelism": 3}})

    def replaced() -> bool:
        slices = [w for w in cluster.list("workloads", ns)
                  if w["metadata"]["name"] != old["metadata"]["name"]]  # fmt: skip
        assert len(slices) == 1, [w["metadata"]["name"] for w in slices]
        assert is_admitted(slices[0]), "the new slice is not admitted"
        assert is_finished(cluster.workload(old["metadata"]["name"], ns)), "old slice not finished"
        return True

    eventually(replaced, MEDIUM_TIMEOUT, "the new slice admitted and the old one finished")
    cluster.expect_job_unsuspended_with_node_selectors(name, ns, selector)
    eventually(tolerated, MEDIUM_TIMEOUT, "the flavor's toleration still on the template")
    eventually(running(3), LONG_TIMEOUT, "3 running pods with the flavor's placement")


@pytest.fixture
def elastic_scale_down_queue(cluster: Cluster, ns: str) -> Iterator[str]:
    """When("Scaling down an elastic Indexed Job with completed indexes")'s BeforeEach and
    AfterEach: one flavor of 2 cpu; yields the ClusterQueue's name."""
    flavor, cq = f"default-{ns}", f"cq-{ns}"
    cluster.create("resourceflavors", make_resource_flavor(flavor))
    cluster.create_active(
        "clusterqueues", make_cluster_queue(cq, make_flavor_quotas(flavor, cpu="2"))
    )
    cluster.create_active("localqueues", make_local_queue("main", ns, cq), ns)
    yield cq
    cluster.batch.delete_collection_namespaced_job(ns, propagation_policy="Background")
    for wl in cluster.list("workloads", ns):
        cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
    cluster.core.delete_collection_namespaced_pod(ns)
    cluster.delete("localqueues", "main", ns)
    cluster.expect_deleted("clusterqueues", cq)
    cluster.expect_deleted("resourceflavors", flavor)


def _reserved_milli_cpu(cluster: Cluster, cq: str) -> int:
    """clusterQueueReservedMilliCPU: the cpu reserved across the ClusterQueue's flavors."""
    total = 0
    for flavor in (cluster.get("clusterqueues", cq).get("status") or {}).get(
        "flavorsReservation"
    ) or []:
        for resource in flavor.get("resources") or []:
            if resource["name"] == "cpu":
                text = str(resource.get("total", "0"))
                total += int(text[:-1]) if text.endswith("m") else int(float(text) * 1000)
    return total


@kueue_case(
    GO,
    "Kueue Scaling down an elastic Indexed Job with completed indexes keeps the reserved quota "
    "equal to the running pods",
)
def test_an_elastic_indexed_job_scaled_down_reserves_only_its_running_pods(
    cluster: Cluster, ns: str, elastic_scale_down_queue: str
) -> None:
    name = "elastic-indexed-scale-down"
    job = make_job(name, ns, queue="main", requests={"cpu": "200m"}, parallelism=4,
                   completions=4)  # fmt: skip
    job["metadata"]["annotations"] = dict(ELASTIC)
    job["spec"]["completionMode"] = "Indexed"
    cluster.batch.create_namespaced_job(ns, job)

    def converged(pods: int) -> Callable[[], bool]:
        def check() -> bool:
            running = _running_pods(cluster, ns, name)
            assert len(running) == pods, f"{len(running)} running pods"
            reserved = _reserved_milli_cpu(cluster, elastic_scale_down_queue)
            assert reserved == 200 * pods, f"{reserved}m cpu reserved"
            return True

        return check

    eventually(converged(4), LONG_TIMEOUT, "4 pods running, 800m reserved")
    for index in ("0", "1"):
        wait_for_active_pods_and_terminate(
            cluster, ns, 1,
            f"batch.kubernetes.io/job-name={name},batch.kubernetes.io/job-completion-index={index}",
        )  # fmt: skip
    eventually(converged(2), LONG_TIMEOUT, "2 pods running, 400m reserved")

    cluster.batch.patch_namespaced_job(name, ns, {"spec": {"parallelism": 1}})
    eventually(converged(1), LONG_TIMEOUT, "1 pod running, 200m reserved")
