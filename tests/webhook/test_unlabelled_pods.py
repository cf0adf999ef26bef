"""manageJobsWithoutQueueName reaches bare pods, as Kueue's pod webhook: an unlabelled pod in a
managed namespace is gated and queued; one of a queued kind's job, or in kube-system, is not."""

from __future__ import annotations

import base64
import json

import jsonpatch

from certs.kube import Scope, webhook_configurations
from tests.webhook.test_registry import review_request
from webhook.app import admission_routes
from webhook.settings import Settings

QUEUE = "kueue.x-k8s.io/queue-name"
MANAGED = "kueue.x-k8s.io/managed"
MANAGING = Settings(manage_jobs_without_queue_name=frozenset({"*"}))


def bare_pod(namespace: str = "team-a", **meta: object) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "test-pod", "namespace": namespace, **meta},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def mutated(settings: Settings, pod: dict) -> dict:
    response = admission_routes(settings)["/mutate--v1-pod"](review_request(pod))
    patch = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    return jsonpatch.apply_patch(pod, patch)


def test_an_unlabelled_pod_in_a_managed_namespace_is_gated_and_queued():
    pod = mutated(MANAGING, bare_pod())
    assert [g["name"] for g in pod["spec"]["schedulingGates"]] == [
        "kueue.x-k8s.io/admission",
        "kueue.x-k8s.io/topology",
    ]
    assert pod["metadata"]["labels"][MANAGED] == "true"
    assert pod["metadata"]["labels"][QUEUE] == "default"


def test_an_unlabelled_pod_is_left_alone_without_the_field_or_in_kube_system():
    assert mutated(Settings(), bare_pod()) == bare_pod()
    assert mutated(MANAGING, bare_pod("kube-system")) == bare_pod("kube-system")


def test_a_queued_jobs_pod_is_left_to_its_job():
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}
    pod = bare_pod(ownerReferences=[owner])
    assert mutated(MANAGING, pod) == pod


def test_the_pods_default_queue_hook_is_registered_for_unlabelled_pods():
    mutating, _ = webhook_configurations(
        b"ca", url="https://tower:9443", scope=Scope(unlabelled_everywhere=True)
    )
    hook = next(h for h in mutating["webhooks"] if h["name"] == "mpod-default-queue.tower.dev")
    assert hook["objectSelector"] == {
        "matchExpressions": [{"key": QUEUE, "operator": "DoesNotExist"}]
    }
    assert hook["failurePolicy"] == "Fail"
    assert hook["rules"][0]["operations"] == ["CREATE"]
