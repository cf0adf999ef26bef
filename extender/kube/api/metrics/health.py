"""Kueue's health metrics: admission attempts, Workload creation, gate removal, MultiKueue."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata

from prometheus_client import Gauge

from extender.core.config.custom_labels import CLUSTER_QUEUE, LOCAL_QUEUE
from extender.kube.api.metrics.families import Custom, Families, exponential_buckets

_RESULT = """
The label 'result' can have the following values:
- 'success' means that at least one workload was admitted.,
- 'inadmissible' means that no workload was admitted."""
_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}  # Go's GOARCH names


def build_info() -> tuple[str, str, str, str, str, str]:
    """kueue_build_info's labels, filled with Tower's build: its version, the commit and
    date an image records (TOWER_GIT_COMMIT, TOWER_BUILD_DATE), the Python it runs on in
    go_version, its implementation as the compiler, and Go's os/arch."""
    try:
        version = "v" + metadata.version("kueue-tower")
    except metadata.PackageNotFoundError:
        version = "unknown"
    machine = platform.machine().lower()
    return (
        version,
        os.environ.get("TOWER_GIT_COMMIT", "unknown"),
        os.environ.get("TOWER_BUILD_DATE", "unknown"),
        f"python{platform.python_version()}",
        platform.python_implementation().lower(),
        f"{sys.platform}/{_ARCH.get(machine, machine)}",
    )


class HealthMetrics:
    """Kueue's health group, and kueue_build_info (7 of Kueue's 60)."""

    def __init__(self, f: Families, *, creation_latency: bool) -> None:
        self.attempts_total = f.counter(
            "kueue_admission_attempts_total",
            "The total number of attempts to admit workloads.\nEach admission attempt might "
            "try to admit more than one workload." + _RESULT,
            ["result"],
        )
        self.attempt_duration = f.histogram(
            "kueue_admission_attempt_duration_seconds",
            "The latency of an admission attempt." + _RESULT,
            ["result"],
        )
        self.dispatched = f.counter(
            "multikueue_workloads_dispatched_total",
            "The total number of remote workloads created by the MultiKueue manager on a "
            "worker cluster, per 'cluster_queue' and 'cluster'.",
            ["cluster_queue", "cluster"],
        )
        self.admitted_on_worker = f.counter(
            "multikueue_workloads_admitted_total",
            "The total number of remote workload admissions on a worker cluster, per "
            "'cluster_queue' and 'cluster'. A workload may be counted more than once if it is "
            "evicted and re-admitted.",
            ["cluster_queue", "cluster"],
        )
        names = ("git_version", "git_commit", "build_date", "go_version", "compiler", "platform")
        info = Gauge(
            "kueue_build_info",
            "Kueue build information. 1 labeled by git version, git commit, build date, go "
            "version, compiler, platform",
            names,
            registry=None,
        )
        info.labels(*build_info()).set(1)
        f.add(info, names)
        # Kueue registers it only with its MetricForWorkloadCreationLatency gate (Beta, on).
        self.creation_latency = (
            f.histogram(
                "kueue_workload_creation_latency_seconds",
                "The time between a job was created until its workload was created, per "
                "'job_kind'. Entries are only recorded for objects with generation 1.",
                ["job_kind"],
                exponential_buckets(0.01, 2, 11),
                custom=Custom((LOCAL_QUEUE,)),
            )
            if creation_latency
            else None
        )
        self.gate_removal = f.histogram(
            "kueue_pod_scheduling_gate_removal_seconds",
            "Duration from Workload admission to removal of a Pod scheduling gate.",
            ["name", "cluster_queue", "is_group"],
            custom=Custom((CLUSTER_QUEUE,), ("cluster_queue",)),
        )
