"""Mutation against the AdmissionReviews a real kube-apiserver sent (shared/fixtures)."""

import base64
import json

import jsonpatch
import pytest
import yaml

from extender.core.jobframework import registry
from tests.fixtures import admission_review, as_jobset
from tests.servers import ROOT
from webhook.mutate import JOB, JOBSET, mutate
from webhook.settings import Settings

SETTINGS = Settings(controller_usernames=frozenset({"system:serviceaccount:tower-system:tower"}))
CREATE = "01-mutate.job-CREATE-generateName.seed-job"
DRY_RUN = "03-mutate.job-CREATE-dryRun-server"
PATCH_UNSUSPEND = "05-mutate.job-UPDATE-kubectl-patch-suspend-false"


def patch_of(response):
    return json.loads(base64.b64decode(response["patch"])) if "patch" in response else []


def apply(obj, response):
    return jsonpatch.apply_patch(obj, patch_of(response))


@pytest.mark.parametrize(
    ("name", "expect", "convert"),
    [(CREATE, JOB, None), (DRY_RUN, JOB, None), (CREATE, JOBSET, as_jobset)],
    ids=["generateName CREATE (no name, no uid)", "dryRun CREATE", "JobSet of the same shape"],
)
def test_create_suspends_and_records_and_is_idempotent(name, expect, convert):
    review = admission_review(name)
    review = convert(review) if convert else review
    request = review["request"]
    response = mutate(request, SETTINGS, expect)
    assert response["uid"] == request["uid"]
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    once = apply(request["object"], response)
    assert once["spec"]["suspend"] is True
    assert once["metadata"]["annotations"]["tower.dev/original-suspend"] == "false"
    assert apply(once, response) == once  # the API server may call us twice
    # Nothing else changes.
    before = json.loads(json.dumps(request["object"]))
    before["spec"]["suspend"] = True
    before["metadata"]["annotations"] = {"tower.dev/original-suspend": "false"}
    assert once == before


def test_create_without_the_label_is_left_alone():
    request = admission_review(CREATE)["request"]
    del request["object"]["metadata"]["labels"]
    assert mutate(request, SETTINGS, JOB) == {"uid": request["uid"], "allowed": True}


def test_manage_jobs_without_queue_name_gives_the_default_local_queue():
    request = admission_review(CREATE)["request"]
    del request["object"]["metadata"]["labels"]
    settings = Settings(manage_jobs_without_queue_name=frozenset({"default"}))
    mutated = apply(request["object"], mutate(request, settings, JOB))
    assert mutated["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "default"}
    assert mutated["spec"]["suspend"] is True
    kube_system = dict(request, namespace="kube-system")
    assert "patch" not in mutate(
        kube_system, Settings(manage_jobs_without_queue_name=frozenset({"*"})), JOB
    )


def test_a_job_owned_by_a_jobset_is_not_touched():
    request = admission_review(CREATE)["request"]
    request["object"]["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "train",
            "uid": "x",
            "controller": True,
        }
    ]
    assert "patch" not in mutate(request, SETTINGS, JOB)


def test_kubectl_patch_suspend_false_is_kept_suspended_with_a_warning():
    request = admission_review(PATCH_UNSUSPEND)["request"]
    assert request["oldObject"]["spec"]["suspend"] is True
    assert request["object"]["spec"]["suspend"] is False
    request["object"]["metadata"].setdefault("annotations", {})["tower.dev/cluster-queue"] = (
        "cluster-queue"
    )
    response = mutate(request, SETTINGS, JOB)
    assert apply(request["object"], response)["spec"]["suspend"] is True
    assert response["warnings"] == [
        "Job default/sample-job-bsg9x is queued: it waits in ClusterQueue cluster-queue "
        "(LocalQueue user-queue) and starts when Tower admits it; spec.suspend stays true "
        "(only system:serviceaccount:tower-system:tower may unsuspend it, the "
        "webhook's --controller-username; this request came from kubernetes-admin)"
    ]


def test_towers_controller_may_unsuspend():
    request = admission_review(PATCH_UNSUSPEND)["request"]
    request["userInfo"]["username"] = "system:serviceaccount:tower-system:tower"
    assert mutate(request, SETTINGS, JOB) == {"uid": request["uid"], "allowed": True}


def test_another_kind_on_the_job_endpoint_is_refused_with_400():
    request = as_jobset(admission_review(CREATE))["request"]
    response = mutate(request, SETTINGS, JOB)
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert (
        response["status"]["message"]
        == "this endpoint handles Job.batch, got JobSet.jobset.x-k8s.io"
    )


class Routes:
    """QueueRoutes' answer for one LocalQueue (webhook/routes.py reads it from the API)."""

    def __init__(self, answer):
        self.answer = answer
        self.asked = []

    def multikueue(self, namespace, queue):
        self.asked.append((namespace, queue))
        return self.answer


@pytest.mark.parametrize("expect", [JOB, JOBSET], ids=["Job", "JobSet"])
def test_a_job_of_a_multikueue_queue_is_handed_to_multikueue(expect):
    review = admission_review(CREATE)
    request = review["request"] if expect is JOB else as_jobset(review)["request"]
    routes = Routes(True)
    once = apply(request["object"], mutate(request, SETTINGS, expect, routes))
    assert once["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    assert once["spec"]["suspend"] is True
    assert routes.asked == [("default", "user-queue")]


def test_a_kubeflow_job_without_a_run_policy_is_both_suspended_and_handed_over():
    """Kueue's PyTorchJob sample has no runPolicy: the suspend and the managedBy both go in
    the one the webhook adds (neither replaces the other)."""
    job = yaml.safe_load(
        (ROOT / "tests/data/kueue-v0.19.2/examples/jobs/sample-pytorchjob.yaml").read_text()
    )
    assert "runPolicy" not in job["spec"]
    request = admission_review(CREATE)["request"]
    request["kind"] = {"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"}
    request["resource"] = {"group": "kubeflow.org", "version": "v1", "resource": "pytorchjobs"}
    request["object"] = job
    adapter = registry.ADAPTERS["kubeflow.org/pytorchjob"]
    once = apply(job, mutate(request, SETTINGS, adapter, Routes(True)))
    assert once["spec"]["runPolicy"] == {
        "suspend": True,
        "managedBy": "kueue.x-k8s.io/multikueue",
    }


def test_a_job_of_another_queue_keeps_its_controller():
    request = admission_review(CREATE)["request"]
    once = apply(request["object"], mutate(request, SETTINGS, JOB, Routes(False)))
    assert "managedBy" not in once["spec"]


def test_a_queue_that_cannot_be_read_is_told_and_decides_nothing():
    request = admission_review(CREATE)["request"]
    response = mutate(request, SETTINGS, JOB, Routes("connection refused"))
    assert "managedBy" not in apply(request["object"], response)["spec"]
    [warning] = response["warnings"]
    assert "could not tell whether LocalQueue user-queue dispatches to MultiKueue" in warning
    assert "connection refused" in warning


def running_resized(parallelism: int) -> dict:
    """kube-apiserver's UPDATE review of a running Job (the recorded patch's request), as if
    a user had patched its parallelism from 2 to `parallelism` while it runs."""
    request = admission_review(PATCH_UNSUSPEND)["request"]
    for key, count in (("oldObject", 2), ("object", parallelism)):
        request[key]["spec"].update(suspend=False, parallelism=count, completions=10)
    return request


def test_a_running_job_resized_is_stopped_in_the_same_update_with_a_warning():
    request = running_resized(6)
    response = mutate(request, SETTINGS, JOB)
    patched = apply(request["object"], response)
    assert patched["spec"]["suspend"] is True
    assert patched["spec"]["parallelism"] == 6  # the user's change stands: queued at 6
    assert response["warnings"] == [
        "Job default/sample-job-bsg9x: podSet main (spec.template) now has 6 pods, had 2 while "
        "it runs: it is stopped in this update (spec.suspend: true) and queued again at its new "
        "size, as Kueue queues a job that no longer matches its Workload (to scale a Job, "
        'RayJob or RayCluster in place, annotate it kueue.x-k8s.io/elastic-job: "true")'
    ]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda r: None, "its podSets are as they were (a label, an annotation)"),
        (
            lambda r: (
                r["oldObject"]["spec"].update(suspend=True),
                r["userInfo"].update(username="system:serviceaccount:tower-system:tower"),
            ),
            "it was suspended: Tower starts it at its admitted size",
        ),
        (lambda r: r["object"]["spec"].update(suspend=True), "the user suspends it too"),
        (lambda r: r["object"]["metadata"]["labels"].pop("kueue.x-k8s.io/queue-name"), "no queue"),
        (
            lambda r: (
                r["object"]["metadata"]
                .setdefault("annotations", {})
                .update({"kueue.x-k8s.io/elastic-job": "true"})
            ),
            "an elastic job scales in place",
        ),
    ],
)
def test_an_update_that_resizes_no_running_queued_job_is_left_alone(change, why):
    request = running_resized(2 if why.startswith("its podSets") else 6)
    change(request)
    response = mutate(request, SETTINGS, JOB)
    suspend = request["object"]["spec"]["suspend"]
    assert apply(request["object"], response)["spec"]["suspend"] is suspend, why
    assert not any("stopped in this update" in w for w in response.get("warnings") or []), why


def test_with_elastic_jobs_off_an_elastic_job_is_stopped_like_any_other():
    request = running_resized(6)
    request["object"]["metadata"].setdefault("annotations", {})["kueue.x-k8s.io/elastic-job"] = (
        "true"
    )
    settings = Settings(
        controller_usernames=SETTINGS.controller_usernames,
        feature_gates={"ElasticJobsViaWorkloadSlices": False},
    )
    assert apply(request["object"], mutate(request, settings, JOB))["spec"]["suspend"] is True
