"""Kueue v0.19.2 test/e2e/sequential/baseline/failure_recovery_policy_test.go, ported: with the
FailureRecoveryPolicy gate, a Job whose pod opted in (kueue.x-k8s.io/safe-to-forcefully-delete)
and is stuck terminating on a node whose kubelet is down is deleted in the foreground anyway:
a minute past the pod's deletionTimestamp Tower marks it Failed and deletes it with no grace
period (extender/kube/controller/recovery/pod_termination.py).

Kueue's case stops the kind worker's kubelet (`docker exec NODE systemctl stop kubelet`) and
kind's node lifecycle controller taints the node unreachable. Here the node is a hand-made Node
whose kubelet is the stand-in one (tests/e2e/kubelet.py), and the outage is that kubelet no
longer answering for the namespace; this plane runs no node lifecycle controller, so the test
taints the node node.kubernetes.io/unreachable:NoExecute as it would (the real node's kubelet
is shared by every helper's run and stays up). The pod is held to the node by a nodeSelector,
and the node keeps other suites' pods away with a taint only this Job tolerates."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml
from kubernetes import client

from tests.builders import ready_node
from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.restarts import restart_with
from tests.e2e.kueue.tas import create_node, delete_node
from tests.e2e.kueue.util import (
    CONFIGURATION,
    MEDIUM_TIMEOUT,
    TIMEOUT,
    Cluster,
    Tower,
    eventually,
    make_cluster_queue,
    make_flavor_quotas,
    make_job,
    make_local_queue,
    make_resource_flavor,
)

pytestmark = pytest.mark.e2e
GO = "sequential/baseline/failure_recovery_policy_test.go"
SAFE_TO_DELETE = "kueue.x-k8s.io/safe-to-forcefully-delete"
UNREACHABLE = "node.kubernetes.io/unreachable"
NODE = "frp-worker"
OWNED = "tower.e2e/failure-recovery"  # keeps other suites' pods off the node
POD_TERMINATION_GRACE = 1
# podToleration + deletionGracePeriodSeconds + forcefulTerminationGracePeriod, as Kueue's case.
FORCEFUL_TERMINATION_CHECK = 1 + POD_TERMINATION_GRACE + 60


def failure_recovery_configuration() -> str:
    document = yaml.safe_load(CONFIGURATION)
    document["featureGates"] = {"FailureRecoveryPolicy": True}
    return yaml.safe_dump(document)


@pytest.fixture(scope="module")
def failure_recovery(tower: Tower) -> Iterator[None]:
    try:
        restart_with(tower, failure_recovery_configuration())
        yield
    finally:
        tower.restart_controller()


@pytest.fixture
def worker(api_client: client.ApiClient) -> Iterator[str]:
    """A kind worker as a hand-made Node, Ready, its kubelet the stand-in one."""
    core = client.CoreV1Api(api_client)
    delete_node(core, NODE)
    body = ready_node(
        NODE, {"kubernetes.io/hostname": NODE}, {"cpu": "8", "memory": "36Gi", "pods": "110"}
    )
    body["spec"] = {"taints": [{"key": OWNED, "value": "true", "effect": "NoSchedule"}]}
    create_node(core, body)
    yield NODE
    delete_node(core, NODE)


def make_frp_job(ns: str) -> dict:
    """Kueue's test-job: agnhost waiting for deletion, 1 cpu and 40Mi, terminationGracePeriod
    1, podReplacementPolicy Failed, the safe-to-forcefully-delete annotation, and tolerating
    the unreachable taint for one second."""
    job = make_job(
        "test-job", ns, queue="lq", requests={"cpu": "1", "memory": "40Mi"}, parallelism=1
    )
    job["spec"]["podReplacementPolicy"] = "Failed"
    template = job["spec"]["template"]
    template.setdefault("metadata", {})["annotations"] = {SAFE_TO_DELETE: "true"}
    spec = template["spec"]
    spec["terminationGracePeriodSeconds"] = POD_TERMINATION_GRACE
    spec["nodeSelector"] = {"kubernetes.io/hostname": NODE}
    spec["tolerations"] = [
        {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 1},
        {"key": OWNED, "operator": "Exists", "effect": "NoSchedule"},
    ]
    return job


def kubelet_goes_down(core: client.CoreV1Api, ns: str, kubelet_namespaces: set[str]) -> None:
    """The kubelet stops answering for the pod, and the node is tainted unreachable as the
    node lifecycle controller taints a node whose kubelet stopped posting its status."""
    kubelet_namespaces.discard(ns)
    node = core.read_node(NODE)
    taints = [t for t in node.spec.taints or () if t.key != UNREACHABLE]
    taints.append(client.V1Taint(key=UNREACHABLE, effect="NoExecute"))
    core.patch_node(NODE, {"spec": {"taints": [t.to_dict() for t in taints]}})


@kueue_case(
    GO,
    "Failure Recovery Policy the kubelet on a node goes down should unblock foreground "
    "deletion during a kubelet outage",
)
def test_a_foreground_deletion_ends_during_a_kubelet_outage(
    failure_recovery: None, cluster: Cluster, worker: str, kubelet_namespaces: set[str]
) -> None:
    ns = cluster.create_namespace_from_prefix("frp-")
    kubelet_namespaces.add(ns)
    rf, cq = f"rf-{ns}", f"cq-{ns}"
    cluster.create("resourceflavors", make_resource_flavor(rf))
    try:
        cluster.create_active(
            "clusterqueues", make_cluster_queue(cq, make_flavor_quotas(rf, cpu="8", memory="36G"))
        )
        cluster.create_active("localqueues", make_local_queue("lq", ns, cq), ns)
        cluster.batch.create_namespaced_job(ns, make_frp_job(ns))

        def started() -> bool:
            job = cluster.batch.read_namespaced_job("test-job", ns)
            assert job.spec.suspend is False, "the job is still suspended"
            assert job.status.active == 1, f"active {job.status.active}"
            assert job.status.ready == 1, f"ready {job.status.ready}"
            return True

        eventually(started, MEDIUM_TIMEOUT, "the job started, its pod ready")
        pods = cluster.core.list_namespaced_pod(ns, label_selector="job-name=test-job").items
        assert len(pods) == 1, [p.metadata.name for p in pods]
        assert pods[0].spec.node_name == NODE
        kubelet_goes_down(cluster.core, ns, kubelet_namespaces)

        def active() -> bool:
            return cluster.batch.read_namespaced_job("test-job", ns).status.active == 1

        eventually(active, TIMEOUT, "the job active before its foreground deletion")
        cluster.batch.delete_namespaced_job("test-job", ns, propagation_policy="Foreground")

        def job_gone() -> bool:
            try:
                cluster.batch.read_namespaced_job("test-job", ns)
            except client.ApiException as err:
                return err.status == 404
            return False

        eventually(job_gone, FORCEFUL_TERMINATION_CHECK + TIMEOUT, "the job deleted")
    finally:
        # The kubelet comes back: what is left in the namespace is let go.
        kubelet_namespaces.add(ns)
        cluster.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        cluster.delete_namespace(ns)
        cluster.expect_deleted("clusterqueues", cq)
        cluster.expect_deleted("resourceflavors", rf)
