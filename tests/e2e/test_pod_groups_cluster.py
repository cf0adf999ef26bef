"""Pod groups and a StatefulSet on a real kube-apiserver, kube-controller-manager and
kube-scheduler: Kueue's pod-group example waits gated until both its pods exist, then is
admitted whole, bound by the real scheduler, run (by the stand-in kubelet where the Nodes have
none) and finished; Kueue's sample StatefulSet is one Workload, and the real StatefulSet
controller's pods, made one by one (OrderedReady), are each let through under it; scaled to 0
its quota is free, and a set that does not fit keeps its first pod gated."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests import yamlc
from tests.e2e.conftest import controller_process, kubectl, serve_webhook, wait, webhook_host_port
from tests.e2e.test_pods_cluster import EXAMPLES, is_gated, queue_objects, tear_down

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
GROUPS_NS, STS_NS, SMALL_NS = "groups-e2e", "sts-e2e", "sts-small-e2e"
LWS_NS = "lws-e2e"
LWS_CRD = ROOT / "tests" / "data" / "lws" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"


@pytest.fixture(scope="module")
def tower(tmp_path_factory, api_client, kubelet_namespaces):
    webhook_host_port()
    tmp = tmp_path_factory.mktemp("groups")
    kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    kubectl("apply", "--server-side", "-f", str(LWS_CRD))  # no LWS controller: the test plays it
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    webhook = serve_webhook(tmp, ["--controller-username", "kubernetes-admin"])
    setup = tmp / "setup.yaml"
    objects = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "pods-flavor"}},
        *queue_objects(GROUPS_NS, "6"),
        *queue_objects(STS_NS, "300m"),
        *queue_objects(SMALL_NS, "200m"),
        *queue_objects(LWS_NS, "1"),
    ]  # fmt: skip
    setup.write_text(yaml.safe_dump_all(objects))
    kubectl("apply", "-f", str(setup))
    kubelet_namespaces.update((GROUPS_NS, STS_NS, SMALL_NS, LWS_NS))
    controller = controller_process("--physical-resources", "none")  # Kueue's default set
    yield client.CoreV1Api(api_client)
    namespaces = (GROUPS_NS, STS_NS, SMALL_NS, LWS_NS)
    tear_down(controller, webhook, setup, namespaces, "statefulsets,leaderworkersets,pods")


def workload(namespace: str, name: str) -> dict[str, Any] | None:
    found = kubectl("get", "workloads", name, "-n", namespace, "-o", "json", check=False)
    return json.loads(found) if found.strip().startswith("{") else None


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for entry in ((obj or {}).get("status") or {}).get("conditions") or []:
        if entry["type"] == kind:
            return dict(entry)
    return {}


def test_kueues_pod_group_waits_for_both_pods_then_runs_whole(tower):
    core = tower
    leader, worker = yamlc.safe_load_all((EXAMPLES / "pods" / "kueue-pod-group.yaml").read_text())
    made = tmp_manifest(leader)
    first = kubectl("create", "-n", GROUPS_NS, "-f", made).split()[0].split("/")[1]
    time.sleep(3)  # the controller has seen it: one member of two, so no Workload
    assert workload(GROUPS_NS, "sample-group") is None
    assert is_gated(core.read_namespaced_pod(first, GROUPS_NS))
    second = kubectl("create", "-n", GROUPS_NS, "-f", tmp_manifest(worker)).split()[0].split("/")[1]
    group = wait(lambda: workload(GROUPS_NS, "sample-group"), what="the group's Workload")
    [role] = group["spec"]["podSets"]
    assert role["count"] == 2
    for name in (first, second):
        wait(
            lambda n=name: core.read_namespaced_pod(n, GROUPS_NS).spec.node_name,
            what=f"{name} bound",
        )
    # The leader sleeps 3 s, the worker 2 s: both Succeed, and the group is Finished.
    done = wait(
        lambda: (
            condition(workload(GROUPS_NS, "sample-group"), "Finished").get("status") == "True"
            and workload(GROUPS_NS, "sample-group")
        ),
        what="the group finished",
    )
    assert condition(done, "Finished")["message"] == "Pods succeeded: 2/2."
    for name in (first, second):
        wait(
            lambda n=name: (
                "kueue.x-k8s.io/managed"
                not in (core.read_namespaced_pod(n, GROUPS_NS).metadata.finalizers or [])
            ),
            what="Kueue's finalizer off",
        )


def tmp_manifest(obj: dict[str, Any]) -> str:
    path = Path(f"/tmp/tower-e2e-{obj['metadata']['generateName']}yaml")
    path.write_text(yaml.safe_dump(obj))
    return str(path)


def sts_workload(namespace: str) -> dict[str, Any] | None:
    listed = json.loads(kubectl("get", "workloads", "-n", namespace, "-o", "json"))
    found = [
        w
        for w in listed["items"]
        if w["metadata"]["name"].startswith("statefulset-nginx-statefulset-")
    ]
    return found[0] if found else None


def test_kueues_sample_statefulset_is_admitted_whole_and_scales_to_zero(tower):
    core = tower
    kubectl("apply", "-n", STS_NS, "-f", str(EXAMPLES / "serving" / "sample-statefulset.yaml"))
    made = wait(lambda: sts_workload(STS_NS), what="the StatefulSet's Workload")
    assert made["spec"]["podSets"][0]["count"] == 3

    # The real StatefulSet controller makes its pods one by one, each once the last is ready:
    # each is created gated and let through under the one admission.
    def three_bound() -> list[Any] | None:
        pods = core.list_namespaced_pod(STS_NS, label_selector="app=nginx").items
        bound = [p for p in pods if p.spec.node_name and not is_gated(p)]
        return pods if len(bound) == 3 else None

    pods = wait(three_bound, what="the three pods let through and bound")
    assert sorted(p.metadata.name for p in pods) == [f"nginx-statefulset-{i}" for i in range(3)]
    for pod in pods:
        assert pod.metadata.labels["kueue.x-k8s.io/managed"] == "true"
    refused = kubectl(
        "patch", "statefulset", "nginx-statefulset", "-n", STS_NS, "--type=merge",
        "-p", '{"spec":{"replicas":2}}', check=False,
    )  # fmt: skip
    assert "spec.replicas: cannot change from 3 to 2" in refused, refused
    # `kubectl scale` goes through the scale subresource, which no admission webhook sees (nor
    # Kueue's): the fourth pod the StatefulSet controller makes stays gated, and Tower says why.
    kubectl("scale", "statefulset", "nginx-statefulset", "-n", STS_NS, "--replicas=4")
    fourth = wait(
        lambda: [p for p in core.list_namespaced_pod(STS_NS, label_selector="app=nginx").items if p.metadata.name == "nginx-statefulset-3"],
        what="the fourth pod made",
    )[0]  # fmt: skip
    time.sleep(2)
    fourth = core.read_namespaced_pod("nginx-statefulset-3", STS_NS)
    assert is_gated(fourth)
    assert not fourth.spec.node_name
    said = kubectl("get", "events", "-n", STS_NS, "--field-selector", "reason=SizeNotAdmitted")
    assert "holds quota for 3 pods, and it now asks for 4" in said, said
    kubectl("scale", "statefulset", "nginx-statefulset", "-n", STS_NS, "--replicas=0")
    # At zero the Workload is kept, on hold, its quota given back (Kueue's statefulset
    # reconciler; tests/e2e/kueue's statefulset_test.go port asserts the same).
    held = wait(
        lambda: (c := condition(sts_workload(STS_NS), "QuotaReserved")).get("reason") == "OnHold"
        and c,
        what="its Workload on hold at zero",
    )  # fmt: skip
    assert held["status"] == "False"
    wait(
        lambda: not json.loads(kubectl("get", "clusterqueue", STS_NS, "-o", "json"))["status"].get("flavorsUsage")
        or all(
            r["total"] in ("0", 0)
            for f in json.loads(kubectl("get", "clusterqueue", STS_NS, "-o", "json"))["status"]["flavorsUsage"]
            for r in f["resources"]
        ),
        what="the quota free",
    )  # fmt: skip


def test_a_statefulset_that_does_not_fit_keeps_its_first_pod_gated(tower):
    core = tower
    kubectl("apply", "-n", SMALL_NS, "-f", str(EXAMPLES / "serving" / "sample-statefulset.yaml"))
    made = wait(
        lambda: condition(sts_workload(SMALL_NS), "QuotaReserved").get("message"),
        what="its reason",
    )
    assert "needs 300m cpu in flavor pods-flavor" in made, made
    wait(
        lambda: core.list_namespaced_pod(SMALL_NS, label_selector="app=nginx").items,
        what="the first pod made by the StatefulSet controller",
    )
    time.sleep(2)
    [first] = core.list_namespaced_pod(SMALL_NS, label_selector="app=nginx").items
    assert first.metadata.name == "nginx-statefulset-0"  # OrderedReady: the next waits for it
    assert is_gated(first)
    assert not first.spec.node_name


def lws_pod(lws: dict[str, Any], index: int, worker: int) -> dict[str, Any]:
    """One pod of a group, as the LeaderWorkerSet controller (not running here) makes it."""
    spec = lws["spec"]["leaderWorkerTemplate"]
    template = spec["workerTemplate"] if worker else spec["leaderTemplate"]
    meta = json.loads(json.dumps(template.get("metadata") or {}))
    meta.setdefault("labels", {}).update(
        {
            "leaderworkerset.sigs.k8s.io/name": lws["metadata"]["name"],
            "leaderworkerset.sigs.k8s.io/group-index": str(index),
            "leaderworkerset.sigs.k8s.io/worker-index": str(worker),
        }
    )
    name = f"{lws['metadata']['name']}-{index}"
    if worker:
        meta.setdefault("annotations", {})["leaderworkerset.sigs.k8s.io/leader-name"] = name
        name += f"-{worker}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**meta, "name": name},
        "spec": template["spec"],
    }


def test_kueues_sample_leaderworkerset_runs_group_by_group(tower, tmp_path):
    core = tower
    kubectl("apply", "-n", LWS_NS, "-f", str(EXAMPLES / "serving" / "sample-leaderworkerset.yaml"))
    lws = json.loads(
        kubectl("get", "leaderworkerset", "nginx-leaderworkerset", "-n", LWS_NS, "-o", "json")
    )
    marked = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"]
    assert (
        marked["kueue.x-k8s.io/pod-suspending-parent"] == "leaderworkerset.x-k8s.io/leaderworkerset"
    )

    def group_workloads() -> list[dict[str, Any]]:
        listed = json.loads(kubectl("get", "workloads", "-n", LWS_NS, "-o", "json"))
        return sorted(
            (w for w in listed["items"] if w["metadata"]["name"].startswith("leaderworkerset-")),
            key=lambda w: w["metadata"]["name"],
        )

    made = wait(
        lambda: len(group_workloads()) == 2 and group_workloads(), what="a Workload per group"
    )
    for each in made:
        assert [(p["name"], p["count"]) for p in each["spec"]["podSets"]] == [
            ("leader", 1),
            ("worker", 2),
        ]
    # Each group holds 500m of the 1 cpu: both admitted; their pods, made gated, are told their
    # group, let through and bound by the real scheduler.
    pods = [lws_pod(lws, i, w) for i in range(2) for w in range(3)]
    manifest = tmp_path / "lws-pods.yaml"
    manifest.write_text(yaml.safe_dump_all(pods))
    kubectl("create", "-n", LWS_NS, "-f", str(manifest))

    def all_bound() -> list[Any] | None:
        listed = core.list_namespaced_pod(
            LWS_NS, label_selector="leaderworkerset.sigs.k8s.io/name"
        ).items
        bound = [p for p in listed if p.spec.node_name and not is_gated(p)]
        return listed if len(bound) == 6 else None

    for pod in wait(all_bound, what="the six pods let through and bound"):
        group = pod.metadata.annotations["kueue.x-k8s.io/pod-group-name"]
        assert group.startswith(
            f"leaderworkerset-nginx-leaderworkerset-{pod.metadata.labels['leaderworkerset.sigs.k8s.io/group-index']}-"
        )
    # Scaled to 3, the third group waits: 1 cpu holds two.
    kubectl(
        "patch",
        "leaderworkerset",
        "nginx-leaderworkerset",
        "-n",
        LWS_NS,
        "--type=merge",
        "-p",
        '{"spec":{"replicas":3}}',
    )
    third = wait(
        lambda: len(group_workloads()) == 3 and group_workloads()[2],
        what="the third group's Workload",
    )
    message = wait(
        lambda: condition(
            next(
                w for w in group_workloads() if w["metadata"]["name"] == third["metadata"]["name"]
            ),
            "QuotaReserved",
        ).get("message"),
        what="the third group's reason",
    )
    assert "needs 500m cpu" in message, message
    refused = kubectl(
        "patch", "leaderworkerset", "nginx-leaderworkerset", "-n", LWS_NS, "--type=merge",
        "-p", '{"spec":{"leaderWorkerTemplate":{"size":4}}}', check=False,
    )  # fmt: skip
    assert "spec.leaderWorkerTemplate.size: cannot change from 3 to 4" in refused, refused
