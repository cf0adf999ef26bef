"""A topology assignment's Workload forms: Kueue's own vectors, both ways.

The cases are Kueue v0.19.2's pkg/util/tas/tas_assignment_test.go (`bothWaysTestCases`, and a
case of `oneWayTestCases`), transcribed as data: each internal list of domains encodes to
exactly Kueue's v1beta2 form (its single-slice encoding) and decodes back.
"""

from __future__ import annotations

from typing import Any

import pytest

from extender.core.api.topology import (
    REQUIRED,
    UNCONSTRAINED,
    DomainAssignment,
    SliceLayer,
    TopologyAssignment,
    decode,
    encode,
    from_v1beta1,
    to_v1beta1,
    topology_request,
)


def internal(levels: list[str], *domains: tuple[list[str], int]) -> TopologyAssignment:
    return TopologyAssignment(
        tuple(levels), tuple(DomainAssignment(tuple(v), c) for v, c in domains)
    )


def sliced(count: int, pods: dict[str, Any], *per_level: dict[str, Any]) -> dict[str, Any]:
    return {"domainCount": count, "valuesPerLevel": list(per_level), "podCounts": pods}


def ind(roots: list[str], prefix: str | None = None, suffix: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if prefix is not None:
        out["prefix"] = prefix
    if suffix is not None:
        out["suffix"] = suffix
    out["roots"] = roots
    return {"individual": out}


BOTH_WAYS = [
    ("empty", internal(["a", "b"]), {"levels": ["a", "b"], "slices": []}),
    (
        "one domain",
        internal(["a", "b"], (["a1", "b1"], 1)),
        {
            "levels": ["a", "b"],
            "slices": [sliced(1, {"universal": 1}, {"universal": "a1"}, {"universal": "b1"})],
        },
    ),
    (
        "multiple domains, same counts, no common prefix",
        internal(["a", "b"], (["a1", "b1"], 1), (["a2", "b2"], 1)),
        {
            "levels": ["a", "b"],
            "slices": [
                sliced(2, {"universal": 1}, ind(["1", "2"], "a"), ind(["1", "2"], "b")),
            ],
        },
    ),
    (
        "multiple domains, different counts, common prefix and suffix",
        internal(["a", "b"], (["p.a1.s", "p.b1.s"], 1), (["p.a2.s", "p.b2.s"], 2)),
        {
            "levels": ["a", "b"],
            "slices": [
                sliced(
                    2,
                    {"individual": [1, 2]},
                    ind(["1", "2"], "p.a", ".s"),
                    ind(["1", "2"], "p.b", ".s"),
                )
            ],
        },
    ),
    (
        "multiple domains, universal value",
        internal(["a", "b"], (["a1", "x"], 1), (["a1", "y"], 2)),
        {
            "levels": ["a", "b"],
            "slices": [sliced(2, {"individual": [1, 2]}, {"universal": "a1"}, ind(["x", "y"]))],
        },
    ),
    (
        "multiple domains, same counts, shrinking prefix",
        internal(["a"], (["a123"], 1), (["a12"], 1), (["a1"], 1), (["a13"], 1)),
        {"levels": ["a"], "slices": [sliced(4, {"universal": 1}, ind(["23", "2", "", "3"], "a1"))]},
    ),
    (
        "multiple domains, same counts, shrinking suffix",
        internal(["a"], (["123b"], 1), (["23b"], 1), (["3b"], 1), (["13b"], 1)),
        {
            "levels": ["a"],
            "slices": [sliced(4, {"universal": 1}, ind(["12", "2", "", "1"], suffix="3b"))],
        },
    ),
    (
        "multiple domains, same counts, max prefix & suffix overlap partially",
        internal(["a"], (["abacacada"], 1), (["abacada"], 1)),
        {"levels": ["a"], "slices": [sliced(2, {"universal": 1}, ind(["ac", ""], "ab", "acada"))]},
    ),
    (
        "multiple domains, same counts, max prefix & suffix overlap fully, shrinking strings",
        internal(["a"], (["ababa"], 1), (["aba"], 1)),
        {"levels": ["a"], "slices": [sliced(2, {"universal": 1}, ind(["ab", ""], suffix="aba"))]},
    ),
    (
        "multiple domains, same counts, max prefix & suffix overlap fully, growing strings",
        internal(["a"], (["aba"], 1), (["ababa"], 1)),
        {"levels": ["a"], "slices": [sliced(2, {"universal": 1}, ind(["", "ab"], suffix="aba"))]},
    ),
]


@pytest.mark.parametrize(("name", "domains", "v1beta2"), BOTH_WAYS, ids=[c[0] for c in BOTH_WAYS])
def test_encodes_as_kueue_and_decodes_back(name, domains, v1beta2):
    assert encode(domains) == v1beta2
    assert decode(v1beta2) == domains


def test_decodes_several_slices():
    # oneWayTestCases "multiple slices, no prefixes/suffixes or universal values"
    v1beta2 = {
        "levels": ["a", "b"],
        "slices": [
            sliced(1, {"individual": [1]}, ind(["a"]), ind(["b"])),
            sliced(2, {"individual": [2, 3]}, ind(["c", "e"]), ind(["d", "f"])),
        ],
    }
    assert decode(v1beta2) == internal(
        ["a", "b"], (["a", "b"], 1), (["c", "d"], 2), (["e", "f"], 3)
    )


def test_v1beta1_form_lists_every_domain_and_round_trips():
    v1beta2 = BOTH_WAYS[3][2]
    v1beta1 = to_v1beta1(v1beta2)
    assert v1beta1 == {
        "levels": ["a", "b"],
        "domains": [
            {"values": ["p.a1.s", "p.b1.s"], "count": 1},
            {"values": ["p.a2.s", "p.b2.s"], "count": 2},
        ],
    }
    assert from_v1beta1(v1beta1) == v1beta2


@pytest.mark.parametrize(
    ("raw", "mode", "level", "slices"),
    [
        ({"required": "rack", "preferred": "block"}, REQUIRED, "rack", ()),
        ({"unconstrained": True}, UNCONSTRAINED, None, ()),
        (
            {"podSetSliceRequiredTopology": "rack", "podSetSliceSize": 4},
            "implicit",
            None,
            (SliceLayer("rack", 4),),
        ),
        (
            {
                "required": "block",
                "podsetSliceRequiredTopologyConstraints": [
                    {"topology": "rack", "size": 8},
                    {"topology": "host", "size": 2},
                ],
            },
            REQUIRED,
            "block",
            (SliceLayer("rack", 8), SliceLayer("host", 2)),
        ),
    ],
)
def test_reads_a_workloads_topology_request(raw, mode, level, slices):
    request = topology_request(raw)
    assert request is not None
    assert (request.mode, request.level, request.slices) == (mode, level, slices)
    assert request.explicit


def test_a_request_with_only_the_pod_index_label_is_not_explicit():
    request = topology_request({"podIndexLabel": "batch.kubernetes.io/job-completion-index"})
    assert request is not None
    assert not request.explicit
    assert topology_request(None) is None
