"""Kueue v0.19.2 test/e2e/sequential/extended/sparkapplication_test.go, ported case by case.

The BeforeAll restarts Kueue with the Spark integration and its gate on; Tower's webhook reads
the Configuration too, so both are restarted (sequential.py). The Spark operator is played by
tests/e2e/kueue/spark.py. Kueue's on-demand node is its kind cluster's `kind-worker`; here it
is the node the package labels `instance-type: on-demand` (the real node)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.sequential import restarted
from tests.e2e.kueue.spark import (
    FRAMEWORK,
    create,
    delete_all,
    get,
    install_crd,
    make_spark_application,
    spark_operator,
    state,
    workload_of,
)
from tests.e2e.kueue.util import (
    CONFIGURATION,
    KUEUE,
    LONG_TIMEOUT,
    Cluster,
    Tower,
    V,
    eventually,
    gone,
    has_quota_reservation,
    is_admitted,
    is_finished,
    make_cluster_queue,
    make_flavor_quotas,
    make_local_queue,
    make_resource_flavor,
)

pytestmark = pytest.mark.e2e
GO = "sequential/extended/sparkapplication_test.go"
VERY_LONG_TIMEOUT = 300.0  # util.VeryLongTimeout
HOSTNAME = "kubernetes.io/hostname"
REQUIRED = f"{KUEUE}/podset-required-topology"


@pytest.fixture(scope="module")
def spark_on(tower: Tower) -> Iterator[None]:
    """BeforeAll: the Configuration's frameworks plus Spark, with SparkApplicationIntegration
    and TopologyAwareScheduling on; the suite's Configuration back after."""
    install_crd()
    document = yaml.safe_load(CONFIGURATION)
    document["integrations"]["frameworks"].append(FRAMEWORK)
    document["featureGates"] = {"SparkApplicationIntegration": True,
                                "TopologyAwareScheduling": True}  # fmt: skip
    yield from restarted(tower, yaml.safe_dump(document))


@pytest.fixture
def service_account(cluster: Cluster, ns: str, spark_on: None) -> Iterator[str]:
    """BeforeEach: the applications' ServiceAccount, bound to ClusterRole `edit` in the
    namespace; AfterEach: the applications deleted, their pods gone, the account deleted."""
    name = f"sparkapplication-sa-{ns}"
    cluster.core.create_namespaced_service_account(ns, {"metadata": {"name": name}})
    rbac = client.RbacAuthorizationV1Api(cluster.api)
    rbac.create_namespaced_role_binding(ns, {
        "metadata": {"name": f"sparkapplication-sa-edit-{ns}"},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
        "roleRef": {"kind": "ClusterRole", "name": "edit",
                    "apiGroup": "rbac.authorization.k8s.io"},
    })  # fmt: skip
    yield name
    delete_all(cluster, ns)
    eventually(
        lambda: not cluster.core.list_namespaced_pod(ns).items, LONG_TIMEOUT, "all pods deleted"
    )
    with contextlib.suppress(client.ApiException):
        cluster.core.delete_namespaced_service_account(name, ns)


@contextlib.contextmanager
def queues(cluster: Cluster, ns: str, flavor: dict[str, Any], topology: str | None = None,
           **cq_spec: Any) -> Iterator[str]:  # fmt: skip
    """The When's BeforeEach (the flavor, a ClusterQueue of 1 cpu and 1Gi, its LocalQueue)
    and AfterEach (Workloads force-removed, queues, flavor and topology deleted)."""
    rf, cq, lq = (f"sparkapplication-{k}-{ns}" for k in ("rf", "cq", "lq"))
    flavor["metadata"]["name"] = rf
    cluster.create("resourceflavors", flavor)
    quotas = make_flavor_quotas(rf, cpu="1", memory="1Gi")
    cluster.create_active("clusterqueues", make_cluster_queue(cq, quotas, **cq_spec))
    cluster.create_active("localqueues", make_local_queue(lq, ns, cq), ns)
    try:
        yield lq
    finally:
        for wl in cluster.list("workloads", ns):
            cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
        cluster.delete("localqueues", lq, ns)
        cluster.expect_deleted("clusterqueues", cq)
        cluster.expect_deleted("resourceflavors", rf)
        if topology is not None:
            cluster.expect_deleted("topologies", topology)


def running(cluster: Cluster, ns: str, name: str) -> dict[str, Any]:
    """'Waiting for SparkApplication to be Running': status.applicationState.state."""

    def check() -> dict[str, Any]:
        app = get(cluster, ns, name)
        assert state(app) == "RUNNING", f"state {state(app)!r}"
        return app

    return eventually(check, LONG_TIMEOUT, f"{name} running")


@kueue_case(GO, "SparkApplication integration SparkApplication created should run if admitted")
def test_runs_if_admitted(cluster: Cluster, ns: str, service_account: str) -> None:
    flavor = make_resource_flavor("rf")
    with queues(cluster, ns, flavor, preemption={"withinClusterQueue": "LowerPriority"}) as lq, \
            spark_operator(cluster, ns):  # fmt: skip
        body = make_spark_application("sparkapplication-simple", ns, lq, service_account)
        app = create(cluster, body)
        running(cluster, ns, "sparkapplication-simple")

        wl_name = workload_of(app)
        wl = cluster.workload(wl_name, ns)
        assert wl is not None, "Check workload is created"
        eventually(lambda: is_admitted(cluster.workload(wl_name, ns)), LONG_TIMEOUT, "admitted")
        eventually(
            lambda: is_finished(cluster.workload(wl_name, ns)), VERY_LONG_TIMEOUT, "finished"
        )

        # util.ExpectObjectToBeDeleted(sparkApp, true), then the Workload goes with it.
        cluster.custom.delete_namespaced_custom_object(
            "sparkoperator.k8s.io", "v1beta2", ns, "sparkapplications",
            "sparkapplication-simple", propagation_policy="Foreground",
        )  # fmt: skip
        eventually(
            lambda: gone(lambda: get(cluster, ns, "sparkapplication-simple")),
            LONG_TIMEOUT,
            "the SparkApplication deleted",
        )
        eventually(
            lambda: cluster.workload(wl_name, ns) is None, LONG_TIMEOUT, "the Workload deleted"
        )


def assignment(node: str, count: int) -> dict[str, Any]:
    """tas.V1Beta2From(&tas.TopologyAssignment{Levels: [hostname], Domains: [{count, [node]}]})."""
    return {
        "levels": [HOSTNAME],
        "slices": [{"domainCount": 1, "valuesPerLevel": [{"universal": node}],
                    "podCounts": {"universal": count}}],
    }  # fmt: skip


@kueue_case(GO, "SparkApplication integration SparkApplication created with TAS should admit a "
                "SparkApplication via TAS")  # fmt: skip
def test_admits_via_tas(cluster: Cluster, ns: str, service_account: str) -> None:
    nodes = cluster.core.list_node(label_selector="instance-type=on-demand").items
    assert len(nodes) == 1, [n.metadata.name for n in nodes]
    on_demand = str(nodes[0].metadata.name)  # Kueue's kind-worker
    topology = f"hostname-{ns}"
    cluster.create("topologies", {"apiVersion": f"{KUEUE}/{V}", "kind": "Topology",
                                  "metadata": {"name": topology},
                                  "spec": {"levels": [{"nodeLabel": HOSTNAME}]}})  # fmt: skip
    flavor = make_resource_flavor("rf", {"instance-type": "on-demand"})
    flavor["spec"]["topologyName"] = topology
    with queues(cluster, ns, flavor, topology) as lq, spark_operator(cluster, ns):
        body = make_spark_application("test-sparkapplication-tas", ns, lq, service_account)
        for role in ("driver", "executor"):
            body["spec"][role]["annotations"] = {REQUIRED: HOSTNAME}
        create(cluster, body)
        app = running(cluster, ns, "test-sparkapplication-tas")

        # "verify the SparkApplication has nodeSelector set"
        assert app["spec"]["driver"].get("nodeSelector") == {"instance-type": "on-demand"}
        assert app["spec"]["executor"].get("nodeSelector") == {"instance-type": "on-demand"}

        wl_name = workload_of(app)

        def admitted() -> dict[str, Any]:
            wl = cluster.workload(wl_name, ns)
            assert wl is not None, "no Workload"
            admission = (wl.get("status") or {}).get("admission")
            assert admission is not None, "not admitted"
            return admission

        admission = eventually(admitted, LONG_TIMEOUT, f"admission of {wl_name}")
        pod_sets = admission["podSetAssignments"]
        assert len(pod_sets) == 2
        assert pod_sets[0].get("topologyAssignment") == assignment(on_demand, 1)
        assert pod_sets[1].get("topologyAssignment") == assignment(on_demand, 1)

        def finished_holding_quota() -> bool:
            wl = cluster.workload(wl_name, ns)
            assert has_quota_reservation(wl), "no quota reservation"
            assert is_finished(wl), "not finished"
            return True

        eventually(finished_holding_quota, VERY_LONG_TIMEOUT, f"{wl_name} finished")
