"""Kueue v0.19.2 test/e2e/sequential/baseline/objectretentionpolicies_test.go, ported: its four
cases, each with the controller restarted on its Configuration (Kueue's
UpdateKueueConfigurationAndRestart) and the suite's put back after.

The case whose Job finishes runs its pod on the real node with agnhost's entrypoint-tester,
which exits 0 at once: Kueue asks a waiting agnhost to exit (util.WaitForActivePodsAndTerminate),
which this machine cannot reach (neither the node's kubelet for exec, nor the pod network).
Kueue's TinyTimeout is 10ms."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.restarts import restart_with
from tests.e2e.kueue.util import (
    BEHAVIOR_EXIT_FAST,
    CONFIGURATION,
    MEDIUM_TIMEOUT,
    TIMEOUT,
    Cluster,
    Tower,
    consistently,
    eventually,
    make_cluster_queue,
    make_flavor_quotas,
    make_job,
    make_local_queue,
    make_resource_flavor,
)

pytestmark = pytest.mark.e2e
GO = "sequential/baseline/objectretentionpolicies_test.go"
CQ, LQ, RF = "cq", "lq", "default"
TINY = "10ms"  # util.TinyTimeout
CONSISTENT = 0.3  # util.ConsistentDuration
WAIT_FOR_PODS_READY = {
    "blockAdmission": True,
    "timeout": TINY,
    "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 1, "backoffLimitCount": 1},
}


def configuration(
    *, retention: dict[str, str] | None = None, wait_for_pods_ready: bool = False
) -> str:
    document = yaml.safe_load(CONFIGURATION)
    if retention is not None:
        document["featureGates"] = {"ObjectRetentionPolicies": True}
        document["objectRetentionPolicies"] = {"workloads": retention}
    if wait_for_pods_ready:
        document["waitForPodsReady"] = WAIT_FOR_PODS_READY
    return yaml.safe_dump(document)


def queues(cluster: Cluster, ns: str) -> Iterator[None]:
    """BeforeEach's flavor, ClusterQueue of 10 cpu and LocalQueue; AfterEach's deletions."""
    cluster.create("resourceflavors", make_resource_flavor(RF))
    cluster.create_active("clusterqueues", make_cluster_queue(CQ, make_flavor_quotas(RF, cpu="10")))
    cluster.create_active("localqueues", make_local_queue(LQ, ns, CQ), ns)
    yield
    for job in cluster.batch.list_namespaced_job(ns).items:
        cluster.batch.delete_namespaced_job(job.metadata.name, ns, propagation_policy="Background")
    cluster.delete_namespace(ns)
    cluster.expect_deleted("clusterqueues", CQ)
    cluster.expect_deleted("resourceflavors", RF)


@pytest.fixture
def plain(tower: Tower, cluster: Cluster, ns: str) -> Iterator[None]:
    """The first Describe: each case restarts the controller itself."""
    yield from queues(cluster, ns)
    tower.restart_controller()


@pytest.fixture
def tiny_timeout(tower: Tower, cluster: Cluster, ns: str) -> Iterator[None]:
    restart_with(tower, configuration(retention={"afterFinished": TINY,
                                                 "afterDeactivatedByKueue": TINY}))  # fmt: skip
    yield from queues(cluster, ns)
    tower.restart_controller()


@pytest.fixture
def requeuing_limit(tower: Tower, cluster: Cluster, ns: str) -> Iterator[None]:
    restart_with(
        tower,
        configuration(retention={"afterDeactivatedByKueue": TINY}, wait_for_pods_ready=True),
    )
    yield from queues(cluster, ns)
    tower.restart_controller()


def agnhost_job(ns: str) -> dict:
    """MakeJob("job", ns).Queue(lq).Image(agnhost, WaitForDeletion).TerminationGracePeriod(1)
    .RequestAndLimit(cpu, "1")."""
    return make_job("job", ns, queue=LQ, requests={"cpu": "1"})


def job_gone(cluster: Cluster, ns: str) -> bool:
    try:
        cluster.batch.read_namespaced_job("job", ns)
    except client.ApiException as err:
        return err.status == 404
    return False


def job_there(cluster: Cluster, ns: str) -> None:
    assert not job_gone(cluster, ns), "the Job was deleted"


def workload_there(cluster: Cluster, name: str, ns: str) -> None:
    assert cluster.workload(name, ns) is not None, "the Workload was deleted"


@kueue_case(
    GO,
    "ObjectRetentionPolicies should delete the Workload after enabling the "
    "ObjectRetentionPolicies feature gate",
)
def test_enabling_the_policy_deletes_a_job_deactivated_before(
    tower: Tower, cluster: Cluster, ns: str, plain: None
) -> None:
    restart_with(tower, configuration(wait_for_pods_ready=True))
    created = cluster.batch.create_namespaced_job(ns, agnhost_job(ns))
    name = cluster.workload_for_job(created, ns)
    eventually(
        lambda: ((cluster.workload(name, ns) or {}).get("spec") or {}).get("active") is False,
        MEDIUM_TIMEOUT,
        "the Workload deactivated",
    )
    restart_with(
        tower,
        configuration(retention={"afterDeactivatedByKueue": TINY}, wait_for_pods_ready=True),
    )
    eventually(lambda: job_gone(cluster, ns), MEDIUM_TIMEOUT, "the Job deleted")
    eventually(lambda: cluster.workload(name, ns) is None, MEDIUM_TIMEOUT, "the Workload deleted")


@kueue_case(
    GO, "ObjectRetentionPolicies with TinyTimeout workload has finished should delete the Workload"
)
def test_a_finished_workload_is_deleted_and_its_job_kept(
    cluster: Cluster, ns: str, tiny_timeout: None
) -> None:
    job = make_job("job", ns, queue=LQ, args=BEHAVIOR_EXIT_FAST, requests={"cpu": "1"})
    # Its pod really runs, and succeeds: on the real node, Kueue's on-demand worker.
    job["spec"]["template"]["spec"]["nodeSelector"] = {"instance-type": "on-demand"}
    created = cluster.batch.create_namespaced_job(ns, job)
    name = cluster.workload_for_job(created, ns)
    eventually(lambda: cluster.workload(name, ns), TIMEOUT, "the Workload created")
    eventually(lambda: cluster.workload(name, ns) is None, MEDIUM_TIMEOUT,
               "the Workload deleted after it finished")  # fmt: skip
    consistently(lambda: job_there(cluster, ns), CONSISTENT, "the Job is not deleted")


@kueue_case(
    GO,
    "ObjectRetentionPolicies with TinyTimeout manually deactivating a Workload shouldn't delete "
    "the Job or the Workload",
)
def test_a_workload_deactivated_by_hand_is_kept_with_its_job(
    cluster: Cluster, ns: str, tiny_timeout: None
) -> None:
    created = cluster.batch.create_namespaced_job(ns, agnhost_job(ns))
    name = cluster.workload_for_job(created, ns)
    eventually(lambda: cluster.workload(name, ns), TIMEOUT, "the Workload created")
    cluster.custom.patch_namespaced_custom_object(  # util.DeactivateWorkload
        "kueue.x-k8s.io", "v1beta2", ns, "workloads", name, {"spec": {"active": False}}
    )
    eventually(lambda: cluster.workload(name, ns), TIMEOUT, "the Workload deactivated")
    consistently(lambda: job_there(cluster, ns), CONSISTENT, "the Job is not deleted")
    consistently(lambda: workload_there(cluster, name, ns), CONSISTENT, "the Workload is kept")


@kueue_case(
    GO, "ObjectRetentionPolicies with TinyTimeout and RequeuingLimitExceeded should delete Job"
)
def test_a_job_past_its_requeuing_limit_is_deleted_with_its_workload(
    cluster: Cluster, ns: str, requeuing_limit: None
) -> None:
    created = cluster.batch.create_namespaced_job(ns, agnhost_job(ns))
    name = cluster.workload_for_job(created, ns)
    eventually(lambda: job_gone(cluster, ns), MEDIUM_TIMEOUT, "the Job deleted")
    eventually(lambda: cluster.workload(name, ns) is None, MEDIUM_TIMEOUT, "the Workload deleted")
