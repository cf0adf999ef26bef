"""resource.k8s.io/v1 in the API double: served only when asked, defaulted and checked by its
schema (tests/apidouble/resource.py says what it leaves out)."""

from __future__ import annotations

import pytest
from kubernetes import config as k8s_config

from extender.kube.api.client import ApiError, RequestBudget, RestClient
from extender.kube.api.resources import RESOURCE_CLAIM_TEMPLATES
from tests.apidouble import ApiDouble, resource
from tests.controller.test_api_double import send


@pytest.fixture
def api():
    double = ApiDouble()
    double.start()
    yield double
    double.stop()


def template(request: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "single-gpu"},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


PATH = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates"


def test_like_v1_32_it_does_not_serve_the_group_until_asked(api):
    status, groups, _ = send(api, "GET", "/apis")
    assert status == 200
    assert "resource.k8s.io" not in [g["name"] for g in groups["groups"]]
    assert send(api, "GET", PATH)[0] == 404
    resource.serve(api)
    _, groups, _ = send(api, "GET", "/apis")
    assert {"groupVersion": "resource.k8s.io/v1", "version": "v1"} in next(
        g["versions"] for g in groups["groups"] if g["name"] == "resource.k8s.io"
    )


def test_an_exact_request_is_defaulted_as_kube_apiserver_defaults_it(api):
    resource.serve(api)
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
    status, created, _ = send(api, "POST", PATH, template(request))
    assert status == 201
    [stored] = created["spec"]["spec"]["devices"]["requests"]
    assert stored["exactly"] == {
        "deviceClassName": "gpu.example.com",
        "allocationMode": "ExactCount",
        "count": 1,
    }


@pytest.mark.parametrize(
    ("request_", "want"),
    [
        (
            {"name": "gpu", "exactly": {}},
            "spec.spec.devices.requests[0].exactly.deviceClassName: Required value",
        ),
        (
            {"name": "gpu", "exactly": {"deviceClassName": "g", "allocationMode": "Some"}},
            'spec.spec.devices.requests[0].exactly.allocationMode: Unsupported value: "Some": '
            'supported values: "ExactCount", "All"',
        ),
        (
            {"exactly": {"deviceClassName": "g"}},
            "spec.spec.devices.requests[0].name: Required value",
        ),
    ],
    ids=["no device class", "an unknown allocation mode", "a request without a name"],
)
def test_what_its_schema_refuses(api, request_, want):
    resource.serve(api)
    status, answer, _ = send(api, "POST", PATH, template(request_))
    assert status == 422
    assert (
        answer["message"]
        == f'ResourceClaimTemplate.resource.k8s.io "single-gpu" is invalid: {want}'
    )


def test_the_controllers_client_reads_them(api, tmp_path):
    client = RestClient(
        k8s_config.new_client_from_config(config_file=api.kubeconfig(str(tmp_path / "k"))),
        RequestBudget(100, 100),
    )
    assert client.served("resource.k8s.io/v1") is None
    resource.serve(api)
    assert "resourceclaimtemplates" in (client.served("resource.k8s.io/v1") or ())
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}}
    client.create(RESOURCE_CLAIM_TEMPLATES, template(request), "default")
    with pytest.raises(ApiError):
        client.create(RESOURCE_CLAIM_TEMPLATES, template(request), "default")  # exists
