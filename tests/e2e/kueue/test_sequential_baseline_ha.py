"""Kueue v0.19.2 test/e2e/sequential/baseline/ha_test.go, ported: two controllers with leader
election (tests/e2e/kueue/ha.py); after the leader is stopped, the new leader admits and
preempts from what it read as a standby. Tower's webhook certificates are not its
controller's to bootstrap (`python -m certs`, or cert-manager), so the replica-recovery case
differs as the default configuration's does."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.e2e.kueue.cases import DifferenceError, kueue_case
from tests.e2e.kueue.ha import Replicas, stop_suite_controller
from tests.e2e.kueue.test_sequential_baseline_default_config import (
    LOCAL_QUEUE_CRD,
    MUTATING,
    crd_bundle,
    webhook_bundles,
)
from tests.e2e.kueue.test_singlecluster_baseline_metrics import make_workload
from tests.e2e.kueue.util import (
    CONFIGURATION,
    KUEUE,
    MEDIUM_TIMEOUT,
    TIMEOUT,
    Cluster,
    Tower,
    _listening,
    condition,
    eventually,
    has_quota_reservation,
    is_admitted,
    make_cluster_queue,
    make_flavor_quotas,
    make_local_queue,
    make_resource_flavor,
)

pytestmark = pytest.mark.e2e
GO = "sequential/baseline/ha_test.go"


@pytest.fixture(scope="module")
def replicas(tower: Tower, api_client: client.ApiClient) -> Iterator[Replicas]:
    """BeforeAll: Kueue's manager scaled to 2; AfterAll: back to the suite's one."""
    stop_suite_controller(tower)
    two = Replicas(tower, api_client)
    try:
        two.start()
        two.start()
        two.leader()
        yield two
    finally:
        two.stop()
        tower.procs.append(tower._controller(CONFIGURATION))
        eventually(lambda: _listening("127.0.0.1", tower.metrics_port), 30, "the controller")


@pytest.fixture
def failover_queues(replicas: Replicas, cluster: Cluster) -> Iterator[str]:
    ns = cluster.create_namespace_from_prefix("ha-failover-")
    cluster.create("resourceflavors", make_resource_flavor("rf"))
    cq = make_cluster_queue(
        "cq", make_flavor_quotas("rf", cpu="1"), preemption={"withinClusterQueue": "LowerPriority"}
    )
    cluster.create_active("clusterqueues", cq)
    cluster.create_active("localqueues", make_local_queue("lq", ns, "cq"), ns)
    yield ns
    cluster.delete_namespace(ns)
    cluster.expect_deleted("clusterqueues", "cq")
    cluster.expect_deleted("resourceflavors", "rf")


def workload(name: str, ns: str, cpu: str, priority: int | None = None) -> dict:
    body = make_workload(name, ns, "lq", cpu)
    if priority is not None:
        body["spec"]["priority"] = priority
    return body


def expect_admitted(cluster: Cluster, name: str, ns: str) -> None:
    eventually(lambda: is_admitted(cluster.workload(name, ns)), TIMEOUT, f"{name} admitted")


def expect_deleted(cluster: Cluster, name: str, ns: str) -> None:
    """util.ExpectObjectToBeDeleted(wl, true)."""
    cluster.delete("workloads", name, ns)
    eventually(lambda: cluster.workload(name, ns) is None, TIMEOUT, f"{name} deleted")


@kueue_case(
    GO,
    "HA tests HA Failover should admit a workload after leader failover when a previously "
    "admitted workload was deleted",
)
def test_the_new_leader_admits_into_quota_freed_before_it_led(
    cluster: Cluster, replicas: Replicas, failover_queues: str
) -> None:
    ns = failover_queues
    cluster.create("workloads", workload("workload-1", ns, "1"), ns)
    expect_admitted(cluster, "workload-1", ns)
    expect_deleted(cluster, "workload-1", ns)
    replicas.force_failover()
    cluster.create("workloads", workload("workload-2", ns, "1"), ns)
    expect_admitted(cluster, "workload-2", ns)


def finish_eviction(cluster: Cluster, name: str, ns: str) -> None:
    """util.FinishEvictionForWorkloads: once evicted, its quota reservation unset by the test
    (QuotaReserved=False, Pending, "By test"), as a job's controller would on stopping it."""

    def unset() -> bool:
        wl = cluster.get("workloads", name, ns)
        assert condition(wl, "Evicted").get("status") == "True", wl.get("status")
        if not has_quota_reservation(wl):
            return True
        status = wl["status"]
        status.pop("admission", None)
        for c in status.get("conditions") or []:
            if c["type"] in ("QuotaReserved", "Admitted"):
                c.update(status="False", reason="Pending", message="By test")
        cluster.custom.replace_namespaced_custom_object_status(
            KUEUE, "v1beta2", ns, "workloads", name, wl
        )
        return True

    eventually(unset, TIMEOUT, f"{name}'s quota reservation unset")


@kueue_case(
    GO,
    "HA tests HA Failover should admit a high-priority workload after lower-priority "
    "workload-1 removal and leader failover with preemption of existing lower-priority "
    "workload-2",
)
def test_the_new_leader_preempts_what_it_read_as_a_standby(
    cluster: Cluster, replicas: Replicas, failover_queues: str
) -> None:
    ns = failover_queues
    for name in ("workload-1", "workload-2"):
        cluster.create("workloads", workload(name, ns, "500m", 100), ns)
        expect_admitted(cluster, name, ns)
    expect_deleted(cluster, "workload-1", ns)
    replicas.force_failover()
    cluster.create("workloads", workload("workload-3", ns, "1", 200), ns)

    def preempted() -> bool:
        wl = cluster.workload("workload-2", ns)
        assert condition(wl, "Evicted").get("reason") == "Preempted", (wl or {}).get("status")
        assert condition(wl, "Preempted").get("status") == "True", (wl or {}).get("status")
        return True

    eventually(preempted, TIMEOUT, "workload-2 preempted")
    finish_eviction(cluster, "workload-2", ns)
    expect_admitted(cluster, "workload-3", ns)


@pytest.fixture
def certs_queues(replicas: Replicas, cluster: Cluster) -> Iterator[str]:
    ns = cluster.create_namespace_from_prefix("e2e-certs-")
    flavor = f"on-demand-{ns}"
    cluster.create("resourceflavors", make_resource_flavor(flavor, {"instance-type": "on-demand"}))
    cq = make_cluster_queue(f"cluster-queue-{ns}", make_flavor_quotas(flavor, cpu="1",
                                                                      memory="1Gi"))  # fmt: skip
    cluster.create_active("clusterqueues", cq)
    cluster.create_active("localqueues", make_local_queue("main", ns, f"cluster-queue-{ns}"), ns)
    yield ns
    cluster.delete_namespace(ns)
    cluster.expect_deleted("clusterqueues", f"cluster-queue-{ns}", MEDIUM_TIMEOUT)
    cluster.expect_deleted("resourceflavors", flavor, MEDIUM_TIMEOUT)


@kueue_case(
    GO,
    "HA tests Cert bootstrap with replica recovery Should allow to bootstrap certificates",
    differs="#webhook-certificates",
)
def test_replicas_back_from_zero_do_not_bootstrap_a_cleared_ca_bundle(
    api_client: client.ApiClient, cluster: Cluster, replicas: Replicas, certs_queues: str
) -> None:
    ext = client.ApiextensionsV1Api(api_client)
    reg = client.AdmissionregistrationV1Api(api_client)
    ns = certs_queues
    eventually(lambda: all(webhook_bundles(reg)), MEDIUM_TIMEOUT, "the webhooks' caBundle")
    saved = reg.read_mutating_webhook_configuration(MUTATING)
    crd_has_bundle = bool(crd_bundle(ext))
    bundle = crd_bundle(ext)
    replicas.stop()  # scaled to 0
    difference = None
    try:
        if crd_has_bundle:
            ext.patch_custom_resource_definition(LOCAL_QUEUE_CRD, {"spec": {"conversion": {
                "webhook": {"clientConfig": {"caBundle": None}}}}})  # fmt: skip
        cleared = reg.read_mutating_webhook_configuration(MUTATING)
        for hook in cleared.webhooks:
            hook.client_config.ca_bundle = None
        reg.replace_mutating_webhook_configuration(MUTATING, cleared)
        replicas.start()  # scaled back to 2
        replicas.start()
        replicas.leader()
        try:
            if crd_has_bundle:
                eventually(lambda: crd_bundle(ext), MEDIUM_TIMEOUT, "the CRD's caBundle back")
            eventually(lambda: all(webhook_bundles(reg)), MEDIUM_TIMEOUT, "the webhooks' back")
        except AssertionError as err:
            difference = f"Kueue's replicas bootstrap a cleared caBundle; Tower's: {err}"
    finally:  # what the next `python -m certs bootstrap` does: the CA put back
        if crd_has_bundle:
            ext.patch_custom_resource_definition(LOCAL_QUEUE_CRD, {"spec": {"conversion": {
                "webhook": {"clientConfig": {"caBundle": bundle}}}}})  # fmt: skip
        now = reg.read_mutating_webhook_configuration(MUTATING)
        for hook, before in zip(now.webhooks, saved.webhooks, strict=True):
            hook.client_config.ca_bundle = before.client_config.ca_bundle
        reg.replace_mutating_webhook_configuration(MUTATING, now)
        if not replicas.procs:
            replicas.start()
            replicas.start()
    lq = cluster.get("localqueues", "main", ns)
    lq["spec"]["stopPolicy"] = "Hold"
    cluster.custom.replace_namespaced_custom_object(KUEUE, "v1beta2", ns, "localqueues", "main", lq)
    eventually(
        lambda: (
            condition(cluster.get("localqueues", "main", ns), "Active").get("status") == "False"
        ),
        MEDIUM_TIMEOUT,
        "the LocalQueue inactive",
    )
    if difference is not None:
        raise DifferenceError(difference)
