"""Tower operated as Kueue is, on a real node: the visibility API through kube-apiserver's
aggregator, and metrics served over authenticated HTTPS.

Tower is installed with `kubectl apply -k deploy/default` (its pods really run, from the image
scripts/image.py made). Then, as Kueue's "Monitor pending workloads" page runs it:
- Kueue's documented `kubectl get --raw` for a ClusterQueue, in v1beta2 and v1beta1;
- a namespace user bound to Kueue's batch-user role sees their LocalQueue's line, and is
  refused for another namespace (by kube-apiserver's RBAC, then by Tower's own review);
- a caller that goes straight to the controller pod without the front proxy's certificate,
  with the headers the front proxy would set, is refused;
- /metrics: an anonymous scrape refused, a token without the metrics-reader role refused, the
  role's token served.
Each path is named in what the test measures.
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import kubectl, measured, wait
from tests.e2e.test_install_cluster import (
    NS,
    QS,
    ROOT,
    all_ready,
    clean,  # noqa: F401 (the fixture)
    get,
    quick_start_queues,
)

pytestmark = pytest.mark.e2e
GROUP = "/apis/visibility.kueue.x-k8s.io"


def job(name: str) -> str:
    return yaml.safe_dump({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": QS,
                     "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox:1.36", "command": ["sleep", "300"],
             "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}},
    })  # fmt: skip


def raw(path: str, *extra: str) -> tuple[bool, str]:
    out = kubectl("get", "--raw", path, *extra, check=False)
    return out.lstrip().startswith("{"), out


def controller_pod_ip() -> str:
    for pod in get("pods", "-n", NS, "-l", "app.kubernetes.io/name=tower-controller")["items"]:
        if pod["status"].get("podIP") and pod["status"].get("phase") == "Running":
            return str(pod["status"]["podIP"])
    raise AssertionError("no running controller pod")


def https(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # Tower's self-signed serving certificate
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def token_of(account: str, *, role: str | None) -> str:
    kubectl("create", "serviceaccount", account, "-n", QS)
    if role is not None:
        kubectl("create", "clusterrolebinding", f"{account}-{QS}", f"--clusterrole={role}",
                f"--serviceaccount={QS}:{account}")  # fmt: skip
    return kubectl("create", "token", account, "-n", QS).strip()


def container_port(name: str) -> int:
    for pod in get("pods", "-n", NS, "-l", "app.kubernetes.io/name=tower-controller")["items"]:
        for container in pod["spec"]["containers"]:
            for port in container.get("ports") or []:
                if port.get("name") == name:
                    return int(port["containerPort"])
    raise AssertionError(f"no container port {name}")


def test_the_visibility_api_and_metrics_as_kueue_serves_them(clean):  # noqa: F811
    kubectl("apply", "-k", str(ROOT / "deploy" / "default"))
    all_ready()
    started = time.monotonic()
    wait(lambda: all(c["status"] == "True" for s in [get("apiservice", "v1beta2.visibility.kueue.x-k8s.io")]
                     for c in s["status"].get("conditions", []) if c["type"] == "Available"),
         120, "the visibility APIService Available")  # fmt: skip
    measured(f"visibility: APIService Available {time.monotonic() - started:.1f} s after Ready")
    kubectl("create", "namespace", QS)
    kubectl("create", "namespace", "team-b")
    kubectl("apply", "-f", "-", input=quick_start_queues())
    for i in range(3):
        kubectl("create", "-f", "-", input=job(f"wait-{i}"))

    def pending() -> dict[str, Any] | None:
        ok, out = raw(f"{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads")
        if not ok:
            return None
        answer = json.loads(out)
        return answer if len(answer.get("items") or []) == 2 else None

    answer = wait(pending, 120, "two pending workloads in the ClusterQueue's list")
    items = answer["items"]
    assert answer["kind"] == "PendingWorkloadsSummary"
    assert [i["positionInClusterQueue"] for i in items] == [0, 1]
    assert [i["positionInLocalQueue"] for i in items] == [0, 1]
    assert {i["localQueueName"] for i in items} == {"user-queue"}
    assert {i["metadata"]["namespace"] for i in items} == {QS}
    ok, v1beta1 = raw(f"{GROUP}/v1beta1/clusterqueues/cluster-queue/pendingworkloads")
    assert ok, v1beta1
    assert json.loads(v1beta1)["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta1"

    # A namespace user, bound as Kueue's rbac.md binds one.
    kubectl("create", "rolebinding", "alice-batch-user", "--clusterrole=kueue-batch-user-role",
            "--user=alice", "-n", QS)  # fmt: skip
    own = f"{GROUP}/v1beta2/namespaces/{QS}/localqueues/user-queue/pendingworkloads"
    ok, mine = wait(lambda: (lambda r: r if r[0] else None)(raw(own, "--as=alice")), 30,
                    "alice to see her LocalQueue")  # fmt: skip
    assert [i["positionInLocalQueue"] for i in json.loads(mine)["items"]] == [0, 1]
    ok, other = raw(f"{GROUP}/v1beta2/namespaces/team-b/localqueues/user-queue/pendingworkloads",
                    "--as=alice")  # fmt: skip
    assert not ok
    assert "forbidden" in other.lower(), other
    ok, cq = raw(f"{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads", "--as=alice")
    assert not ok
    assert "forbidden" in cq.lower(), cq
    measured("visibility: kubectl get --raw through kube-apiserver's aggregator to the "
             "controller pod (APIService -> Service -> pod); alice allowed in her namespace, "
             "refused in team-b and for the ClusterQueue")  # fmt: skip

    # Straight to the pod, without the front proxy's certificate: the headers are not trusted.
    ip, port = controller_pod_ip(), container_port("visibility")
    status, body = https(f"https://{ip}:{port}{own}", {"X-Remote-User": "system:admin",
                                                       "X-Remote-Group": "system:masters"})  # fmt: skip
    assert status in (401, 403), (status, body)
    measured(
        f"visibility: a direct call with X-Remote-User and no front-proxy certificate: {status}"
    )

    # Metrics over HTTPS, as Kueue serves them.
    metrics = f"https://{ip}:{container_port('metrics')}/metrics"
    status, _ = https(metrics)
    assert status == 401, status
    reader = token_of("reader", role="kueue-metrics-reader")
    stranger = token_of("stranger", role=None)
    status, _ = https(metrics, {"Authorization": f"Bearer {stranger}"})
    assert status == 403, status
    status, body = wait(lambda: (lambda r: r if r[0] == 200 else None)(
        https(metrics, {"Authorization": f"Bearer {reader}"})), 30, "the reader's scrape")  # fmt: skip
    assert "kueue_pending_workloads" in body
    measured("metrics: anonymous 401, a token without the role 403, the metrics-reader's 200")
    kubectl("delete", "clusterrolebinding", f"reader-{QS}", "--ignore-not-found")
    kubectl("delete", "namespace", QS, "team-b", "--wait=true", "--timeout=120s")
    kubectl("delete", "-k", str(ROOT / "deploy" / "default"), "--wait=true", "--timeout=180s")
