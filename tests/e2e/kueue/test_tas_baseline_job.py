"""Kueue v0.19.2 test/e2e/tas/baseline/job_test.go, ported case by case.

The eight kind workers of Kueue's TAS cluster are stand-in Nodes (tests/e2e/kueue/tas.py);
the ClusterQueue holds 8 example.com/gpu of the TAS flavor, one a node."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.tas import (
    BLOCK,
    EXTRA_RESOURCE,
    HOSTNAME,
    JOB_INDEX,
    PREFERRED,
    RACK,
    REQUIRED,
    UNCONSTRAINED,
    domains,
    expect_job_unsuspended,
    expect_scheduled,
    hostname_assignment,
    kind_workers,  # noqa: F401 (the module's nodes, by usefixtures)
    pods_by_index,
    tas_job,
    tas_queues,
    topology_assignment,
)
from tests.e2e.kueue.util import (
    BEHAVIOR_EXIT_FAST,
    BEHAVIOR_WAIT_FOR_DELETION,
    KUEUE,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    Cluster,
    consistently,
    eventually,
    has_quota_reservation,
    is_finished,
)

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("kind_workers")]
GO = "tas/baseline/job_test.go"
WHEN = "TopologyAwareScheduling for Job Creating a Job "
GPU = {EXTRA_RESOURCE: "1"}
REPLACEMENT_FOR = f"{KUEUE}/workload-slice-replacement-for"


@pytest.fixture
def queue(cluster: Cluster, ns: str) -> Iterator[str]:
    with tas_queues(cluster, ns, {EXTRA_RESOURCE: "8"}) as cq:
        yield cq


def _create(cluster: Cluster, ns: str, job: dict) -> str:
    created = cluster.batch.create_namespaced_job(ns, job)
    return cluster.workload_for_job(created, ns)


def _admitted_on(cluster: Cluster, wl: str, ns: str) -> list[tuple[list[str], int]]:
    found = eventually(
        lambda: topology_assignment(cluster, wl, ns), MEDIUM_TIMEOUT, f"workload {wl} admitted"
    )
    assert found["levels"] == [HOSTNAME], found
    return domains(found)


def _finished(cluster: Cluster, wl: str, ns: str) -> None:
    def check() -> bool:
        got = cluster.workload(wl, ns)
        assert has_quota_reservation(got), (got or {}).get("status")
        assert is_finished(got), (got or {}).get("status")
        return True

    eventually(check, MEDIUM_TIMEOUT, f"workload {wl} finished")


@kueue_case(GO, WHEN + "Should not admit a Job if Rack required")
def test_not_admitted_if_rack_required(cluster: Cluster, ns: str, queue: str) -> None:
    job = tas_job("test-job", ns, parallelism=3, completions=3, requests=GPU,
                  pod_annotations={REQUIRED: RACK}, args=BEHAVIOR_EXIT_FAST)  # fmt: skip
    wl = _create(cluster, ns, job)

    def pending() -> bool:
        got = cluster.workload(wl, ns)
        assert got is not None, f"workload {wl} not found"
        assert not (got.get("status") or {}).get("admission"), got["status"]["admission"]
        return True

    eventually(pending, MEDIUM_TIMEOUT, f"workload {wl} without admission")
    # No rack has three hosts: it stays so (Kueue's Eventually sees it at once).
    consistently(pending, 5, f"workload {wl} without admission")


@kueue_case(GO, WHEN + "should admit a Job to TAS Block if Rack preferred")
def test_block_if_rack_preferred(cluster: Cluster, ns: str, queue: str) -> None:
    job = tas_job("test-job", ns, parallelism=3, completions=3, requests=GPU,
                  pod_annotations={PREFERRED: RACK}, args=BEHAVIOR_EXIT_FAST)  # fmt: skip
    wl = _create(cluster, ns, job)
    assert _admitted_on(cluster, wl, ns) == hostname_assignment(
        "kind-worker", "kind-worker2", "kind-worker3"
    )
    _finished(cluster, wl, ns)


@kueue_case(GO, WHEN + "Should admit a Job to TAS Block if Block required")
def test_block_if_block_required(cluster: Cluster, ns: str, queue: str) -> None:
    job = tas_job("test-job", ns, parallelism=3, completions=3, requests=GPU,
                  pod_annotations={REQUIRED: BLOCK}, args=BEHAVIOR_EXIT_FAST)  # fmt: skip
    wl = _create(cluster, ns, job)
    assert _admitted_on(cluster, wl, ns) == hostname_assignment(
        "kind-worker", "kind-worker2", "kind-worker3"
    )
    _finished(cluster, wl, ns)


@kueue_case(GO, WHEN + "Should allow to run a Job with parallelism < completions")
def test_parallelism_below_completions(cluster: Cluster, ns: str, queue: str) -> None:
    job = tas_job("test-job", ns, parallelism=2, completions=3, requests=GPU,
                  pod_annotations={REQUIRED: BLOCK}, args=BEHAVIOR_EXIT_FAST)  # fmt: skip
    wl = _create(cluster, ns, job)
    _admitted_on(cluster, wl, ns)
    _finished(cluster, wl, ns)


def _ranks_ordering(cluster: Cluster, ns: str, annotations: dict[str, str]) -> None:
    num_pods = 4
    job = tas_job("ranks-job", ns, parallelism=num_pods, completions=num_pods, requests=GPU,
                  pod_annotations=annotations, args=BEHAVIOR_WAIT_FOR_DELETION,
                  indexed=True)  # fmt: skip
    cluster.batch.create_namespaced_job(ns, job)
    expect_job_unsuspended(cluster, "ranks-job", ns)

    def all_ready() -> bool:
        status = cluster.batch.read_namespaced_job("ranks-job", ns).status
        assert status.active == num_pods, status.active
        assert status.ready == num_pods, status.ready
        return True

    eventually(all_ready, MEDIUM_TIMEOUT, "all pods active and ready")
    expect_scheduled(cluster, ns, num_pods)
    got = pods_by_index(cluster, ns, "batch.kubernetes.io/job-name=ranks-job", JOB_INDEX)
    assert got == {"0": "kind-worker", "1": "kind-worker2", "2": "kind-worker3",
                   "3": "kind-worker4"}  # fmt: skip


@kueue_case(GO, WHEN + "Should place pods based on the ranks-ordering")
def test_ranks_ordering(cluster: Cluster, ns: str, queue: str) -> None:
    _ranks_ordering(cluster, ns, {REQUIRED: BLOCK})


@kueue_case(
    GO,
    WHEN + "Should place pods based on the ranks-ordering even if the Job has no TAS annotation "
    "(Implicit TAS)",
)
def test_ranks_ordering_implicit_tas(cluster: Cluster, ns: str, queue: str) -> None:
    _ranks_ordering(cluster, ns, {})


@kueue_case(GO, WHEN + "should preserve topology assignment during scale-up with elastic jobs")
def test_elastic_scale_up(cluster: Cluster, ns: str, queue: str) -> None:
    job = tas_job("test-job", ns, parallelism=1, completions=10, requests=GPU,
                  pod_annotations={UNCONSTRAINED: "true"},
                  args=BEHAVIOR_WAIT_FOR_DELETION)  # fmt: skip
    job["metadata"]["annotations"] = {f"{KUEUE}/elastic-job": "true"}
    cluster.batch.create_namespaced_job(ns, job)

    def one_workload() -> str:
        wls = cluster.list("workloads", ns)
        assert len(wls) == 1, [w["metadata"]["name"] for w in wls]
        return str(wls[0]["metadata"]["name"])

    first = eventually(one_workload, MEDIUM_TIMEOUT, "the job's workload")
    placed = eventually(
        lambda: topology_assignment(cluster, first, ns), MEDIUM_TIMEOUT, "its topology"
    )
    assert domains(placed)

    cluster.batch.patch_namespaced_job("test-job", ns, {"spec": {"parallelism": 2}})

    def new_slice() -> str:
        for wl in cluster.list("workloads", ns):
            if (wl["metadata"].get("annotations") or {}).get(REPLACEMENT_FOR) == f"{ns}/{first}":
                return str(wl["metadata"]["name"])
        raise AssertionError("no replacement workload slice yet")

    scaled = eventually(new_slice, MEDIUM_TIMEOUT, f"the slice replacing {first}")

    def two_domains() -> bool:
        found = topology_assignment(cluster, scaled, ns)
        count = sum(p["domainCount"] for p in found.get("slices") or [])
        assert count == 2, found
        return True

    eventually(two_domains, LONG_TIMEOUT, f"workload {scaled} on two domains")

    def both_ready() -> bool:
        ready = cluster.batch.read_namespaced_job("test-job", ns).status.ready
        assert ready == 2, ready
        return True

    eventually(both_ready, LONG_TIMEOUT, "both pods ready")
