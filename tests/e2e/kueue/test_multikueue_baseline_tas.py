"""Port of Kueue v0.19.2's test/e2e/multikueue/baseline/tas_test.go: MultiKueue with
topology-aware scheduling, the topology placed on the worker that admits the job and the
manager's delayed topology request then Ready (tests/e2e/kueue/multikueue.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.multikueue import (
    MULTIKUEUE_CONTROLLER,
    MultiKueueSetup,
    Worker,
    expect_admitted_and_get_worker,
    expect_check_state,
    expect_not_on,
    job_gone_on,
    workers_fixture,  # noqa: F401 (the fixture)
)
from tests.e2e.kueue.util import (
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    TIMEOUT,
    Cluster,
    condition,
    eventually,
    make_job,
)

pytestmark = pytest.mark.e2e

GO = "multikueue/baseline/tas_test.go"
WITH_TAS = "MultiKueue with TopologyAwareScheduling Creating a Job with TAS requirements "
ASYMMETRIC = "MultiKueue TAS with asymmetric quotas "
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
HOSTNAME = "kubernetes.io/hostname"
VERY_LONG_TIMEOUT = 300.0


@pytest.fixture
def tas(
    cluster: Cluster, workers: tuple[Worker, Worker], kubelet_namespaces: set[str]
) -> Iterator[MultiKueueSetup]:
    """The first Describe's BeforeEach: 8 cpu / 8Gi on the manager, 8 / 4Gi and 4 / 8Gi on
    the workers."""
    ns = cluster.create_namespace_from_prefix("multikueue-tas-")
    kubelet_namespaces.add(ns)
    setup = MultiKueueSetup(
        cluster, workers, ns,
        quotas=({"cpu": "8", "memory": "8Gi"}, {"cpu": "8", "memory": "4Gi"},
                {"cpu": "4", "memory": "8Gi"}),
        topology=True, flavor_prefix="tas-flavor-",
    )  # fmt: skip
    yield setup
    setup.teardown()


@pytest.fixture
def asymmetric(
    cluster: Cluster, workers: tuple[Worker, Worker], kubelet_namespaces: set[str]
) -> Iterator[MultiKueueSetup]:
    """The second Describe's: 4 cpu on the manager, 2 on worker1, 1 on worker2."""
    ns = cluster.create_namespace_from_prefix("multikueue-tas-")
    kubelet_namespaces.add(ns)
    setup = MultiKueueSetup(
        cluster, workers, ns,
        quotas=({"cpu": "4", "memory": "4Gi"}, {"cpu": "2", "memory": "1Gi"},
                {"cpu": "1", "memory": "4Gi"}),
        topology=True, flavor_prefix="tas-flavor-", cq_prefix="tas-cq-",
    )  # fmt: skip
    yield setup
    setup.teardown()


def tas_job(name: str, mk: MultiKueueSetup, requests: dict[str, str], count: int,
            annotation: tuple[str, str] | None, limits: bool = True) -> dict[str, Any]:  # fmt: skip
    body = make_job(name, mk.ns, queue=mk.lq, requests=requests, parallelism=count,
                    completions=count)  # fmt: skip
    if not limits:
        del body["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    if annotation:
        body["spec"]["template"].setdefault("metadata", {})["annotations"] = dict([annotation])
    return body


def create(mk: MultiKueueSetup, body: dict[str, Any]) -> tuple[Any, str]:
    made = mk.manager.batch.create_namespaced_job(mk.ns, body)
    return made, mk.manager.workload_for_job(made, mk.ns)


def worker_of(mk: MultiKueueSetup, name: str) -> tuple[str, Worker]:
    def assigned() -> str:
        cluster = ((mk.manager.workload(name, mk.ns) or {}).get("status") or {}).get("clusterName")
        assert cluster in mk.cluster_names, f"clusterName {cluster!r}"
        return str(cluster)

    cluster = eventually(assigned, MEDIUM_TIMEOUT, f"{name} assigned to a worker")
    return cluster, mk.by_cluster[cluster]


def wait_topology_assignment(worker: Worker, name: str, namespace: str) -> None:
    """waitForTopologyAssignment: one podSet, placed by hostname on the worker."""

    def placed() -> bool:
        wl = worker.workload(name, namespace) or {}
        psas = ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
        assert len(psas) == 1, psas
        topology = psas[0].get("topologyAssignment")
        assert topology is not None, psas[0]
        assert topology["levels"] == [HOSTNAME], topology
        assert topology.get("slices") or topology.get("domains"), topology
        return True

    eventually(placed, MEDIUM_TIMEOUT, f"{name}'s topology assigned on {worker.name}")


def wait_delayed_ready(manager: Cluster, name: str, namespace: str) -> None:
    """waitForDelayedTopologyRequestReady."""

    def ready() -> bool:
        wl = manager.workload(name, namespace) or {}
        psas = ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
        assert len(psas) == 1, psas
        assert psas[0].get("delayedTopologyRequest") == "Ready", psas[0]
        return True

    eventually(ready, MEDIUM_TIMEOUT, f"{name}'s delayed topology request Ready")


def finished(mk: MultiKueueSetup, name: str, timeout: float) -> None:
    def done() -> bool:
        found = condition(mk.manager.workload(name, mk.ns), "Finished")
        assert (found.get("status"), found.get("reason")) == ("True", "Succeeded"), found
        return True

    eventually(done, timeout, f"{name} finished")


def completed_and_cleaned(mk: MultiKueueSetup, job: str, name: str) -> None:
    expect_not_on(mk.workers, name, mk.ns, LONG_TIMEOUT)
    job_gone_on(mk.workers, job, mk.ns)
    conditions = mk.manager.batch.read_namespaced_job(job, mk.ns).status.conditions or []
    assert any(c.type == "Complete" and c.status == "True" for c in conditions), conditions


@kueue_case(GO, WITH_TAS + "Should admit a Job and assign topology in the worker cluster")
def test_topology_assigned_on_the_worker(tas: MultiKueueSetup) -> None:
    mk = tas
    body = tas_job("tas-job", mk, {"cpu": "500m", "memory": "200Mi"}, 2, (REQUIRED, HOSTNAME))
    _, name = create(mk, body)
    eventually(lambda: mk.manager.batch.read_namespaced_job("tas-job", mk.ns).spec.managed_by
               == MULTIKUEUE_CONTROLLER, TIMEOUT, "managed by MultiKueue")  # fmt: skip
    cluster, worker = worker_of(mk, name)
    expect_check_state(mk.manager, name, mk.ns, mk.check, "Ready",
                       f'The workload was admitted on "{cluster}"')  # fmt: skip
    wait_topology_assignment(worker, name, mk.ns)
    wait_delayed_ready(mk.manager, name, mk.ns)

    def mirrored() -> bool:
        s = mk.manager.batch.read_namespaced_job("tas-job", mk.ns).status
        assert (s.start_time is not None, s.active, s.completion_time) == (True, 2, None), s
        return True

    eventually(mirrored, MEDIUM_TIMEOUT, "the job's status from the worker")
    worker.terminate_active_pods(mk.ns, 2, 0, "batch.kubernetes.io/job-name=tas-job")
    finished(mk, name, VERY_LONG_TIMEOUT)
    completed_and_cleaned(mk, "tas-job", name)


@kueue_case(GO, WITH_TAS + "Should handle implicit TAS")
def test_implicit_tas(tas: MultiKueueSetup) -> None:
    mk = tas
    body = tas_job("implicit-tas-job", mk, {"cpu": "500m", "memory": "200Mi"}, 2, None)
    _, name = create(mk, body)
    eventually(lambda: mk.manager.batch.read_namespaced_job("implicit-tas-job", mk.ns).spec
               .managed_by == MULTIKUEUE_CONTROLLER, TIMEOUT, "managed by MultiKueue")  # fmt: skip

    def admitted() -> str:
        wl = mk.manager.workload(name, mk.ns) or {}
        cluster = (wl.get("status") or {}).get("clusterName")
        assert cluster, "no clusterName"
        found = condition(wl, "Admitted")
        assert (found.get("status"), found.get("reason"), found.get("message")) == (
            "True", "Admitted", "The workload is admitted"), found  # fmt: skip
        return str(cluster)

    cluster = eventually(admitted, TIMEOUT, f"{name} admitted through a worker")
    wait_delayed_ready(mk.manager, name, mk.ns)
    mk.by_cluster[cluster].terminate_active_pods(
        mk.ns, 2, 0, "batch.kubernetes.io/job-name=implicit-tas-job"
    )

    def done() -> bool:
        wl = mk.manager.workload(name, mk.ns)
        assert condition(wl, "QuotaReserved").get("status") == "True"
        found = condition(wl, "Finished")
        assert (found.get("status"), found.get("reason")) == ("True", "Succeeded"), found
        return True

    eventually(done, VERY_LONG_TIMEOUT, f"{name} finished, its quota still reserved")


@kueue_case(GO, ASYMMETRIC + "Should route a TAS Job with preferred topology to worker1 "
            "deterministically")  # fmt: skip
def test_preferred_topology_to_worker1(asymmetric: MultiKueueSetup) -> None:
    mk = asymmetric
    body = tas_job("tas-job", mk, {"cpu": "1500m"}, 1, (PREFERRED, HOSTNAME), limits=False)
    _, name = create(mk, body)
    cluster = expect_admitted_and_get_worker(mk.manager, name, mk.ns, mk.check)
    worker = mk.by_cluster[cluster]
    wait_topology_assignment(worker, name, mk.ns)
    wait_delayed_ready(mk.manager, name, mk.ns)
    worker.terminate_active_pods(mk.ns, 1, 0, "batch.kubernetes.io/job-name=tas-job")
    finished(mk, name, LONG_TIMEOUT)
    completed_and_cleaned(mk, "tas-job", name)


@kueue_case(GO, ASYMMETRIC + "Should admit a TAS Job with required hostname topology")
def test_required_hostname_topology(asymmetric: MultiKueueSetup) -> None:
    mk = asymmetric
    body = tas_job("tas-required-job", mk, {"cpu": "500m"}, 1, (REQUIRED, HOSTNAME), limits=False)
    _, name = create(mk, body)

    def assigned() -> str:
        wl = mk.manager.workload(name, mk.ns) or {}
        status = wl.get("status") or {}
        assert (status.get("admission") or {}).get("podSetAssignments"), status
        assert status.get("clusterName"), status
        return str(status["clusterName"])

    cluster = eventually(assigned, MEDIUM_TIMEOUT, f"{name} admitted and assigned")
    worker = mk.by_cluster[cluster]
    wait_topology_assignment(worker, name, mk.ns)
    wait_delayed_ready(mk.manager, name, mk.ns)
    worker.terminate_active_pods(mk.ns, 1, 0, "batch.kubernetes.io/job-name=tas-required-job")
    finished(mk, name, LONG_TIMEOUT)
    expect_not_on(mk.workers, name, mk.ns, LONG_TIMEOUT)
    job_gone_on(mk.workers, "tas-required-job", mk.ns)
