"""A Kueue field Tower does not act on, applied with the real kubectl: a warning at apply
time, then an inactive ClusterQueue that says why, and admission once the field is gone."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.controller.conftest import eventually

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

QUEUES = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cluster-queue}
spec:
  namespaceSelector: {}
  concurrentAdmissionPolicy:
    migration: {mode: TryPreferredFlavors}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources: [{name: cpu, nominalQuota: 9}, {name: memory, nominalQuota: 36Gi}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: user-queue, namespace: default}
spec: {clusterQueue: cluster-queue}
"""


def kubectl(cluster, *args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, KUBECONFIG=cluster.admin_config)
    return subprocess.run(
        ["kubectl", *args], env=env, input=stdin, capture_output=True, text=True, timeout=60
    )


def active(cluster) -> tuple[str, str, str] | None:
    cq = cluster.get("clusterqueues", "cluster-queue") or {}
    for c in (cq.get("status") or {}).get("conditions") or []:
        if c["type"] == "Active":
            return c["status"], c["reason"], c["message"]
    return None


def test_a_field_tower_does_not_act_on_is_warned_about_and_stops_the_queue(
    cluster, start_controller
):
    applied = kubectl(cluster, "apply", "--validate=strict", "-f", "-", stdin=QUEUES)
    assert applied.returncode == 0, applied.stderr
    assert (
        "Warning: ClusterQueue cluster-queue: spec.concurrentAdmissionPolicy (concurrent "
        "admission for flavor migration) is not acted on by Tower without the ConcurrentAdmission "
        "feature gate; the ClusterQueue admits nothing while it is set"
    ) in applied.stderr
    start_controller()
    job = cluster.job("sample-job-", "1", duration="1s", generate=True)
    status, reason, message = eventually(lambda: active(cluster), what="the Active condition")
    assert (status, reason) == ("False", "UnsupportedField")
    assert "spec.concurrentAdmissionPolicy" in message
    assert cluster.get("jobs", job["metadata"]["name"], "default")["spec"]["suspend"] is True

    fixed = QUEUES.replace(
        "  concurrentAdmissionPolicy:\n    migration: {mode: TryPreferredFlavors}\n", ""
    )
    # kubectl replace reads the resourceVersion, then PUTs: a status write of the controller
    # in between is a Conflict, which a user answers by running it again (as here).
    for _ in range(5):
        replaced = kubectl(cluster, "replace", "-f", "-", stdin=fixed)
        if "the object has been modified" not in replaced.stderr:
            break
    assert replaced.returncode == 0, replaced.stderr
    assert "Warning" not in replaced.stderr
    eventually(
        lambda: cluster.get("jobs", job["metadata"]["name"], "default")["spec"]["suspend"] is False,
        what="the job to start once the field is gone",
    )
    eventually(lambda: (active(cluster) or ("",))[0] == "True", what="Active=True")
