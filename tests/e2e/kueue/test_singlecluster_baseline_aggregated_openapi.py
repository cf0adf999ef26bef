"""Kueue v0.19.2 test/e2e/singlecluster/baseline/aggregated_openapi_test.go, ported case by case.

With the visibility APIServices registered, kube-apiserver merges their OpenAPI into its
/openapi/v2; a `$ref` there that names no definition breaks kubectl for every apply. kubectl's
loader (kube-openapi's proto.NewOpenAPIData) refuses such a document: here each `$ref` is
resolved the same way, against the document's definitions.

Tower's visibility server serves no /openapi/v2 of its own (kube-aggregator then merges
nothing for it, and kubectl explain knows none of its types); the case holds as Kueue
states it: the aggregated document stays loadable."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.util import MEDIUM_TIMEOUT, eventually

pytestmark = pytest.mark.e2e
GO = "singlecluster/baseline/aggregated_openapi_test.go"


def refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for value in node.values() for r in refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in refs(value)]
    return []


def resolves(document: dict, ref: str) -> bool:
    """A local reference (`#/definitions/X`, `#/parameters/Y`) names a node of the document."""
    if not ref.startswith("#/"):
        return False
    node: object = document
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def dangling(document: dict) -> list[str]:
    """The references kube-openapi would refuse: not local, or naming nothing."""
    return sorted({ref for ref in refs(document) if not resolves(document, ref)})


@kueue_case(GO, "Aggregated OpenAPI Should have resolvable OpenAPI v2 references")
def test_aggregated_openapi_references_resolve(
    api_client: client.ApiClient, visibility_api: str
) -> None:
    def resolvable() -> bool:
        request = api_client.param_serialize(
            "GET", "/openapi/v2", header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )  # fmt: skip
        response = api_client.call_api(*request)
        response.read()
        document = api_client.response_deserialize(response, {"200": "object"}).data
        assert document.get("swagger") == "2.0", str(document)[:200]
        bad = dangling(document)
        assert not bad, f"{len(bad)} unresolvable references, first {bad[:5]}"
        return True

    eventually(resolvable, MEDIUM_TIMEOUT, "a resolvable aggregated /openapi/v2")
