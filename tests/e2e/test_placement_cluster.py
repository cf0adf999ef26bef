"""Physical fit on a real cluster: the real kube-scheduler calls Tower's extender, and the
pods of an admitted workload land on the nodes of its plan, not where the scheduler's own
scoring would put them.

Needs a kube-scheduler configured with deploy/scheduler/kube-scheduler-config.yaml whose
urlPrefix points at this machine: `TOWER_E2E_SCHEDULER_EXTENDER` names that HOST:PORT, and
Tower's controller serves the extender there. Three GPU nodes are made (4, 4 and 8 GPUs),
alike in cpu and memory, which are all the scheduler's own scoring weighs: alone, it puts a
4-GPU pod on the 8-GPU node as readily as on the others (two runs in three would split it).
The plan puts the two 4-GPU pods on the two 4-GPU nodes, keeping the 8-GPU node whole for
the 8-GPU job, which is then admitted onto it.
"""

from __future__ import annotations

import json
import os
import re
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.e2e.conftest import KUBECONFIG, kubectl, wait, webhook_host_port

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
EXTENDER = os.environ.get("TOWER_E2E_SCHEDULER_EXTENDER")
# A letter first: kubectl reads YAML 1.2, where a bare "036e0" (which PyYAML writes unquoted)
# is a number, and a label value must be a string.
SUFFIX = "g" + uuid.uuid4().hex[:5]
NS = f"tower-gpu-{SUFFIX}"
GPU = "nvidia.com/gpu"
NODES = {f"gpu-{SUFFIX}-a": 4, f"gpu-{SUFFIX}-b": 4, f"gpu-{SUFFIX}-big": 8}


def config() -> str:
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": f"a100-{SUFFIX}"},
            "spec": {"nodeLabels": {"tower-e2e/gpu": SUFFIX}},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": f"gpus-{SUFFIX}"},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", GPU],
                        "flavors": [
                            {
                                "name": f"a100-{SUFFIX}",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "64"},
                                    {"name": "memory", "nominalQuota": "256Gi"},
                                    {"name": GPU, "nominalQuota": "16"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"namespace": NS, "name": "gpus"},
            "spec": {"clusterQueue": f"gpus-{SUFFIX}"},
        },
    ]
    return yaml.safe_dump_all(docs)


def node(name: str, gpus: int) -> dict[str, Any]:
    allocatable = {"cpu": "32", "memory": "128Gi", "pods": "110", GPU: str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"tower-e2e/gpu": SUFFIX}},
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def gpu_job(name: str, pods: int, gpus: int) -> dict[str, Any]:
    container = {
        "name": "train",
        "image": "busybox:1.36",
        "command": ["sh", "-c", "sleep 600"],
        "resources": {"requests": {"cpu": "1", "memory": "1Gi", GPU: str(gpus)},
                      "limits": {GPU: str(gpus)}},
    }  # fmt: skip
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "gpus"}},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


@pytest.fixture(scope="module")
def tower(tmp_path_factory, api_client, kubelet_namespaces):
    if not EXTENDER:
        pytest.skip(
            "TOWER_E2E_SCHEDULER_EXTENDER is not set: the HOST:PORT that the cluster's "
            "kube-scheduler calls as its extender (deploy/scheduler/kube-scheduler-config.yaml)"
        )
    from tests.e2e.test_scenarios_cluster import Tower

    host, port = webhook_host_port()
    kubectl("apply", "-f", str(ROOT / "deploy" / "crds"), "-f", str(ROOT / "deploy" / "rbac"))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    core = client.CoreV1Api(api_client)
    for name, gpus in NODES.items():
        core.create_node(node(name, gpus))
        kubectl("taint", "nodes", name, "node.kubernetes.io/not-ready:NoSchedule-", check=False)
    kubectl("create", "namespace", NS)
    kubelet_namespaces.add(NS)
    queues = config()
    kubectl("apply", "-f", "-", input=queues)

    class PlacingTower(Tower):
        def start_controller(self, i: int) -> Any:
            extra = ["--scheduler-extender-address", EXTENDER] if i == 0 else []
            return self._spawn(
                f"controller-{i}", "extender", "run", "--kubeconfig", KUBECONFIG or "",
                "--health-address", "127.0.0.1:0", "--metrics-address", "127.0.0.1:0",
                "--status-interval", "0.5",
                "--leader-election-id", f"tower-gpu-{SUFFIX}", *extra,
            )  # fmt: skip

    tower = PlacingTower(tmp_path_factory.mktemp("tower-gpu"), host, port)
    # Until its caches have synced, the extender lets every pod through (kube-scheduler is told
    # to go on without it), and the other replica may already be admitting: wait for the
    # readiness a Deployment would wait for.
    wait(lambda: extender_ready(tower.tmp / "controller-0.log"), 60, "the extender's replica ready")
    yield tower
    tower.stop()
    kubectl("delete", "namespace", NS, "--wait=true", "--timeout=120s", check=False)
    kubectl("delete", "-f", "-", "--ignore-not-found", input=queues, check=False)
    kubectl("delete", "node", *NODES, "--ignore-not-found", check=False)
    kubectl("delete", "lease", f"tower-gpu-{SUFFIX}", "-n", "tower-system",
            "--ignore-not-found", check=False)  # fmt: skip
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        kubectl("delete", kind, "-l", "app.kubernetes.io/part-of=tower", "--ignore-not-found",
                check=False)  # fmt: skip
    assert "Traceback" not in tower.logs(), tower.logs()[-5000:]


def extender_ready(log: Path) -> bool:
    found = re.search(r"health on port (\d+)", log.read_text()) if log.exists() else None
    if found is None:
        return False
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{found[1]}/readyz", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:  # refused, or 503 (HTTPError) while the caches sync
        return False


def plan_of(api_client, job: str) -> dict[str, Any] | None:
    items = client.CustomObjectsApi(api_client).list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", NS, "workloads"
    )["items"]
    for wl in items:
        if wl["metadata"]["name"].startswith(f"job-{job}-"):
            raw = (wl["metadata"].get("annotations") or {}).get("tower.dev/placement")
            return json.loads(raw) if raw else None
    return None


def nodes_of_pods(api_client, job: str, count: int) -> list[str] | None:
    pods = (
        client.CoreV1Api(api_client)
        .list_namespaced_pod(NS, label_selector=f"batch.kubernetes.io/job-name={job}")
        .items
    )
    names = sorted(p.spec.node_name for p in pods if p.spec.node_name)
    return names if len(names) == count else None


def test_the_real_scheduler_puts_pods_where_the_plan_says(tower, api_client):
    batch = client.BatchV1Api(api_client)
    batch.create_namespaced_job(NS, gpu_job("two-by-4", 2, 4))
    plan = wait(lambda: plan_of(api_client, "two-by-4"), 60, "a plan for two-by-4")
    # The tightest nodes that hold a pod each: the two 4-GPU nodes, the 8-GPU one kept whole.
    assert plan == {"main": {f"gpu-{SUFFIX}-a": 1, f"gpu-{SUFFIX}-b": 1}}
    placed = wait(lambda: nodes_of_pods(api_client, "two-by-4", 2), 120, "two-by-4 scheduled")
    assert placed == [f"gpu-{SUFFIX}-a", f"gpu-{SUFFIX}-b"]

    batch.create_namespaced_job(NS, gpu_job("one-by-8", 1, 8))
    plan = wait(lambda: plan_of(api_client, "one-by-8"), 60, "a plan for one-by-8")
    assert plan == {"main": {f"gpu-{SUFFIX}-big": 1}}
    placed = wait(lambda: nodes_of_pods(api_client, "one-by-8", 1), 120, "one-by-8 scheduled")
    assert placed == [f"gpu-{SUFFIX}-big"]
    # kube-scheduler asked the extender (its own metric, on the controller that serves it).
    assert "scheduler extender on http" in tower.logs()
