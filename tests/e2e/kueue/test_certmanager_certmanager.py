"""Kueue v0.19.2 test/e2e/certmanager/certmanager_test.go, ported: Tower's webhook serving the
certificate cert-manager issued (its Secret mounted, the cainjector's CA in the webhook
configurations and CRDs), played by tests/e2e/kueue/certmanager.py; a Job is then queued
and admitted as usual. The suite's own certificates are put back afterwards."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.e2e.conftest import webhook_host_port
from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.certmanager import CertManager, serve_webhook_from
from tests.e2e.kueue.util import (
    BEHAVIOR_WAIT_FOR_DELETION,
    KUEUE_NS,
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
GO = "certmanager/certmanager_test.go"


@pytest.fixture(scope="module")
def cert_manager(
    tower: Tower, api_client: client.ApiClient, user_roles: None
) -> Iterator[CertManager]:
    host, _ = webhook_host_port()
    issued = CertManager(
        client.CoreV1Api(api_client), KUEUE_NS, "tower-webhook-tls",
        tower.tmp / "cert-manager-webhook", ip=host,
    ).start()  # fmt: skip
    serve_webhook_from(tower, issued.folder)
    yield issued
    serve_webhook_from(tower, tower.tmp / "certs")
    issued.stop()


@pytest.fixture
def queues(
    cert_manager: CertManager, cluster: Cluster, kubelet_namespaces: set[str]
) -> Iterator[str]:
    ns = cluster.create_namespace_from_prefix("e2e-cert-manager-")
    kubelet_namespaces.add(ns)
    cluster.create("resourceflavors", make_resource_flavor("default"))
    cluster.create_active(
        "clusterqueues",
        make_cluster_queue("cluster-queue", make_flavor_quotas("default", cpu="2", memory="2G")),
    )
    cluster.create_active("localqueues", make_local_queue("main", ns, "cluster-queue"), ns)
    yield ns
    cluster.delete_namespace(ns)
    cluster.expect_deleted("clusterqueues", "cluster-queue", MEDIUM_TIMEOUT)
    cluster.expect_deleted("resourceflavors", "default", MEDIUM_TIMEOUT)


@kueue_case(GO, "CertManager CertManager is Enabled should admit a Job")
def test_a_job_is_admitted_through_a_webhook_on_cert_managers_certificate(
    cluster: Cluster, queues: str
) -> None:
    ns = queues
    job = make_job("test-job", ns, queue="main", args=BEHAVIOR_WAIT_FOR_DELETION)
    job["spec"]["suspend"] = False
    created = cluster.batch.create_namespaced_job(ns, job)
    cluster.expect_job_unsuspended_with_node_selectors("test-job", ns, {})
    name = cluster.workload_for_job(created, ns)
    eventually(
        lambda: ((cluster.workload(name, ns) or {}).get("status") or {}).get("admission"),
        TIMEOUT,
        "the Workload admitted",
    )
