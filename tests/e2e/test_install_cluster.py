"""Tower installed as users install it, on a real node: kustomize, then Helm, each from nothing.

Tower's own pods really run (the image made by scripts/image.py, loaded on the node). For
each way in: both controller and both webhook replicas Ready with no restart; the init
container's certificates in the webhook configurations and the CRDs' conversion; a labelled
Job created through the webhook's Service comes back suspended; a v1beta1 read converts
through it; Kueue's quick-start runs to the end with real pods; the leading controller pod
deleted, the other leads and a new Job completes; the uninstall leaves nothing behind. Helm
also upgrades with a changed value. Nodes without a kubelet are cordoned meanwhile.

The node has 2 CPUs and Tower's four pods request 600m of them, so the quick-start's cpu is
scaled by a third: Jobs of 1 cpu (not 3) in a ClusterQueue of 1500m (not 4); memory is as
Kueue's (4Gi a Job, 8Gi of quota). One Job still runs and the other waits, as in Kueue's.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import yamlc
from tests.e2e.conftest import (
    KUBECONFIG,
    helm_binary,
    kubectl,
    measured,
    only_real_nodes,
    wait,
)

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
NS = "tower-system"
QS = "tower-quickstart"


def get(*args: str) -> Any:
    """`kubectl get -o json`, read from its stdout alone (a deprecated version warns)."""
    done = subprocess.run(["kubectl", "--kubeconfig", KUBECONFIG or "", "get", *args, "-o", "json"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, f"kubectl get {' '.join(args)}: {done.stderr}"
    return json.loads(done.stdout)


def quick_start_queues() -> str:
    docs = yamlc.safe_load_all((ROOT / "examples/quickstart/01-queues.yaml").read_text())
    out = []
    for doc in docs:
        if doc["kind"] == "ClusterQueue":
            for group in doc["spec"]["resourceGroups"]:
                for flavor in group["flavors"]:
                    for resource in flavor["resources"]:
                        if resource["name"] == "cpu":
                            resource["nominalQuota"] = "1500m"
        if doc["kind"] == "LocalQueue":
            doc["metadata"]["namespace"] = QS
        out.append(doc)
    return yaml.safe_dump_all(out)


def quick_start_job() -> str:
    doc = yamlc.safe_load_all((ROOT / "examples/quickstart/02-jobs.yaml").read_text())[0]
    doc["metadata"]["namespace"] = QS
    doc["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
    return yaml.safe_dump_all([doc])


def pods(label: str) -> list[dict[str, Any]]:
    return get("pods", "-n", NS, "-l", f"app.kubernetes.io/name={label}")["items"]


def ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def restarts() -> list[str]:
    """Each restarted container of Tower's pods, with why its last run ended."""
    out = []
    for pod in get("pods", "-n", NS)["items"]:
        status = pod.get("status", {})
        for s in status.get("initContainerStatuses", []) + status.get("containerStatuses", []):
            if s.get("restartCount"):
                ended = s.get("lastState", {}).get("terminated", {})
                out.append(
                    f"{pod['metadata']['name']}/{s['name']}: {s['restartCount']} restarts, last "
                    f"{ended.get('reason')} exit {ended.get('exitCode')}"
                )
    return out


def all_ready() -> None:
    for name in ("tower-webhook", "tower-controller"):
        kubectl("rollout", "status", f"deployment/{name}", "-n", NS, "--timeout=300s")
    wait(lambda: len([p for p in pods("tower-controller") if ready(p)]) == 2, 120,
         "both controller replicas Ready (one leads, one stands by)")  # fmt: skip
    wait(lambda: len([p for p in pods("tower-webhook") if ready(p)]) == 2, 120,
         "both webhook replicas Ready")  # fmt: skip


def certificates_injected() -> None:
    assert get("secret", "tower-webhook-tls", "-n", NS)["data"]["tls.crt"]
    for kind, name in (
        ("mutatingwebhookconfiguration", "tower-mutating-webhook"),
        ("validatingwebhookconfiguration", "tower-validating-webhook"),
    ):
        hooks = get(kind, name)["webhooks"]
        assert all(h["clientConfig"].get("caBundle") for h in hooks), f"{name}: no caBundle"
    converted = [
        c["metadata"]["name"]
        for c in get("crd")["items"]
        if c["spec"].get("conversion", {}).get("strategy") == "Webhook"
    ]
    for name in converted:
        crd = get("crd", name)
        assert crd["spec"]["conversion"]["webhook"]["clientConfig"].get("caBundle"), name


def leader() -> str:
    lease = get("lease", "tower-controller", "-n", NS)
    return str(lease["spec"].get("holderIdentity") or "").split("_")[0]


def job_completes(name: str, timeout: float = 240) -> None:
    kubectl(
        "wait", "--for=condition=Complete", f"job/{name}", "-n", QS, f"--timeout={int(timeout)}s"
    )


def quick_start(how: str, started: float) -> None:
    """Kueue's quick-start with real pods: one Job runs, the other waits, then runs."""
    kubectl("create", "namespace", QS)
    kubectl("apply", "-f", "-", input=quick_start_queues())
    names = [
        kubectl("create", "-f", "-", "-o", "name", input=quick_start_job()).strip().split("/")[-1]
        for _ in range(2)
    ]

    def suspended() -> list[bool]:
        return [get("job", n, "-n", QS)["spec"].get("suspend", False) for n in names]

    wait(lambda: sorted(suspended()) == [False, True], 60, "one Job running, one waiting")
    first = names[suspended().index(False)]
    second = names[1 - names.index(first)]
    job_completes(first)
    job_completes(second)
    logs = get("pods", "-n", QS, "-l", f"job-name={second}")["items"]
    assert logs[0]["status"]["phase"] == "Succeeded"
    measured(
        f"{how}: from nothing to the quick-start's second Job Complete in "
        f"{time.monotonic() - started:.0f} s, {len(restarts())} restarted containers of Tower's"
    )


def webhook_and_conversion_through_the_service() -> None:
    created = kubectl("create", "-f", "-", "-o", "json", input=yaml.safe_dump_all([{
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"generateName": "through-the-service-", "namespace": QS,
                     "labels": {"kueue.x-k8s.io/queue-name": "no-such-queue"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox:1.36", "command": ["true"]}]}}},
    }]))  # fmt: skip
    job = json.loads(created)
    assert job["spec"]["suspend"] is True, "the webhook did not suspend a queued Job"
    kubectl("delete", "job", job["metadata"]["name"], "-n", QS, "--wait=false")
    v1beta1 = get("clusterqueues.v1beta1.kueue.x-k8s.io", "cluster-queue")
    assert v1beta1["apiVersion"] == "kueue.x-k8s.io/v1beta1"


def hand_over() -> float:
    """The leading pod deleted: seconds until the other replica holds the lease."""
    first = leader()
    assert first, "no controller leads"
    start = time.monotonic()
    kubectl("delete", "pod", first, "-n", NS, "--wait=false")
    wait(lambda: leader() not in ("", first), 60, "the other replica to lead")
    return time.monotonic() - start


def after_hand_over(how: str) -> None:
    seconds = hand_over()
    measured(f"{how}: leader hand-over after the leading pod was deleted: {seconds:.1f} s")
    name = kubectl("create", "-f", "-", "-o", "name", input=quick_start_job()).strip()
    job_completes(name.split("/")[-1])


def nothing_left(how: str) -> None:
    """Nothing of Tower's in tower-system, and no cluster-scoped object of Tower's."""
    # Named kinds, not `all`: kubectl's discovery cache may still list the CRDs just deleted.
    kinds = "pod,deployment,replicaset,service,job,cronjob,cm,secret,lease,sa,role,rolebinding,pdb"
    left = kubectl("get", kinds, "-n", NS, "--ignore-not-found", "-o", "name", check=False)
    left_lines = [
        line for line in left.splitlines()
        if line and "kube-root-ca.crt" not in line and not line.startswith("serviceaccount/default")
        and "NotFound" not in line
    ]  # fmt: skip
    assert left_lines == [], f"{how} left {left_lines}"
    cluster = kubectl("get", "clusterrole,clusterrolebinding,mutatingwebhookconfiguration,"
                      "validatingwebhookconfiguration,apiservice", "-o", "name")  # fmt: skip
    assert [line for line in cluster.splitlines() if "tower" in line] == [], cluster


def uninstall_crds_left_readable() -> None:
    """A CRD left behind (Helm keeps crds/) converts no more through a Service that is gone."""
    for crd in get("crd")["items"]:
        if crd["spec"]["group"] == "kueue.x-k8s.io":
            assert crd["spec"].get("conversion", {}).get("strategy", "None") == "None", crd[
                "metadata"
            ]["name"]


@pytest.fixture
def clean(api_client, real_node):
    def wipe() -> None:
        kubectl("delete", "namespace", QS, "--ignore-not-found", "--wait=true", "--timeout=120s")
        kubectl("delete", "-k", str(ROOT / "deploy" / "default"), "--ignore-not-found",
                "--wait=true", "--timeout=180s", check=False)  # fmt: skip
        kubectl("delete", "-f", str(ROOT / "deploy" / "crds"), "--ignore-not-found", check=False)

    wipe()
    with only_real_nodes(api_client):
        yield
    wipe()


def test_installed_with_kustomize_from_nothing(clean):
    started = time.monotonic()
    kubectl("apply", "-k", str(ROOT / "deploy" / "default"))
    all_ready()
    measured(f"kustomize: both Deployments Ready in {time.monotonic() - started:.0f} s")
    assert restarts() == []
    certificates_injected()
    quick_start("kustomize", started)
    webhook_and_conversion_through_the_service()
    after_hand_over("kustomize")
    assert restarts() == []
    kubectl("delete", "namespace", QS, "--wait=true", "--timeout=120s")
    kubectl("delete", "-k", str(ROOT / "deploy" / "default"), "--wait=true", "--timeout=180s")
    wait(lambda: "NotFound" in kubectl("get", "namespace", NS, check=False), 180,
         "tower-system to go")  # fmt: skip
    nothing_left("kubectl delete -k")
    assert "kueue.x-k8s.io" not in kubectl("get", "crd", "-o", "name")


def run_helm(*args: str) -> str:
    done = subprocess.run([helm_binary(), "--kubeconfig", KUBECONFIG or "", *args],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, f"helm {' '.join(args)}: {done.stderr}"
    return done.stdout


def test_installed_with_helm_from_nothing_upgraded_and_uninstalled(clean):
    chart = str(ROOT / "deploy" / "helm" / "tower")
    started = time.monotonic()
    run_helm("install", "tower", chart, "-n", NS, "--create-namespace", "--wait",
             "--timeout", "5m")  # fmt: skip
    all_ready()
    measured(f"helm: both Deployments Ready in {time.monotonic() - started:.0f} s")
    assert restarts() == []
    certificates_injected()
    quick_start("helm", started)
    webhook_and_conversion_through_the_service()
    after_hand_over("helm")

    before = get("deployment", "tower-controller", "-n", NS)["metadata"]["generation"]
    run_helm("upgrade", "tower", chart, "-n", NS, "--wait", "--timeout", "5m",
             "--set", "controller.extraArgs={--log-level,debug}")  # fmt: skip
    deployment = get("deployment", "tower-controller", "-n", NS)
    assert deployment["metadata"]["generation"] > before
    assert "--log-level" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    all_ready()
    wait(lambda: all("--log-level" in p["spec"]["containers"][0]["args"]
                     for p in pods("tower-controller")), 120, "the upgrade rolled out")  # fmt: skip
    assert restarts() == []

    kubectl("delete", "namespace", QS, "--wait=true", "--timeout=120s")
    run_helm("uninstall", "tower", "-n", NS, "--wait", "--timeout", "5m")
    uninstall_crds_left_readable()
    kubectl("get", "clusterqueues.v1beta1.kueue.x-k8s.io")  # reads, though nothing converts
    # docs/operations.md's commands that remove what Helm keeps:
    kubectl("delete", "namespace", NS, "--wait=true", "--timeout=180s")
    nothing_left("helm uninstall")
    kubectl("delete", "-f", str(ROOT / "deploy" / "crds") + "/")
    assert "kueue.x-k8s.io" not in kubectl("get", "crd", "-o", "name")
