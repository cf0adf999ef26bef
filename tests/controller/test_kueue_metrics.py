"""Kueue's 60 metrics, scraped from a controller driven over the API double.

The table test reads Kueue v0.19.2's metrics reference (tests/data/kueue-metrics/metrics.md)
and checks each metric's name, type and label names against the scrape. The scrape is
prometheus_client's text exposition of the controller's registry, the bytes /metrics serves.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from extender.core.admission.pods_ready import RequeuingStrategy, WaitForPodsReady
from extender.core.config.kueue_config import LabelSelector, MetricsConfig
from extender.core.scheduling.admission_fair_sharing import AfsConfig
from extender.kube.api import resources as r
from extender.kube.api.metrics import Metrics
from extender.kube.controller.context import Settings
from tests.controller.conftest import Running, eventually

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "kueue-metrics" / "metrics.md"
CHECK = "ext-check"
ROLE = {"replica_role": "standalone"}

# Families the table test's scenario leaves without a series, and why; their label names
# are read from their definitions instead of from a sample.
NOT_IN_THE_SCENARIO = {
    # Kueue emits both only with its UnadmittedWorkloadsObservability gate (Beta, off).
    "kueue_unadmitted_workloads": "off by Kueue's default",
    "kueue_local_queue_unadmitted_workloads": "off by Kueue's default",
    # Fed in tests/controller/test_elastic.py (an elastic Job scaled up).
    "kueue_replaced_workload_slices_total": "no elastic job here",
    # Fed in tests/controller/test_multikueue.py (worker clusters are doubles of their own).
    "multikueue_workloads_dispatched_total": "no worker cluster here",
    "multikueue_workloads_admitted_total": "no worker cluster here",
    # Needs two preemptors for the same victims in one cycle: tests/unit/core/scheduling/
    # test_preemption.py counts the skip.
    "kueue_admission_cycle_preemption_skips": "no contention between preemptors here",
}


def reference() -> dict[str, tuple[str, set[str]]]:
    """Kueue's table: metric name -> (type, label names), from every table row."""
    rows = {}
    for line in REFERENCE.read_text().splitlines():
        if not line.startswith("| `"):
            continue
        cells = line.split("|")
        name = cells[1].strip().strip("`")
        kind = cells[2].strip().lower()
        labels = set(re.findall(r"(?:^|<br>)\s*`([a-z_]+)`:", cells[-2].strip()))
        rows[name] = (kind, labels)
    return rows


def scrape(metrics: Metrics) -> dict[str, tuple[str, set[str], int]]:
    """The exposition: family name -> (type, label names seen, samples)."""
    families: dict[str, tuple[str, set[str], int]] = {}
    for line in generate_latest(metrics.registry).decode().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            families[name] = (kind, set(), 0)
        elif line and not line.startswith("#"):
            sample = line.split("{", 1)[0].split(" ", 1)[0]
            family = sample if sample in families else sample.rsplit("_", 1)[0]
            kind, labels, count = families[family]
            if "{" in line:
                labels |= set(re.findall(r'([a-zA-Z_]\w*)="', line.split("{", 1)[1]))
            families[family] = (kind, labels - {"le"}, count + 1)
    return families


def start(cluster: Any, metrics: Metrics, **settings: Any) -> Running:
    """A controller in this process, as conftest's, with the Metrics given."""
    config = Settings(status_interval=0.05, **settings)
    return Running(cluster.controller_client(), config, metrics)


@pytest.fixture
def controllers():
    started: list[Running] = []
    yield started
    for running in started:
        running.halt()


def kueue(kind: str, name: str, spec: dict[str, Any], namespace: str | None = None) -> dict:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, "metadata": meta, "spec": spec}


def cluster_queue(name: str, cpu: str, borrowing: str | None = None, **spec: Any) -> dict:
    quota = {"name": "cpu", "nominalQuota": cpu}
    if borrowing is not None:
        quota["borrowingLimit"] = borrowing
    return kueue(
        "ClusterQueue",
        name,
        {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": "default-flavor",
                            "resources": [
                                quota,
                                {"name": "memory", "nominalQuota": "64Gi"},
                            ],
                        }
                    ],
                }
            ],
            "preemption": {"withinClusterQueue": "LowerPriority"},
            **spec,
        },
    )


def local_queue(name: str, cq: str, labels: dict[str, str] | None = None) -> dict:
    obj = kueue("LocalQueue", name, {"clusterQueue": cq}, "default")
    if labels:
        obj["metadata"]["labels"] = labels
    return obj


def priorities() -> list[dict]:
    return [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        for name, value in (("low", 10), ("high", 100))
    ]


def job(cluster: Any, name: str, cpu: str, priority: str, duration: str, queue="user-queue"):
    labels = {"kueue.x-k8s.io/priority-class": priority}
    return cluster.job(name, cpu, queue=queue, duration=duration, labels=labels)


def running(cluster: Any, name: str) -> bool:
    found = cluster.get("jobs", name, "default")
    return found is not None and found["spec"]["suspend"] is False


def set_ready(cluster: Any, name: str) -> None:
    def update(status: dict) -> None:
        status["ready"] = 1

    assert cluster.api.update_status("jobs", "default", name, update) is not None


def conditions(cluster: Any, created: dict) -> dict[str, dict]:
    wl = cluster.workload_of(created) or {}
    return {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or []}


def is_true(cluster: Any, created: dict, kind: str) -> bool:
    return conditions(cluster, created).get(kind, {}).get("status") == "True"


def scenario_objects() -> list[dict]:
    check = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": CHECK},
        "spec": {"controllerName": "example.com/checker"},
    }
    return [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "default-flavor"},
            "spec": {},
        },
        kueue("Cohort", "research", {"parentName": "org"}),
        cluster_queue(
            "team-a",
            "4",
            "0",  # it borrows nothing: the high priority job preempts the low one
            cohortName="research",
            admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"},
        ),
        cluster_queue(
            "team-b",
            "4",
            cohortName="research",
            admissionChecksStrategy={"admissionChecks": [{"name": CHECK}]},
        ),
        check,
        local_queue("user-queue", "team-a"),
        local_queue("checked", "team-b"),
        *priorities(),
    ]


def activate_check(cluster: Any) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {
        "type": "Active",
        "status": "True",
        "reason": "Active",
        "message": "The admission check is active",
        "lastTransitionTime": now,
    }
    cluster.admin.patch(
        r.ADMISSION_CHECKS, CHECK, {"status": {"conditions": [condition]}}, subresource="status"
    )


def ready_check(cluster: Any, workload: dict) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    entry = {"name": CHECK, "state": "Ready", "lastTransitionTime": now, "message": ""}
    cluster.admin.patch(
        r.WORKLOADS,
        workload["metadata"]["name"],
        {"status": {"admissionChecks": [entry]}},
        "default",
        subresource="status",
    )


def small_pod() -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "little", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "c",
                    "image": "busybox:1.36",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }
            ],
        },
    }


def test_every_metric_of_kueues_reference_is_scraped_with_its_type_and_labels(cluster, controllers):
    cluster.apply(*scenario_objects())
    activate_check(cluster)
    metrics = Metrics(config=MetricsConfig(cluster_queue_resources=True))
    controllers.append(
        start(
            cluster,
            metrics,
            fair_sharing=True,
            admission_fair_sharing=AfsConfig(600.0, 1.0),
            wait_for_pods_ready=WaitForPodsReady(
                timeout=600.0,
                block_admission=False,
                recovery_timeout=None,
                requeuing=RequeuingStrategy("Eviction", None, 60, 3600),
            ),
        )
    )
    # Admitted, its pods ready, then preempted by a higher priority that runs and finishes.
    low = job(cluster, "low", "3", "low", "600s")
    eventually(lambda: running(cluster, "low"), what="the low job to start")
    set_ready(cluster, "low")
    eventually(lambda: is_true(cluster, low, "PodsReady"), what="its pods ready")
    high = job(cluster, "high", "3", "high", "2s")
    eventually(lambda: is_true(cluster, high, "Finished"), timeout=20, what="the high job done")
    # Quota reserved, then admitted once the test (the check's controller) says Ready.
    checked = job(cluster, "checked", "1", "low", "600s", queue="checked")
    held = eventually(lambda: is_true(cluster, checked, "QuotaReserved"), what="a reservation")
    assert held
    ready_check(cluster, cluster.workload_of(checked))
    eventually(lambda: is_true(cluster, checked, "Admitted"), what="the checked admission")
    # A pod, gated until admitted.
    cluster.admin.create(r.PODS, small_pod(), "default")

    rows = reference()
    assert len(rows) == 60
    wanted = {name for name in rows if name not in NOT_IN_THE_SCENARIO}

    def sampled() -> set[str]:
        families = scrape(metrics)
        return {name for name in wanted if families.get(name, ("", set(), 0))[2] > 0}

    missing: set[str] = set()

    def complete() -> bool:
        missing.clear()
        missing.update(wanted - sampled())
        return not missing

    try:
        eventually(complete, timeout=20)
    except AssertionError:
        raise AssertionError(f"no series of {sorted(missing)}") from None
    families = scrape(metrics)
    for name, (kind, labels) in rows.items():
        assert name in families, f"{name} is not scraped"
        assert families[name][0] == kind, f"{name}: {families[name][0]}, Kueue's is {kind}"
        if name in NOT_IN_THE_SCENARIO:
            assert families[name][2] == 0, f"{name} has series: take it off the list"
            got = set(metrics.families.label_names[name])
        else:
            got = families[name][1]
        assert got == labels, f"{name}: labels {sorted(got)}, Kueue's are {sorted(labels)}"


def value(metrics: Metrics, sample: str, /, **labels: str) -> float:
    found = metrics.registry.get_sample_value(sample, {**labels, **ROLE})
    return found or 0.0


def test_counters_and_gauges_follow_admissions_preemptions_evictions_and_finishes(
    cluster, controllers
):
    selected = {"metrics": "on"}
    cluster.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "default-flavor"},
            "spec": {},
        },
        cluster_queue("team-a", "4", cohortName="research"),
        local_queue("user-queue", "team-a", selected),
        local_queue("unwatched", "team-a"),  # not picked by localQueueSelector
        *priorities(),
    )
    selector = LabelSelector((("metrics", "on"),), ())
    metrics = Metrics(
        config=MetricsConfig(cluster_queue_resources=True, local_queue_selector=selector)
    )
    controllers.append(start(cluster, metrics))
    cq = {"cluster_queue": "team-a"}
    lq = {"name": "user-queue", "namespace": "default"}
    res = {"cohort": "research", **cq, "flavor": "default-flavor", "resource": "cpu"}

    # 1. admitted: counted once, in the ClusterQueue, its LocalQueue and its cohort.
    low = job(cluster, "low", "3", "low", "600s")
    eventually(lambda: running(cluster, "low"), what="the low job to start")
    low_pc = {"priority_class": "low"}
    assert value(metrics, "kueue_admitted_workloads_total", **cq, **low_pc) == 1
    assert value(metrics, "kueue_quota_reserved_workloads_total", **cq, **low_pc) == 1
    assert value(metrics, "kueue_local_queue_admitted_workloads_total", **lq, **low_pc) == 1
    cohort = {"cohort": "research", **low_pc}
    assert value(metrics, "kueue_cohort_subtree_admitted_workloads_total", **cohort) == 1
    assert value(metrics, "kueue_admission_wait_time_seconds_count", **cq, **low_pc) == 1
    eventually(
        lambda: value(metrics, "kueue_cluster_queue_resource_usage", **res) == 3.0,
        what="the usage gauge",
    )
    assert value(metrics, "kueue_reserving_active_workloads", **cq) == 1
    assert value(metrics, "kueue_admitted_active_workloads", **cq) == 1
    assert value(metrics, "kueue_local_queue_admitted_active_workloads", **lq) == 1
    assert value(metrics, "kueue_cluster_queue_nominal_quota", **res) == 4.0
    assert value(metrics, "kueue_cluster_queue_borrowing_limit", **res) == float("inf")
    assert value(metrics, "kueue_cohort_subtree_quota", cohort="research", flavor="default-flavor",
                 resource="cpu") == 4.0  # fmt: skip
    assert value(metrics, "kueue_cluster_queue_status", **cq, status="active") == 1
    assert value(metrics, "kueue_cluster_queue_status", **cq, status="pending") == 0

    # 2. preempted by a higher priority: the victim's eviction is counted in its ClusterQueue
    #    (and once, by reason and cause), the preemption under the preemptor's ClusterQueue.
    high = job(cluster, "high", "3", "high", "600s")
    eventually(lambda: running(cluster, "high"), what="the high job to start")
    evicted = {**cq, "reason": "Preempted", "underlying_cause": "", **low_pc}
    assert value(metrics, "kueue_evicted_workloads_total", **evicted) == 1
    assert value(metrics, "kueue_evicted_workloads_once_total", **evicted) == 1
    lq_evicted = {**lq, "reason": "Preempted", "underlying_cause": "", **low_pc}
    assert value(metrics, "kueue_local_queue_evicted_workloads_total", **lq_evicted) == 1
    preempted = {"preempting_cluster_queue": "team-a", "reason": "InClusterQueue"}
    assert value(metrics, "kueue_preempted_workloads_total", **preempted) == 1
    latency = {**cq, "reason": "Preempted"}
    assert value(metrics, "kueue_workload_eviction_latency_seconds_count", **latency) == 1

    def pending(sample: str, **labels: str) -> float:
        return sum(value(metrics, sample, **labels, status=s) for s in ("active", "inadmissible"))

    # Back in the queue (set aside as inadmissible once a cycle found no room for it).
    eventually(
        lambda: pending("kueue_pending_workloads", **cq) == 1, what="the victim back in the queue"
    )
    assert pending("kueue_local_queue_pending_workloads", **lq) == 1
    assert value(metrics, "kueue_admitted_workloads_total", **cq, priority_class="high") == 1
    wl = cluster.workload_of(low)
    assert wl["status"]["schedulingStats"]["evictions"] == [
        {"reason": "Preempted", "underlyingCause": "", "count": 1}
    ]

    # 3. the preemptor finishes: counted, and its finished Workload is in the gauges while
    #    it exists; the victim is admitted again (its eviction is not counted once more).
    cluster.api.update_status("jobs", "default", "high", _complete)
    eventually(lambda: is_true(cluster, high, "Finished"), what="the high job done")
    assert value(metrics, "kueue_finished_workloads_total", **cq, priority_class="high") == 1
    assert value(metrics, "kueue_local_queue_finished_workloads_total", **lq,
                 priority_class="high") == 1  # fmt: skip
    eventually(lambda: running(cluster, "low"), what="the low job to start again")
    assert value(metrics, "kueue_admitted_workloads_total", **cq, **low_pc) == 2
    assert value(metrics, "kueue_evicted_workloads_once_total", **evicted) == 1
    eventually(
        lambda: (
            value(metrics, "kueue_finished_workloads", **cq) == 1
            and value(metrics, "kueue_local_queue_finished_workloads", **lq) == 1
            and pending("kueue_pending_workloads", **cq) == 0
        ),
        what="the gauges after the finish",
    )

    # The LocalQueue the selector does not pick has no series; a queue's series go with it.
    unwatched = {"name": "unwatched", "namespace": "default"}
    assert metrics.registry.get_sample_value(
        "kueue_local_queue_status", {**unwatched, "active": "True", **ROLE}
    ) is None  # fmt: skip
    assert value(metrics, "kueue_local_queue_status", **lq, active="True") == 1
    cluster.admin.delete(r.LOCAL_QUEUES, "user-queue", "default")
    eventually(
        lambda: (
            not any(
                s.labels.get("name") == "user-queue"
                for family in metrics.registry.collect()
                for s in family.samples
            )
        ),
        what="the LocalQueue's series to go",
    )


def _complete(status: dict) -> None:
    """What kube-controller-manager writes when a Job's pods succeeded (as the double's)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status.pop("active", None)
    status["succeeded"] = 1
    status["completionTime"] = now
    status.setdefault("conditions", []).extend(
        {
            "type": kind,
            "status": "True",
            "reason": "CompletionsReached",
            "message": "Reached expected number of succeeded pods",
            "lastProbeTime": now,
            "lastTransitionTime": now,
        }
        for kind in ("SuccessCriteriaMet", "Complete")
    )
