"""The webhook's paths and patches come from the registry of job adapters: every registered
kind is served at Kueue's paths, queued at its adapter's suspend field, and left alone when
a managed parent made it or when its integration is off."""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonpatch
import pytest

from extender.core.jobframework import registry
from extender.core.jobframework.webhooks import queue_patch, set_op
from tests.webhook import toy
from webhook.app import admission_routes, create_app
from webhook.mutate import JOB, JOBSET, mutate
from webhook.settings import Settings, from_args
from webhook.validate import validate_job

ROOT = Path(__file__).resolve().parents[2]
toys = toy.toys  # the fixture
QUEUE = "kueue.x-k8s.io/queue-name"
ORIGINAL = "tower.dev/original-suspend"
CONTROLLER = "system:serviceaccount:tower-system:tower-controller"


def toy_object(kind="ToyJob", api_version="example.com/v1", spec=None, **meta):
    meta.setdefault("name", "toy")
    meta.setdefault("namespace", "default")
    meta.setdefault("labels", {QUEUE: "user-queue"})
    obj = {"apiVersion": api_version, "kind": kind, "metadata": meta}
    if spec is not None:
        obj["spec"] = spec
    return obj


def review_request(obj, operation="CREATE", old=None, user="alice"):
    group, _, _ = obj["apiVersion"].rpartition("/")
    request = {
        "uid": "u-1",
        "kind": {
            "group": group,
            "version": obj["apiVersion"].rpartition("/")[2],
            "kind": obj["kind"],
        },
        "resource": {"group": group, "version": "v1", "resource": obj["kind"].lower() + "s"},
        "namespace": obj["metadata"].get("namespace", "default"),
        "operation": operation,
        "userInfo": {"username": user},
        "object": obj,
    }
    if old is not None:
        request["oldObject"] = old
    return request


def patch_of(response):
    return json.loads(base64.b64decode(response["patch"])) if "patch" in response else []


# ----- paths ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("framework", "mutate_path", "validate_path"),
    [
        ("batch/job", "/mutate-batch-v1-job", "/validate-batch-v1-job"),
        (
            "jobset.x-k8s.io/jobset",
            "/mutate-jobset-x-k8s-io-v1alpha2-jobset",
            "/validate-jobset-x-k8s-io-v1alpha2-jobset",
        ),
        ("example.com/toyjob", "/mutate-example-com-v1-toyjob", "/validate-example-com-v1-toyjob"),
        (
            "example.com/deeptoyjob",
            "/mutate-example-com-v2beta1-deeptoyjob",
            "/validate-example-com-v2beta1-deeptoyjob",
        ),
        ("example.com/toypod", "/mutate--v1-toypod", "/validate--v1-toypod"),
    ],
)
def test_every_registered_kind_is_served_at_kueues_paths(
    toys, framework, mutate_path, validate_path
):
    routes = admission_routes(Settings())
    assert mutate_path in routes
    assert validate_path in routes
    adapter = registry.ADAPTERS[framework]
    assert registry.webhook_path(adapter, "mutate") == mutate_path
    assert registry.webhook_path(adapter, "validate") == validate_path


def test_the_routes_are_the_registrys_and_kueues_objects_only(toys):
    job_paths = {
        registry.webhook_path(a, verb)
        for a in (*registry.ADAPTERS.values(), *registry.PARENTS.values())
        for verb in ("mutate", "validate")
    }
    routes = set(admission_routes(Settings()))
    assert {p for p in routes if "-kueue-x-k8s-io-" not in p} == job_paths


def test_a_toy_kind_is_unregistered_after_its_test():
    assert not {cls.framework for cls in toy.TOYS} & set(registry.ADAPTERS)
    assert "/mutate-example-com-v1-toyjob" not in admission_routes(Settings())


def test_a_kind_of_the_core_group_is_named_so_when_refusing_another(toys):
    job = toy_object("Job", "batch/v1", {})
    response = mutate(review_request(job), Settings(), registry.ADAPTERS["example.com/toypod"])
    assert response["status"]["message"] == "this endpoint handles ToyPod.core, got Job.batch"


# ----- the suspend field is the adapter's ------------------------------------------------------


TOY_CREATES = [
    # (framework, spec, the operation that suspends it, original-suspend)
    (
        "example.com/toyjob",
        {"paused": False},
        {"op": "add", "path": "/spec/paused", "value": True},
        "false",
    ),
    ("example.com/toyjob", {}, {"op": "add", "path": "/spec/paused", "value": True}, "false"),
    (
        "example.com/toyjob",
        None,
        {"op": "add", "path": "/spec", "value": {"paused": True}},
        "false",
    ),
    ("example.com/toyjob", {"paused": True}, None, "true"),
    (
        "example.com/deeptoyjob",
        {"runPolicy": {"suspend": False}},
        {"op": "add", "path": "/spec/runPolicy/suspend", "value": True},
        "false",
    ),
    (
        "example.com/deeptoyjob",
        {"replicas": 2},
        {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}},
        "false",
    ),
    (
        "example.com/deeptoyjob",
        None,
        {"op": "add", "path": "/spec", "value": {"runPolicy": {"suspend": True}}},
        "false",
    ),
    ("example.com/deeptoyjob", {"runPolicy": {"suspend": True}}, None, "true"),
]


@pytest.mark.parametrize(("framework", "spec", "suspend", "original"), TOY_CREATES)
def test_create_suspends_at_the_adapters_suspend_path(toys, framework, spec, suspend, original):
    adapter = registry.ADAPTERS[framework]
    obj = toy_object(adapter.kind, adapter.api_version, spec, annotations={})
    response = mutate(review_request(obj), Settings(), adapter)
    assert response["allowed"] is True
    ops = patch_of(response)
    assert {"op": "add", "path": "/metadata/annotations/tower.dev~1original-suspend",
            "value": original} in ops  # fmt: skip
    assert [op for op in ops if op["path"].startswith("/spec")] == ([suspend] if suspend else [])
    once = jsonpatch.apply_patch(obj, ops)
    assert adapter.is_suspended(once)
    assert jsonpatch.apply_patch(once, ops) == once  # the API server may call us twice
    assert "suspend" not in (once.get("spec") or {})  # only the adapter's field is written


def test_a_toy_created_through_the_http_app_is_paused(toys):
    app = create_app(Settings(integrations=("batch/job", "example.com/toyjob"))).test_client()
    obj = toy_object(spec={"paused": False})
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": review_request(obj)}  # fmt: skip
    answer = app.post("/mutate-example-com-v1-toyjob", json=review).get_json()["response"]
    assert jsonpatch.apply_patch(obj, patch_of(answer))["spec"] == {"paused": True}


UPDATES = [
    # (framework, old spec, new spec, the operation that keeps it suspended, field named)
    (
        "example.com/toyjob",
        {"paused": True},
        {"paused": False},
        {"op": "replace", "path": "/spec/paused", "value": True},
        "spec.paused",
    ),
    (
        "example.com/toyjob",
        {"paused": True},
        {},
        {"op": "add", "path": "/spec/paused", "value": True},
        "spec.paused",
    ),
    (
        "example.com/deeptoyjob",
        {"runPolicy": {"suspend": True}},
        {"runPolicy": {"suspend": False}},
        {"op": "replace", "path": "/spec/runPolicy/suspend", "value": True},
        "spec.runPolicy.suspend",
    ),
    (
        "example.com/deeptoyjob",
        {"runPolicy": {"suspend": True}},
        {"replicas": 1},
        {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}},
        "spec.runPolicy.suspend",
    ),
]


@pytest.mark.parametrize(("framework", "old_spec", "new_spec", "keep", "field"), UPDATES)
def test_an_update_that_unsuspends_is_kept_suspended_at_the_adapters_path(
    toys, framework, old_spec, new_spec, keep, field
):
    adapter = registry.ADAPTERS[framework]
    old = toy_object(adapter.kind, adapter.api_version, old_spec)
    new = toy_object(adapter.kind, adapter.api_version, new_spec)
    response = mutate(review_request(new, "UPDATE", old), Settings(), adapter)
    assert patch_of(response) == [keep]
    assert adapter.is_suspended(jsonpatch.apply_patch(new, [keep]))
    assert response["warnings"] == [
        f"{adapter.kind} default/toy is queued: it waits in LocalQueue user-queue and starts "
        f"when Tower admits it; {field} stays true (only {CONTROLLER} may unsuspend it, the "
        "webhook's --controller-username; this request came from alice)"
    ]
    by_controller = review_request(new, "UPDATE", old, user=CONTROLLER)
    assert mutate(by_controller, Settings(), adapter) == {"uid": "u-1", "allowed": True}


def test_validation_reads_the_adapters_suspend_field(toys):
    toy = registry.ADAPTERS["example.com/toyjob"]
    old = toy_object(spec={"paused": False})
    new = toy_object(spec={"paused": False}, labels={QUEUE: "other-queue"})
    denied = validate_job(review_request(new, "UPDATE", old), toy)
    assert denied["allowed"] is False
    assert denied["status"]["message"].endswith("while the ToyJob is running (not suspended)")
    old["spec"]["paused"] = True
    assert validate_job(review_request(new, "UPDATE", old), toy)["allowed"] is True


# ----- children and integrations -----------------------------------------------------------


@pytest.mark.parametrize(
    ("framework", "owner_api_version", "owner_kind", "left_alone"),
    [
        ("batch/job", "jobset.x-k8s.io/v1alpha2", "JobSet", True),
        ("batch/job", "apps/v1", "ReplicaSet", False),
        ("batch/job", "example.com/v1", "JobSet", False),  # a JobSet of another group
        ("example.com/toypod", "apps.example.com/v1", "ToySet", True),
        ("example.com/toypod", "jobset.x-k8s.io/v1alpha2", "JobSet", False),
        ("example.com/toyjob", "apps.example.com/v1", "ToySet", False),  # not its child
    ],
)
def test_a_child_of_a_managed_parent_is_left_alone(
    toys, framework, owner_api_version, owner_kind, left_alone
):
    adapter = registry.ADAPTERS[framework]
    owner = {"apiVersion": owner_api_version, "kind": owner_kind, "name": "p", "uid": "x",
             "controller": True}  # fmt: skip
    obj = toy_object(adapter.kind, adapter.api_version, {}, ownerReferences=[owner])
    response = mutate(review_request(obj), Settings(), adapter)
    assert ("patch" not in response) is left_alone


def test_an_integration_that_is_off_is_served_but_not_queued(toys):
    """Its paths answer a plain allow (as Kueue's no-op webhooks), so a webhook configuration
    that still names the kind never blocks it; the kinds that are on are queued."""
    routes = admission_routes(Settings(integrations=("example.com/toyjob",)))
    jobset = copy.deepcopy(toy_object("JobSet", "jobset.x-k8s.io/v1alpha2", {}))
    off = routes["/mutate-jobset-x-k8s-io-v1alpha2-jobset"](review_request(jobset))
    assert off == {"uid": "u-1", "allowed": True}
    on = routes["/mutate-example-com-v1-toyjob"](review_request(toy_object(spec={})))
    assert {"op": "add", "path": "/spec/paused", "value": True} in patch_of(on)
    default = admission_routes(Settings())
    assert "patch" not in default["/mutate-example-com-v1-toyjob"](
        review_request(toy_object(spec={}))
    )  # Kueue's default set names no toy


def test_the_integrations_setting_refuses_unknown_names_by_name():
    with pytest.raises(
        ValueError, match=r"^nope, zz: no such integration \(Kueue's are batch/job, "
    ):
        Settings(integrations=("batch/job", "nope", "zz"))
    no_adapter = "statefulset"
    assert Settings(integrations=(no_adapter,)).manages(no_adapter) is False
    assert Settings().manages("jobset.x-k8s.io/jobset") is True
    assert Settings(integrations=("batch/job",)).manages("jobset.x-k8s.io/jobset") is False


def test_integrations_come_from_the_flag_or_tower_integrations(monkeypatch):
    assert from_args([]).integrations is None
    monkeypatch.setenv("TOWER_INTEGRATIONS", "batch/job, pod")
    assert from_args([]).integrations == ("batch/job", "pod")
    assert from_args(["--integrations", "jobset.x-k8s.io/jobset"]).integrations == (
        "jobset.x-k8s.io/jobset",
    )


def test_an_unknown_integration_is_one_line_naming_it():
    proc = subprocess.run(
        [sys.executable, "-m", "webhook", "--integrations", "batch/job,kubeflow.org/nope"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=30,
        env={k: v for k, v in os.environ.items() if k != "TOWER_INTEGRATIONS"},
    )
    assert proc.returncode == 2
    last = proc.stderr.splitlines()[-1]
    assert last.startswith(
        "python -m webhook: error: argument --integrations: kubeflow.org/nope: no such "
        "integration (Kueue's are batch/job, "
    )
    assert last.endswith("(--integrations or TOWER_INTEGRATIONS)")
    assert "Traceback" not in proc.stderr


# ----- the same patches as before for Job and JobSet ---------------------------------------


def _objects():
    base = {"apiVersion": "batch/v1", "kind": "Job"}
    yield "no metadata", {**base, "spec": {}}
    yield "no labels", {**base, "metadata": {"name": "j"}, "spec": {}}
    yield "labelled, no spec", {**base, "metadata": {"name": "j", "labels": {QUEUE: "q"}}}
    yield "spec null", {**base, "metadata": {"labels": {QUEUE: "q"}}, "spec": None}
    for suspend in (None, False, True):
        spec = {"template": {}} if suspend is None else {"suspend": suspend, "template": {}}
        yield f"suspend {suspend}", {**base, "metadata": {"labels": {QUEUE: "q"}}, "spec": spec}
    yield "other label", {**base, "metadata": {"labels": {"app": "x"}}, "spec": {}}
    yield "empty label", {**base, "metadata": {"labels": {QUEUE: ""}}, "spec": {}}
    yield "legacy annotation", {**base, "metadata": {"annotations": {QUEUE: "q"}}, "spec": {}}
    yield (
        "already queued",
        {
            **base,
            "metadata": {"labels": {QUEUE: "q"}, "annotations": {ORIGINAL: "false"}},
            "spec": {"suspend": True},
        },
    )
    yield (
        "other annotations",
        {
            **base,
            "metadata": {"labels": {QUEUE: "q"}, "annotations": {"a": "b"}},
            "spec": {"suspend": False},
        },
    )


@pytest.mark.parametrize("default_queue", [None, "default"])
@pytest.mark.parametrize("adapter", [JOB, JOBSET], ids=lambda a: a.kind)
@pytest.mark.parametrize(("case", "obj"), list(_objects()), ids=[c for c, _ in _objects()])
def test_a_queued_job_comes_out_suspended_labelled_and_the_patch_is_idempotent(
    case, obj, adapter, default_queue
):
    patch = queue_patch(obj, adapter, default_queue)
    queued = jsonpatch.apply_patch(copy.deepcopy(obj), patch)
    labels = (queued.get("metadata") or {}).get("labels") or {}
    if not labels.get(QUEUE):  # nothing asks for a queue: left as it is
        assert patch == []
        assert default_queue is None
        return
    assert adapter.is_suspended(queued)
    assert labels[QUEUE] in ("q", default_queue)
    assert ORIGINAL in queued["metadata"]["annotations"]
    assert queue_patch(queued, adapter, default_queue) == []  # the API server may call twice


@pytest.mark.parametrize(
    ("obj", "path", "op"),
    [
        ({"spec": {"a": 1}}, ("spec", "a"), {"op": "replace", "path": "/spec/a", "value": 9}),
        ({"spec": {}}, ("spec", "a"), {"op": "add", "path": "/spec/a", "value": 9}),
        ({"spec": None}, ("spec", "a"), {"op": "add", "path": "/spec", "value": {"a": 9}}),
        ({}, ("spec", "b", "a"), {"op": "add", "path": "/spec", "value": {"b": {"a": 9}}}),
        (
            {"spec": {"b": []}},
            ("spec", "b", "a"),
            {"op": "add", "path": "/spec/b", "value": {"a": 9}},
        ),
        (
            {"spec": {"x/y": {}}},
            ("spec", "x/y", "a~b"),
            {"op": "add", "path": "/spec/x~1y/a~0b", "value": 9},
        ),
    ],
)
def test_set_op_applies_to_the_object_as_it_is(obj, path, op):
    assert set_op(obj, path, 9) == op
    node = jsonpatch.apply_patch(obj, [op])
    for part in path:
        node = node[part]
    assert node == 9


def test_the_pods_of_a_statefulset_are_queued_without_the_pod_integration():
    """Kueue's implicit pod integration (since v0.15): with `statefulset` named and `pod` not,
    a StatefulSet's pods are gated and a plain labelled pod is left alone."""
    assert registry.enabled(["batch/job", "statefulset"])[-1].parents_only is True
    routes = admission_routes(Settings(integrations=("batch/job", "statefulset")))
    plain = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    assert "patch" not in routes["/mutate--v1-pod"](review_request(plain))
    marked = copy.deepcopy(plain)
    marked["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-suspending-parent": "statefulset"}
    gate = {
        "op": "add",
        "path": "/spec/schedulingGates",
        "value": [{"name": "kueue.x-k8s.io/admission"}, {"name": "kueue.x-k8s.io/topology"}],
    }
    assert gate in patch_of(routes["/mutate--v1-pod"](review_request(marked)))
    # Without any kind that queues pods, no pod is queued.
    assert "patch" not in admission_routes(Settings(integrations=("batch/job",)))[
        "/mutate--v1-pod"
    ](review_request(plain))
