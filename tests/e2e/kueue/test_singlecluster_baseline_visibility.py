"""Kueue v0.19.2 test/e2e/singlecluster/baseline/visibility_test.go, ported case by case.

The visibility API is asked through the real kube-apiserver's aggregator (the `visibility_api`
fixture registers the APIServices for Tower's controller); the RBAC cases impersonate
`system:serviceaccount:<kueue ns>:default` with the Impersonate-User header, as Kueue's
impersonatedVisibilityClient does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.util import (
    BEHAVIOR_EXIT_FAST,
    MEDIUM_TIMEOUT,
    TIMEOUT,
    Cluster,
    VisibilityClient,
    comparable_pending,
    eventually,
    expected_pending,
    make_cluster_queue,
    make_flavor_quotas,
    make_job,
    make_local_queue,
    make_resource_flavor,
    make_workload_priority_class,
    pending_workload,
    status_of,
)

pytestmark = pytest.mark.e2e
GO = "singlecluster/baseline/visibility_test.go"
WHEN = (
    "Kueue visibility server There are pending workloads due to capacity maxed by the admitted job "
)
HIGH, MID, LOW = 100, 75, 50


@dataclass(frozen=True)
class Queues:
    """The When's BeforeEach: the ClusterQueue of 1 cpu, LocalQueues a and b in nsA, the three
    priority classes, and the admitted blocking job test-job-1."""

    ns_a: str
    ns_b: str
    cluster_queue: str
    high: str
    mid: str
    low: str


def _delete_quietly(delete: Callable[[], object]) -> None:
    try:
        delete()
    except client.ApiException as err:
        if err.status != 404:
            raise


@pytest.fixture
def kueue_ns(visibility_api: str) -> str:
    return visibility_api


@pytest.fixture
def v1beta2() -> VisibilityClient:
    return VisibilityClient("v1beta2")


@pytest.fixture
def impersonated(kueue_ns: str) -> VisibilityClient:
    """impersonatedVisibilityClient: the kueue namespace's default ServiceAccount."""
    return VisibilityClient("v1beta2", impersonate=f"system:serviceaccount:{kueue_ns}:default")


@pytest.fixture
def queues(cluster: Cluster, ns: str, ns_b: str, kueue_ns: str) -> Iterator[Queues]:
    flavor, cq = f"default-flavor-{ns}", f"cluster-queue-{ns}"
    cluster.create("resourceflavors", make_resource_flavor(flavor))
    cluster.create_active(
        "clusterqueues", make_cluster_queue(cq, make_flavor_quotas(flavor, cpu="1"))
    )
    cluster.create_active("localqueues", make_local_queue("a", ns, cq), ns)
    cluster.create_active("localqueues", make_local_queue("b", ns, cq), ns)
    names = {"high": f"high-{ns}", "mid": f"mid-{ns}", "low": f"low-{ns}"}
    for key, value in (("high", HIGH), ("mid", MID), ("low", LOW)):
        cluster.create("workloadpriorityclasses", make_workload_priority_class(names[key], value))
    blocking = make_job("test-job-1", ns, queue="a", requests={"cpu": "1"},
                        priority_class=names["high"], backoff_limit=0)  # fmt: skip
    cluster.batch.create_namespaced_job(ns, blocking)
    # expectJobUnsuspended: the blocking workload is admitted.
    eventually(
        lambda: cluster.batch.read_namespaced_job("test-job-1", ns).spec.suspend is False,
        TIMEOUT,
        "the blocking job to be unsuspended",
    )
    yield Queues(ns, ns_b, cq, names["high"], names["mid"], names["low"])
    for namespace in (ns, ns_b):
        cluster.batch.delete_collection_namespaced_job(namespace, propagation_policy="Background")
        for wl in cluster.list("workloads", namespace):
            cluster.delete("workloads", wl["metadata"]["name"], namespace, strip_finalizers=True)
        for lq in cluster.list("localqueues", namespace):
            cluster.delete("localqueues", lq["metadata"]["name"], namespace)
    cluster.expect_deleted("clusterqueues", cq)
    cluster.expect_deleted("resourceflavors", flavor)
    for name in names.values():
        cluster.delete("workloadpriorityclasses", name)


def create_pending_jobs(cluster: Cluster, *jobs: tuple[str, str, str, str]) -> None:
    """createPendingJobs: (job name, priority class, LocalQueue, namespace) each, 1 cpu."""
    for name, priority, queue, namespace in jobs:
        job = make_job(name, namespace, queue=queue, args=BEHAVIOR_EXIT_FAST,
                       requests={"cpu": "1"}, priority_class=priority)  # fmt: skip
        cluster.batch.create_namespaced_job(namespace, job)


def expect_items(
    fetch: Callable[[], list[dict]], want: list[dict], timeout: float = TIMEOUT
) -> None:
    def check() -> bool:
        got = comparable_pending(fetch())
        assert got == expected_pending(want), f"pending workloads: {got}"
        return True

    eventually(check, timeout, "the pending workloads")


def expect_count(fetch: Callable[[], list[dict]], count: int, timeout: float = TIMEOUT) -> None:
    def check() -> bool:
        items = fetch()
        assert len(items) == count, f"{len(items)} pending workloads: {items}"
        return True

    eventually(check, timeout, f"{count} pending workloads")


def expect_status(fetch: Callable[[], object], status: int) -> None:
    """utiltesting.BeNotFoundError (404) / BeForbiddenError (403)."""
    try:
        fetch()
    except client.ApiException as err:
        got = err
    else:
        raise AssertionError(f"the request succeeded; want a {status} answer")
    assert status_of(got) == status, f"{got.status}: {got.body}"


def eventually_status(fetch: Callable[[], object], status: int) -> None:
    def check() -> bool:
        expect_status(fetch, status)
        return True

    eventually(check, TIMEOUT, f"a {status} answer")


def one_pending_then_admitted(cluster: Cluster, q: Queues, fetch: Callable[[], list[dict]]) -> None:
    """The body shared by the ClusterQueue (v1beta1, v1beta2) and LocalQueue cases: zero
    pending, a low-priority job pending, the blocking job's pods running then deleted, zero."""
    expect_count(fetch, 0)
    job = make_job("test-job-2", q.ns_a, queue="a", args=BEHAVIOR_EXIT_FAST,
                   requests={"cpu": "1"}, priority_class=q.low)  # fmt: skip
    cluster.batch.create_namespaced_job(q.ns_a, job)
    expect_count(fetch, 1)
    eventually(
        lambda: cluster.batch.read_namespaced_job("test-job-1", q.ns_a).status.ready == 1,
        MEDIUM_TIMEOUT,
        "the blocking job's pod to be ready",
    )
    # util.DeleteAllPodsInNamespace
    cluster.core.delete_collection_namespaced_pod(q.ns_a)
    expect_count(fetch, 0, MEDIUM_TIMEOUT)


@kueue_case(
    GO, WHEN + "Should allow fetching information about pending workloads in ClusterQueue (v1beta1)"
)
def test_pending_workloads_in_cluster_queue_v1beta1(cluster: Cluster, queues: Queues) -> None:
    v1beta1 = VisibilityClient("v1beta1")
    one_pending_then_admitted(
        cluster, queues, lambda: v1beta1.cluster_queue_pending(queues.cluster_queue)
    )


@kueue_case(GO, WHEN + "Should allow fetching information about pending workloads in ClusterQueue")
def test_pending_workloads_in_cluster_queue(
    cluster: Cluster, queues: Queues, v1beta2: VisibilityClient
) -> None:
    one_pending_then_admitted(
        cluster, queues, lambda: v1beta2.cluster_queue_pending(queues.cluster_queue)
    )


@kueue_case(
    GO,
    WHEN + "Should allow fetching information about position of pending workloads in ClusterQueue",
)
def test_positions_in_cluster_queue(
    cluster: Cluster, queues: Queues, v1beta2: VisibilityClient
) -> None:
    a = queues.ns_a
    create_pending_jobs(cluster, ("lq-a-high-prio", queues.high, "a", a),
                        ("lq-b-mid-prio", queues.mid, "b", a), ("lq-b-low-prio", queues.low, "b", a))  # fmt: skip
    want = [
        pending_workload(a, "lq-a-high-prio", HIGH, "a", 0, 0),
        pending_workload(a, "lq-b-mid-prio", MID, "b", 0, 1),
        pending_workload(a, "lq-b-low-prio", LOW, "b", 1, 2),
    ]
    expect_items(lambda: v1beta2.cluster_queue_pending(queues.cluster_queue), want)


@kueue_case(GO, WHEN + "Should allow fetching information about pending workloads in LocalQueue")
def test_pending_workloads_in_local_queue(
    cluster: Cluster, queues: Queues, v1beta2: VisibilityClient
) -> None:
    one_pending_then_admitted(
        cluster, queues, lambda: v1beta2.local_queue_pending(queues.ns_a, "a")
    )


@kueue_case(
    GO,
    WHEN
    + "Should allow fetching information about position of pending workloads from different LocalQueues",
)
def test_positions_from_different_local_queues(
    cluster: Cluster, queues: Queues, v1beta2: VisibilityClient
) -> None:
    a = queues.ns_a
    create_pending_jobs(cluster, ("lq-a-high-prio", queues.high, "a", a),
                        ("lq-b-mid-prio", queues.mid, "b", a), ("lq-b-low-prio", queues.low, "b", a))  # fmt: skip
    expect_items(lambda: v1beta2.local_queue_pending(a, "a"),
                 [pending_workload(a, "lq-a-high-prio", HIGH, "a", 0, 0)])  # fmt: skip
    expect_items(lambda: v1beta2.local_queue_pending(a, "b"), [
        pending_workload(a, "lq-b-mid-prio", MID, "b", 0, 1),
        pending_workload(a, "lq-b-low-prio", LOW, "b", 1, 2),
    ])  # fmt: skip


@kueue_case(
    GO,
    WHEN
    + "Should fetch information about the position of pending workloads with the same localQueue name in different namespaces",
)
def test_positions_with_the_same_local_queue_name_in_different_namespaces(
    cluster: Cluster, queues: Queues, v1beta2: VisibilityClient
) -> None:
    name, a, b = "local-queue", queues.ns_a, queues.ns_b
    cluster.create_active("localqueues", make_local_queue(name, a, queues.cluster_queue), a)
    cluster.create_active("localqueues", make_local_queue(name, b, queues.cluster_queue), b)
    for job, namespace, priority in (("job-a", a, queues.mid), ("job-b", b, queues.low)):
        body = make_job(job, namespace, queue=name, requests={"cpu": "2"}, priority_class=priority)
        cluster.batch.create_namespaced_job(namespace, body)
    expect_items(lambda: v1beta2.local_queue_pending(a, name),
                 [pending_workload(a, "job-a", MID, name, 0, 0)])  # fmt: skip
    expect_items(lambda: v1beta2.local_queue_pending(b, name),
                 [pending_workload(b, "job-b", LOW, name, 0, 1)])  # fmt: skip


@kueue_case(
    GO,
    WHEN
    + "Should allow fetching information about position of pending workloads from different LocalQueues from different Namespaces",
)
def test_positions_from_local_queues_in_different_namespaces(
    cluster: Cluster, queues: Queues, v1beta2: VisibilityClient
) -> None:
    a, b = queues.ns_a, queues.ns_b
    cluster.create_active("localqueues", make_local_queue("b", b, queues.cluster_queue), b)
    create_pending_jobs(cluster, ("lq-a-high-prio", queues.high, "a", a),
                        ("lq-b-mid-prio", queues.mid, "b", b), ("lq-b-low-prio", queues.low, "b", b))  # fmt: skip
    expect_items(lambda: v1beta2.local_queue_pending(a, "a"),
                 [pending_workload(a, "lq-a-high-prio", HIGH, "a", 0, 0)])  # fmt: skip
    expect_items(lambda: v1beta2.local_queue_pending(b, "b"), [
        pending_workload(b, "lq-b-mid-prio", MID, "b", 0, 1),
        pending_workload(b, "lq-b-low-prio", LOW, "b", 1, 2),
    ])  # fmt: skip


def batch_user_role_binding(namespace: str, kueue_ns: str) -> dict:
    """mustCreateBatchUserRoleBinding: read-pending-workloads, kueue-batch-user-role for the
    kueue namespace's default ServiceAccount."""
    return {
        "metadata": {"name": "read-pending-workloads", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "kueue-batch-user-role"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": kueue_ns}],
    }  # fmt: skip


@pytest.fixture
def rbac(api_client: client.ApiClient) -> client.RbacAuthorizationV1Api:
    return client.RbacAuthorizationV1Api(api_client)


@kueue_case(
    GO,
    WHEN
    + "A subject is bound to kueue-batch-user-role, but not to kueue-batch-admin-role, and reads a LocalQueue sharing a ClusterQueue across Namespaces Should only expose pending workloads from the caller's own Namespace",
)
def test_batch_user_sees_only_their_namespace(
    cluster: Cluster,
    queues: Queues,
    kueue_ns: str,
    impersonated: VisibilityClient,
    rbac: client.RbacAuthorizationV1Api,
) -> None:
    a, b = queues.ns_a, queues.ns_b
    cluster.create_active("localqueues", make_local_queue("b", b, queues.cluster_queue), b)
    create_pending_jobs(cluster, ("lq-a-low-prio", queues.low, "a", a),
                        ("lq-b-mid-prio", queues.mid, "b", b))  # fmt: skip
    rbac.create_namespaced_role_binding(a, batch_user_role_binding(a, kueue_ns))
    eventually_status(lambda: impersonated.local_queue_pending(a, "non-existent"), 404)
    try:
        expect_items(lambda: impersonated.local_queue_pending(a, "a"),
                     [pending_workload(a, "lq-a-low-prio", LOW, "a", 0, 1)])  # fmt: skip
        expect_status(lambda: impersonated.local_queue_pending(b, "b"), 403)
        expect_status(lambda: impersonated.cluster_queue_pending(queues.cluster_queue), 403)
    finally:
        _delete_quietly(lambda: rbac.delete_namespaced_role_binding("read-pending-workloads", a))


@kueue_case(
    GO,
    "Kueue visibility server A subject is bound to kueue-batch-admin-role Should return an appropriate error",
)
def test_batch_admin_gets_not_found(
    ns: str, kueue_ns: str, impersonated: VisibilityClient, rbac: client.RbacAuthorizationV1Api
) -> None:
    name = f"read-pending-workloads-{ns}"
    rbac.create_cluster_role_binding({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "kueue-batch-admin-role"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": kueue_ns}],
    })  # fmt: skip
    try:
        eventually_status(lambda: impersonated.cluster_queue_pending("non-existent"), 404)
        expect_status(lambda: impersonated.cluster_queue_pending("non-existent"), 404)
        expect_status(lambda: impersonated.local_queue_pending(ns, "non-existent"), 404)
    finally:
        _delete_quietly(lambda: rbac.delete_cluster_role_binding(name))


@kueue_case(
    GO,
    "Kueue visibility server A subject is bound to kueue-batch-user-role, but not to kueue-batch-admin-role Should return an appropriate error",
)
def test_batch_user_gets_forbidden_outside_their_namespace(
    ns: str, kueue_ns: str, impersonated: VisibilityClient, rbac: client.RbacAuthorizationV1Api
) -> None:
    rbac.create_namespaced_role_binding(ns, batch_user_role_binding(ns, kueue_ns))
    try:
        eventually_status(lambda: impersonated.local_queue_pending(ns, "non-existent"), 404)
        expect_status(lambda: impersonated.cluster_queue_pending("non-existent"), 403)
        expect_status(lambda: impersonated.local_queue_pending(ns, "non-existent"), 404)
        expect_status(lambda: impersonated.local_queue_pending("default", "non-existent"), 403)
    finally:
        _delete_quietly(lambda: rbac.delete_namespaced_role_binding("read-pending-workloads", ns))


@kueue_case(
    GO,
    "Kueue visibility server A subject is not bound to kueue-batch-user-role, nor to kueue-batch-admin-role Should return an appropriate error",
)
def test_unbound_subject_gets_forbidden(ns: str, impersonated: VisibilityClient) -> None:
    expect_status(lambda: impersonated.cluster_queue_pending("non-existent"), 403)
    expect_status(lambda: impersonated.local_queue_pending(ns, "non-existent"), 403)
