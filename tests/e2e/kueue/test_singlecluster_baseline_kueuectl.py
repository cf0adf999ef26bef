"""Kueue v0.19.2 test/e2e/singlecluster/baseline/kueuectl_test.go, ported: kueuectl's sanity
case, run with Tower's kueuectl (`kubectl tower`, the installed console script)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import KUBECONFIG
from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.util import Cluster, make_cluster_queue

pytestmark = pytest.mark.e2e
GO = "singlecluster/baseline/kueuectl_test.go"
# The console script pyproject.toml installs beside the interpreter (kueuectlPath).
KUEUECTL = str(Path(sys.executable).with_name("kubectl-tower"))


@pytest.fixture
def cluster_queue(cluster: Cluster, ns: str) -> Iterator[str]:
    """The BeforeEach's ClusterQueue e2e-cq-NS: no resource groups, Active."""
    name = f"e2e-cq-{ns}"
    body = make_cluster_queue(name)
    body["spec"] = {"namespaceSelector": {}}
    cluster.create_active("clusterqueues", body)
    yield name
    cluster.expect_deleted("clusterqueues", name)


def kueuectl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KUEUECTL, "--kubeconfig", KUBECONFIG or "", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@kueue_case(GO, "Kueuectl Should create a local queue and list it back")
def test_creates_a_local_queue_and_lists_it_back(ns: str, cluster_queue: str) -> None:
    created = kueuectl("create", "localqueue", "e2e-lq-sanity", "--clusterqueue", cluster_queue,
                       "--namespace", ns)  # fmt: skip
    assert created.returncode == 0, f"create: {created.stdout}{created.stderr}"
    listed = kueuectl("list", "localqueue", "--namespace", ns, "-o", "json")
    assert listed.returncode == 0, f"list: stderr {listed.stderr}"
    items = json.loads(listed.stdout)["items"]
    assert any(
        lq["metadata"]["name"] == "e2e-lq-sanity" and lq["spec"]["clusterQueue"] == cluster_queue
        for lq in items
    ), f"local queues listed: {[(i['metadata']['name'], i['spec']) for i in items]}"
