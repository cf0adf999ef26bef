"""metrics.customLabels: checked with Kueue's rules and words, read from objects, and what a
job's Workload is made with under the CustomMetricLabels gate (and without it)."""

from __future__ import annotations

import pytest

from extender.core.config.custom_labels import (
    UNTRACKED,
    WORKLOAD,
    CustomLabel,
    CustomLabels,
    parse,
)
from extender.core.config.kueue_config import parse as parse_config
from extender.core.config.schema import ConfigError
from extender.core.jobframework.copied_annotations import from_members

# The e2e suite's entries (Kueue's custom_metrics_test.go).
E2E = [
    {"name": "custom_label_key", "sourceLabelKey": "toCopyKeyCustom", "sourceKind": "Workload",
     "trackedValues": ["custom_value"]},
    {"name": "custom_annotation_key", "sourceAnnotationKey": "toCopyAnnotation",
     "sourceKind": "Workload", "trackedValues": ["annotation_value"]},
]  # fmt: skip


def workload_entry(name: str, **more):
    return {"name": name, "sourceKind": "Workload", "trackedValues": ["a"], **more}


@pytest.mark.parametrize(
    ("entries", "want_error"),
    [
        pytest.param(
            [{"name": "1team"}],
            'metrics.customLabels[0].name: Invalid value: "1team": must match '
            "^[a-zA-Z][a-zA-Z0-9_]*$",
            id="a name that does not start with a letter",
        ),
        pytest.param(
            [{"name": "team"}, {"name": "team", "sourceLabelKey": "other"}],
            'metrics.customLabels[1].name: Duplicate value: "team"',
            id="a name twice",
        ),
        pytest.param(
            [{"name": "team", "sourceLabelKey": "a", "sourceAnnotationKey": "b"}],
            'metrics.customLabels[0]: Invalid value: "team": sourceLabelKey and '
            "sourceAnnotationKey are mutually exclusive",
            id="a label and an annotation both",
        ),
        pytest.param(
            [{"name": "team", "sourceLabelKey": "bad key!"}],
            'metrics.customLabels[0].sourceLabelKey: Invalid value: "bad key!": name part must',
            id="a source key that is no label key",
        ),
        pytest.param(
            [{"name": "team", "sourceKind": "Workload"}],
            "metrics.customLabels[0].trackedValues: Invalid value: []: must not be empty when "
            "sourceKind is 'Workload'",
            id="a Workload entry without trackedValues",
        ),
        pytest.param(
            [workload_entry("team", trackedValues=[str(i) for i in range(13)])],
            "must not be greater than 12 when sourceKind is 'Workload'",
            id="a Workload entry with 13 trackedValues",
        ),
        pytest.param(
            [{"name": "team", "trackedValues": [str(i) for i in range(17)]}],
            "metrics.customLabels[0].trackedValues: Too many: 17: must have at most 16 items",
            id="a ClusterQueue entry with 17 trackedValues",
        ),
        pytest.param(
            [{"name": "team", "trackedValues": ["a", "a"]}],
            "metrics.customLabels[0].trackedValues: Invalid value: ['a', 'a']: must not "
            "contain duplicates",
            id="a tracked value twice",
        ),
        pytest.param(
            [workload_entry("a"), workload_entry("b"), workload_entry("c")],
            "metrics.customLabels: Invalid value: too many custom labels for source kind "
            "Workload: found 3, expected <= 2",
            id="three Workload entries",
        ),
        pytest.param(
            [{"name": f"l{i}", "sourceKind": "LocalQueue"} for i in range(7)],
            "too many custom labels for source kind LocalQueue: found 7, expected <= 6",
            id="seven LocalQueue entries",
        ),
        pytest.param(
            [{"name": "team", "sourceKind": "Node"}],
            "metrics.customLabels: Invalid value: unknown source kind: Node",
            id="an unknown source kind",
        ),
        pytest.param(
            [{"name": f"l{i}", "sourceKind": "Cohort"} for i in range(21)],
            "metrics.customLabels: Too many: 21: must have at most 20 items",
            id="twenty-one entries",
        ),
    ],
)
def test_kueues_rules_refuse_an_entry_in_its_words(entries, want_error):
    with pytest.raises(ConfigError) as err:
        parse(entries, enabled=True)
    assert want_error in str(err.value)


def test_an_entry_reads_its_key_and_reports_untracked_values_as_kueue_marks_them():
    team = CustomLabel("team")  # no source key: the name is the label read
    assert team.value({"team": "ml"}, {}) == "ml"
    assert team.value({}, {}) == ""
    tracked = CustomLabel("tier", source_annotation_key="example.com/tier",
                          tracked_values=("gold",))  # fmt: skip
    assert tracked.value({}, {"example.com/tier": "gold"}) == "gold"
    assert tracked.value({}, {"example.com/tier": "bronze"}) == UNTRACKED
    assert tracked.value({"example.com/tier": "gold"}, {}) == UNTRACKED  # a label is not read
    assert tracked.metric_label == "custom_tier"


def test_the_e2e_entries_add_a_label_key_and_an_annotation_key_to_copy_when_the_gate_is_on():
    on = parse(E2E, enabled=True)
    assert on.label_keys_to_copy(("toCopyKeyIntegration",)) == (
        "toCopyKeyIntegration",
        "toCopyKeyCustom",
    )
    assert on.workload_annotation_keys() == ("toCopyAnnotation",)
    assert on.label_names(WORKLOAD) == ("custom_custom_label_key", "custom_custom_annotation_key")
    # A Workload without the annotation has no tracked value: Kueue's mark, not "".
    assert on.values(WORKLOAD, {"toCopyKeyCustom": "custom_value"}, {}) == (
        "custom_value",
        UNTRACKED,
    )
    off = parse(E2E, enabled=False)  # checked, but Kueue copies only labelKeysToCopy
    assert off.label_keys_to_copy(("toCopyKeyIntegration",)) == ("toCopyKeyIntegration",)
    assert off.workload_annotation_keys() == ()
    assert CustomLabels().label_names(WORKLOAD) == ()


def configuration(gates: dict[str, bool], labels: list[dict]) -> dict:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "featureGates": gates,
        "metrics": {"customLabels": labels},
    }


def test_the_configuration_file_takes_them_on_as_its_gate_says():
    parsed = parse_config(configuration({"CustomMetricLabels": True}, E2E))
    assert parsed.custom_labels.enabled
    assert [e.name for e in parsed.custom_labels.entries] == [
        "custom_label_key",
        "custom_annotation_key",
    ]
    assert not parse_config(configuration({}, E2E)).custom_labels.enabled
    with pytest.raises(ConfigError, match=r"metrics.customLabels\[0\].name"):
        parse_config(configuration({"CustomMetricLabels": True}, [{"name": "_x"}]))


@pytest.mark.parametrize(
    ("members", "want_annotations", "want_problem"),
    [
        pytest.param(
            [("p1", {"a": "v", "other": "1"}), ("p2", {"a": "v", "other": "2"})],
            {"a": "v"},
            None,
            id="members that agree give it",
        ),
        pytest.param(
            [("p1", {}), ("p2", {"a": "v"})],
            {"a": "v"},
            None,
            id="a member without it takes the others'",
        ),
        pytest.param(
            [("p1", {"a": "v"}), ("p2", {"a": "w"})],
            {},
            "pods p1 and p2 have different values of annotation a: v!=w (metrics.customLabels)",
            id="members that disagree give none and say why",
        ),
    ],
)
def test_a_pod_groups_members_must_agree_on_an_annotation_copied(
    members, want_annotations, want_problem
):
    assert from_members(members, ("a",)) == (want_annotations, want_problem)
