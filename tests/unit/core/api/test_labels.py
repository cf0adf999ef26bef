import pytest

from extender.core.api.labels import (
    LabelSelector,
    NodeSelectorTerm,
    Requirement,
    Taint,
    Toleration,
    flavor_matches_node_constraints,
)

TAINT = Taint("gpu", "true", "NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "want"),
    [
        (Toleration("gpu", "Equal", "true", "NoSchedule"), True),
        (Toleration("gpu", "Equal", "false", "NoSchedule"), False),
        (Toleration("gpu", "Exists"), True),
        (Toleration("", "Exists"), True),
        (Toleration("gpu", "Exists", effect="NoExecute"), False),
        (Toleration("other", "Exists"), False),
    ],
    ids=[
        "same key value effect",
        "other value",
        "Exists on the key",
        "Exists on everything",
        "other effect",
        "other key",
    ],
)
def test_tolerations(toleration, want):
    assert toleration.tolerates(TAINT) is want


def test_label_selector():
    sel = LabelSelector((("team", "a"),), (Requirement("env", "NotIn", ("prod",)),))
    assert sel.matches({"team": "a"})
    assert not sel.matches({"team": "a", "env": "prod"})
    assert LabelSelector().matches({})


@pytest.mark.parametrize(
    ("selector", "terms", "want"),
    [
        ({"pool": "a100"}, (), True),
        ({"pool": "h100"}, (), False),
        ({"zone": "x"}, (), True),  # keys the flavor does not set are not its business
        ({}, (NodeSelectorTerm((Requirement("pool", "In", ("h100",)),)),), False),
        (
            {},
            (
                NodeSelectorTerm((Requirement("pool", "In", ("h100",)),)),
                NodeSelectorTerm((Requirement("pool", "In", ("a100",)),)),
            ),
            True,
        ),
        ({}, (NodeSelectorTerm((Requirement("zone", "In", ("x",)),)),), True),
    ],
    ids=[
        "selector matches",
        "selector conflicts",
        "unrelated selector key",
        "affinity excludes the flavor",
        "one affinity term matches",
        "term emptied by narrowing",
    ],
)
def test_flavor_matching_considers_only_the_flavors_keys(selector, terms, want):
    assert flavor_matches_node_constraints({"pool": "a100"}, selector, terms) is want
