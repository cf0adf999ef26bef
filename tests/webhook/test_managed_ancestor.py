"""With manageJobsWithoutQueueName, what a managed job made is left to it, as Kueue's webhooks
do (FindAncestorJobManagedByKueue): an AppWrapper's Deployment is not marked, and the pods of
a Deployment are not queued on their own unless its webhook marked them."""

from __future__ import annotations

import base64
import json

import jsonpatch
import pytest

from tests.webhook.test_registry import review_request
from webhook.app import admission_routes
from webhook.settings import Settings

QUEUE = "kueue.x-k8s.io/queue-name"
MANAGING = Settings(manage_jobs_without_queue_name=frozenset({"*"}))
APPWRAPPER = {"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
              "name": "aw", "uid": "aw-uid", "controller": True}  # fmt: skip
REPLICASET = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "d-6d9c",
              "uid": "rs-uid", "controller": True}  # fmt: skip


def deployment(*owners: dict) -> dict:
    meta: dict = {"name": "deployment", "namespace": "team-a"}
    if owners:
        meta["ownerReferences"] = list(owners)
    template = {"metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "agnhost"}]}}  # fmt: skip
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {"replicas": 3, "template": template}}  # fmt: skip


def pod(labels: dict, *owners: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "team-a", "labels": labels,
                         "ownerReferences": list(owners)},
            "spec": {"containers": [{"name": "c", "image": "agnhost"}]}}  # fmt: skip


def mutated(settings: Settings, path: str, obj: dict) -> dict:
    response = admission_routes(settings)[path](review_request(obj))
    patch = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    return jsonpatch.apply_patch(obj, patch)


def test_an_appwrappers_deployment_is_left_to_the_appwrapper():
    made = deployment(APPWRAPPER)
    assert mutated(MANAGING, "/mutate-apps-v1-deployment", made) == made


def test_an_unowned_unlabelled_deployment_is_still_marked():
    marked = mutated(MANAGING, "/mutate-apps-v1-deployment", deployment())
    assert marked["spec"]["template"]["metadata"]["labels"][QUEUE] == "default"


def test_without_the_appwrapper_integration_its_deployment_is_marked():
    settings = Settings(
        manage_jobs_without_queue_name=frozenset({"*"}), integrations=("pod", "deployment")
    )
    marked = mutated(settings, "/mutate-apps-v1-deployment", deployment(APPWRAPPER))
    assert marked["spec"]["template"]["metadata"]["labels"][QUEUE] == "default"


def test_an_unmarked_pod_of_a_deployment_is_not_queued():
    made = pod({"app": "d", "pod-template-hash": "6d9c"}, REPLICASET)
    assert mutated(MANAGING, "/mutate--v1-pod", made) == made


@pytest.mark.parametrize(
    ("labels", "integrations", "why"),
    [
        ({"app": "d"}, None, "a ReplicaSet made by hand has no Deployment above it"),
        ({"app": "d", "pod-template-hash": "6d9c"}, ("pod",), "Deployments are not managed"),
    ],
)
def test_a_pod_without_a_managed_ancestor_is_queued(labels, integrations, why):
    settings = Settings(manage_jobs_without_queue_name=frozenset({"*"}), integrations=integrations)
    queued = mutated(settings, "/mutate--v1-pod", pod(labels, REPLICASET))
    assert queued["metadata"]["labels"][QUEUE] == "default", why
    assert {"name": "kueue.x-k8s.io/admission"} in queued["spec"]["schedulingGates"]
