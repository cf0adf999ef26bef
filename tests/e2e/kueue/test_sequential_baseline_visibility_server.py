"""Kueue v0.19.2 test/e2e/sequential/baseline/visibility_server_test.go, ported.

Kueue's case restarts its Deployment with visibilityServer.bindPort set and points its
Service's targetPort there. Here the controller is restarted with that Configuration, and the
Service (without selector) and its Endpoints are pointed at the new port: the endpoints
controller's part in Kueue's cluster is played by the fixture.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.util import (
    CONFIGURATION,
    TIMEOUT,
    VISIBILITY_SERVICE,
    Cluster,
    Tower,
    VisibilityClient,
    eventually,
    free_port,
)

pytestmark = pytest.mark.e2e
GO = "sequential/baseline/visibility_server_test.go"
CQ_NAME = "test-kubeconfig-cq"


def point_service_at(core: client.CoreV1Api, namespace: str, port: int) -> None:
    """The Service's https targetPort, and its Endpoints' port, set to `port`."""
    service = core.read_namespaced_service(VISIBILITY_SERVICE, namespace)
    for p in service.spec.ports:
        if p.name == "https":
            p.target_port = port
    core.replace_namespaced_service(VISIBILITY_SERVICE, namespace, service)
    endpoints = core.read_namespaced_endpoints(VISIBILITY_SERVICE, namespace)
    for subset in endpoints.subsets:
        for p in subset.ports:
            p.port = port
    core.replace_namespaced_endpoints(VISIBILITY_SERVICE, namespace, endpoints)


@pytest.fixture
def custom_port(
    api_client: client.ApiClient, tower: Tower, visibility_api: str, cluster: Cluster
) -> Iterator[int]:
    """BeforeAll (the Configuration's visibilityServer.bindPort, Kueue restarted) and
    BeforeEach (the ClusterQueue); the AfterEach puts the Service and the controller back."""
    assert tower.visibility is not None
    port = free_port(tower.visibility[0])
    tower.restart_controller(
        CONFIGURATION + f"visibilityServer:\n  bindPort: {port}\n", visibility_from_file=True
    )
    cluster.create_active("clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": CQ_NAME}, "spec": {"namespaceSelector": {}},
    })  # fmt: skip
    core = client.CoreV1Api(api_client)
    yield port
    point_service_at(core, visibility_api, tower.visibility[1])
    tower.restart_controller()
    cluster.expect_deleted("clusterqueues", CQ_NAME)


@kueue_case(
    GO, "Visibility Server Should use the custom port from the visibilityServer configuration API"
)
def test_uses_the_custom_port_of_the_configuration(
    api_client: client.ApiClient, visibility_api: str, custom_port: int
) -> None:
    point_service_at(client.CoreV1Api(api_client), visibility_api, custom_port)

    def answers() -> bool:
        try:
            VisibilityClient("v1beta2").cluster_queue_pending(CQ_NAME)
        except client.ApiException as err:
            raise AssertionError(f"{err.status}: {err.body}") from err
        return True

    eventually(answers, TIMEOUT, "the visibility API on the custom port")
