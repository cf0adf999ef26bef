"""Kueue's topology-aware scheduling examples on a real kube-apiserver, kube-controller-manager
and kube-scheduler: eight Nodes labelled as Kueue's TAS kind cluster is (two blocks of two racks
of two hosts), Kueue's sample queues and Jobs applied unchanged. The real Job controller makes
the pods (gated by kueue.x-k8s.io/topology), Tower gives each its host, and the real scheduler
binds it there: the required Job's pods only inside one rack; the preferred Job, which no block
holds, spread over both blocks; the unconstrained Job wherever there is room; a Job larger than
any rack waits with Kueue's message though the quota holds it. With a ProvisioningRequest
check on the flavor, placement waits for the request to be Provisioned (Kueue's delayed
topology request; cluster-autoscaler's part is played by setting its condition)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests import yamlc
from tests.builders import provisioning_check, ready_node
from tests.e2e.conftest import controller_process, kubectl, serve_webhook, wait, webhook_host_port

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "tests" / "data" / "kueue-v0.19.2" / "examples" / "tas"
BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
HOSTNAME = "kubernetes.io/hostname"
NODES = {
    f"tas-{block}-{rack}-{i}": (block, rack)
    for block in ("b1", "b2")
    for rack in ("r1", "r2")
    for i in (1, 2)
}


def node(name: str, block: str, rack: str) -> dict[str, Any]:
    labels = {
        "cloud.provider.com/node-group": "tas-group",
        BLOCK: block,
        RACK: rack,
        HOSTNAME: name,
    }
    return ready_node(name, labels, {"cpu": "8", "memory": "32Gi", "pods": "110"})


@pytest.fixture(scope="module")
def tower(tmp_path_factory, api_client, kubelet_namespaces):
    webhook_host_port()
    tmp = tmp_path_factory.mktemp("topology")
    kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    core = client.CoreV1Api(api_client)
    for name, (block, rack) in NODES.items():
        core.create_node(node(name, block, rack))
        kubectl("taint", "nodes", name, "node.kubernetes.io/not-ready:NoSchedule-", check=False)
    webhook = serve_webhook(tmp, ["--controller-username", "kubernetes-admin"])
    kubectl("apply", "-f", str(EXAMPLES / "sample-queues.yaml"))
    kubelet_namespaces.add("default")
    controller = controller_process()
    yield core
    controller.terminate()
    controller.wait(timeout=30)
    webhook.terminate()
    webhook.wait(timeout=20)
    kubectl("delete", "jobs", "-n", "default", "-l", "kueue.x-k8s.io/queue-name=tas-user-queue",
            "--wait=false", check=False)  # fmt: skip
    kubectl("delete", "workloads", "--all", "-n", "default", "--wait=false", check=False)
    for name in kubectl("get", "workloads", "-n", "default", "-o", "name", check=False).split():
        kubectl("patch", name, "-n", "default", "--type=merge", "-p",
                '{"metadata":{"finalizers":null}}', check=False)  # fmt: skip
    kubectl("delete", "-f", str(EXAMPLES / "sample-queues.yaml"), "--wait=false", check=False)
    kubectl("delete", "node", *NODES, "--ignore-not-found", check=False)
    kubectl("delete", "mutatingwebhookconfiguration", "tower-mutating-webhook", check=False)
    kubectl("delete", "validatingwebhookconfiguration", "tower-validating-webhook", check=False)


def create(example: str, **changes: Any) -> str:
    """`kubectl create -f` an example (it uses generateName); the Job's name."""
    (job,) = yamlc.safe_load_all((EXAMPLES / example).read_text())
    if changes:
        job["spec"] = {**job["spec"], **changes}
    out = kubectl("create", "-n", "default", "-f", "-", "-o", "json", input=json.dumps(job))
    return str(json.loads(out)["metadata"]["name"])


def workload_of(job: str) -> dict[str, Any] | None:
    for workload in json.loads(kubectl("get", "workloads", "-n", "default", "-o", "json"))["items"]:
        owners = workload["metadata"].get("ownerReferences") or []
        if any(o["kind"] == "Job" and o["name"] == job for o in owners):
            return workload  # type: ignore[no-any-return]
    return None


def assignment(job: str) -> dict[str, int] | None:
    """Pods per host in the Workload's topologyAssignment, once written."""
    workload = workload_of(job)
    admission = ((workload or {}).get("status") or {}).get("admission")
    if not admission:
        return None
    topology = admission["podSetAssignments"][0]["topologyAssignment"]
    assert topology["levels"] == [HOSTNAME]
    out: dict[str, int] = {}
    for piece in topology["slices"]:
        (level,) = piece["valuesPerLevel"]
        for i in range(piece["domainCount"]):
            if "universal" in level:
                host = level["universal"]
            else:
                ind = level["individual"]
                host = ind.get("prefix", "") + ind["roots"][i] + ind.get("suffix", "")
            counts = piece["podCounts"]
            out[host] = counts["universal"] if "universal" in counts else counts["individual"][i]
    return out


def bound(core: client.CoreV1Api, job: str, count: int) -> Counter[str] | None:
    pods = core.list_namespaced_pod("default", label_selector=f"batch.kubernetes.io/job-name={job}")
    hosts = Counter(p.spec.node_name for p in pods.items if p.spec.node_name)
    return hosts if sum(hosts.values()) == count else None


PR_CRD = ROOT / "tests" / "data" / "autoscaler" / "autoscaling.x-k8s.io_provisioningrequests.yaml"
DELAYED_SETUP = [
    *reversed(provisioning_check("tas-prov", "tas-prov-config")),
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "tas-prov-queue"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": "tas-flavor",
                            "resources": [
                                {"name": "cpu", "nominalQuota": 100},
                                {"name": "memory", "nominalQuota": "100Gi"},
                            ],
                        }
                    ],
                }
            ],
            "admissionChecksStrategy": {"admissionChecks": [{"name": "tas-prov"}]},
        },
    },
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "tas-prov-user-queue", "namespace": "default"},
        "spec": {"clusterQueue": "tas-prov-queue"},
    },
]


def test_a_provisioning_check_delays_the_placement_until_provisioned(tower):
    """Kueue's delayed topology request: quota reserved with delayedTopologyRequest Pending
    and no placement while the ProvisioningRequest is pending; once it is Provisioned, the
    pods are placed in one rack (Ready), the Job starts and the real scheduler binds them."""
    core = tower
    kubectl("apply", "-f", str(PR_CRD))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    setup = json.dumps({"apiVersion": "v1", "kind": "List", "items": DELAYED_SETUP})
    kubectl("apply", "-f", "-", input=setup)
    name = ""
    try:
        (job,) = yamlc.safe_load_all((EXAMPLES / "sample-job-required.yaml").read_text())
        job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "tas-prov-user-queue"
        job["spec"] = {**job["spec"], "parallelism": 2, "completions": 2}
        out = kubectl("create", "-n", "default", "-f", "-", "-o", "json", input=json.dumps(job))
        name = str(json.loads(out)["metadata"]["name"])

        def reserved() -> tuple[dict[str, Any], str] | None:
            workload = workload_of(name)
            admission = ((workload or {}).get("status") or {}).get("admission")
            if not workload or not admission:
                return None
            request = f"{workload['metadata']['name']}-tas-prov-1"
            found = kubectl("get", "provisioningrequests", request, "-n", "default",
                            "-o", "name", check=False)  # fmt: skip
            return (workload, request) if found.strip() else None

        workload, request = wait(reserved, 60, "quota reserved and capacity requested")
        (psa,) = workload["status"]["admission"]["podSetAssignments"]
        assert psa["delayedTopologyRequest"] == "Pending"
        assert "topologyAssignment" not in psa
        started = json.loads(kubectl("get", "job", name, "-n", "default", "-o", "json"))
        assert started["spec"]["suspend"] is True

        condition = {
            "type": "Provisioned",
            "status": "True",
            "reason": "Provisioned",
            "message": "Provisioned",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        kubectl("patch", "provisioningrequests", request, "-n", "default", "--subresource=status",
                "--type=merge", "-p", json.dumps({"status": {"conditions": [condition]}}))  # fmt: skip
        placed = wait(lambda: assignment(name), 60, "the placement once provisioned")
        assert sum(placed.values()) == 2
        assert len({NODES[host] for host in placed}) == 1, placed
        (psa,) = workload_of(name)["status"]["admission"]["podSetAssignments"]  # type: ignore[index]
        assert psa["delayedTopologyRequest"] == "Ready"
        hosts = wait(lambda: bound(core, name, 2), 120, "the delayed job's pods bound")
        assert dict(hosts) == placed
    finally:
        kubectl("delete", "jobs", "-n", "default", "-l",
                "kueue.x-k8s.io/queue-name=tas-prov-user-queue", "--wait=false",
                check=False)  # fmt: skip
        # No kubelet finishes the pods here: gone at once, so the next test's pods bind.
        kubectl("delete", "pods", "-n", "default", "-l", f"batch.kubernetes.io/job-name={name}",
                "--force", "--grace-period=0", check=False)  # fmt: skip
        kubectl("delete", "provisioningrequests", "--all", "-n", "default", check=False)
        kubectl("delete", "-f", "-", "--wait=false", input=setup, check=False)


def test_kueues_examples_are_placed_and_bound_in_their_domains(tower):
    core = tower
    listed = kubectl("get", "topologies")
    assert listed.split()[:3] == ["NAME", "AGE", "default"]

    # Required: one rack. The real scheduler binds each pod to the host Tower gave it.
    required = create("sample-job-required.yaml")
    placed = wait(lambda: assignment(required), 60, "the required job's topology assignment")
    assert sum(placed.values()) == 10
    racks = {NODES[host] for host in placed}
    assert len(racks) == 1, placed
    hosts = wait(lambda: bound(core, required, 10), 120, "the required job's pods bound")
    assert dict(hosts) == placed

    # Preferred, 40 pods: no block holds them (32 cpu each, 10 taken): spread over both.
    preferred = create("sample-job-preferred.yaml")
    placed = wait(lambda: assignment(preferred), 60, "the preferred job's topology assignment")
    assert sum(placed.values()) == 40
    assert {NODES[host][0] for host in placed} == {"b1", "b2"}
    hosts = wait(lambda: bound(core, preferred, 40), 180, "the preferred job's pods bound")
    assert dict(hosts) == placed

    # Unconstrained (Kueue's example, 10 pods): anywhere there is room, the tightest hosts
    # first; bound where placed.
    loose = create("sample-job-unconstrained.yaml")
    placed = wait(lambda: assignment(loose), 60, "the unconstrained job's topology assignment")
    assert sum(placed.values()) == 10
    hosts = wait(lambda: bound(core, loose, 10), 180, "the unconstrained job's pods bound")
    assert dict(hosts) == placed

    # 14 pods in one rack: the quota (100 cpu) holds them, no rack (16 cpu, partly used) does.
    big = create("sample-job-required.yaml", parallelism=14, completions=14)

    def message() -> str | None:
        workload = workload_of(big)
        for condition in ((workload or {}).get("status") or {}).get("conditions") or []:
            if condition["type"] == "QuotaReserved" and condition["status"] == "False":
                return str(condition["message"])
        return None

    why = wait(message, 60, "the big job's reason")
    assert why.startswith(
        'couldn\'t assign flavors to pod set main: topology "default" allows to fit only '
    ), why
    assert "out of 14 pod(s)" in why
    job = json.loads(kubectl("get", "job", big, "-n", "default", "-o", "json"))
    assert job["spec"]["suspend"] is True
