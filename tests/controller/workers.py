"""A MultiKueue worker for controller tests: a second API double with Tower's CRDs, the
webhook, a Job controller and its own Tower; and the manager's Secret and cluster for it."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from certs import kube as certs_kube
from extender.kube.api import resources as r
from extender.kube.controller.context import Settings
from extender.kube.generators.crds import custom_resource_definitions
from tests.apidouble import ApiDouble, JobRunner
from tests.controller.conftest import CRDS, Cluster, Running


@contextmanager
def worker_cluster(tmp: Path, webhook: Any, *crds: dict[str, Any]) -> Iterator[Cluster]:
    """The worker's API double (with these CRDs too) and its webhook; stopped after."""
    api = ApiDouble(bookmark_interval=1.0)
    api.start()
    runner = JobRunner(api)
    tmp.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(api, tmp)
    try:
        for crd in [*custom_resource_definitions(), *crds]:
            cluster.admin.create(CRDS, crd)
        cluster.admin.create(r.NAMESPACES, {"metadata": {"name": "tower-system"}})
        ca = (webhook.certs / "ca.crt").read_bytes()
        certs_kube.install(cluster.admin.api_client, webhook.url, ca)
        yield cluster
    finally:
        runner.stop()
        api.stop()


@contextmanager
def worker_tower(cluster: Cluster, **settings: Any) -> Iterator[Running]:
    """The worker's own Tower, in a thread."""
    running = Running(cluster.controller_client(), Settings(status_interval=0.05, **settings))
    try:
        yield running
    finally:
        running.halt()


def worker_secret(manager: Cluster, worker: Cluster, secret: str) -> None:
    """The worker's kubeconfig in a Secret of Tower's namespace on the manager (key
    `kubeconfig`, as Kueue's setup guide makes it)."""
    data = base64.b64encode(Path(worker.admin_config).read_bytes()).decode()
    manager.admin.create(
        r.SECRETS,
        {"metadata": {"name": secret, "namespace": "tower-system"}, "data": {"kubeconfig": data}},
        "tower-system",
    )


def name_worker(manager: Cluster, worker: Cluster, name: str, secret: str) -> None:
    """The worker's kubeconfig Secret, and the MultiKueueCluster that names it."""
    worker_secret(manager, worker, secret)
    manager.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "MultiKueueCluster",
            "metadata": {"name": name},
            "spec": {
                "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret}}
            },
        }
    )
