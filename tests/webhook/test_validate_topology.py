"""A queued Job's topology annotations are checked at create, as Kueue's webhook checks them:
each refusal names the annotation's path and says what is wrong in Kueue's words."""

from __future__ import annotations

import pytest

from tests.fixtures import admission_review
from webhook.mutate import JOB
from webhook.validate import validate_job, validate_kueue

CREATE = "02-validate.job-CREATE-generateName.seed-job"
P = "kueue.x-k8s.io/podset-"
AT = "spec.template.metadata.annotations"


def review(annotations: dict[str, str], completions: int = 4) -> dict:
    request = admission_review(CREATE)["request"]
    spec = request["object"]["spec"]
    spec["parallelism"] = spec["completions"] = completions
    spec["template"].setdefault("metadata", {})["annotations"] = annotations
    return request


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        (
            {P + "required-topology": "rack", P + "preferred-topology": "rack"},
            f"{AT}: must not contain more than one topology annotation: "
            '["kueue.x-k8s.io/podset-required-topology", '
            '"kueue.x-k8s.io/podset-preferred-topology", '
            '"kueue.x-k8s.io/podset-unconstrained-topology"]',
        ),
        (
            {P + "unconstrained-topology": "yes"},
            f"{AT}[{P}unconstrained-topology]: 'yes': must be a boolean value",
        ),
        (
            {P + "slice-required-topology": "rack"},
            f"{AT}[{P}slice-size]: must be set when "
            "'kueue.x-k8s.io/podset-slice-required-topology' is specified",
        ),
        (
            {P + "slice-size": "2"},
            f"{AT}[{P}slice-size]: may not be set when "
            "'kueue.x-k8s.io/podset-slice-required-topology' is not specified",
        ),
        (
            {P + "slice-required-topology": "rack", P + "slice-size": "8"},
            f"{AT}[{P}slice-size]: 8: must not be greater than pod set count 4",
        ),
        (
            {P + "slice-required-topology": "rack", P + "slice-size": "two"},
            f"{AT}[{P}slice-size]: 'two': must be a numeric value",
        ),
        (
            {P + "group-name": "leaders"},
            f"{AT}[{P}group-name]: may not be set when neither "
            "'kueue.x-k8s.io/podset-preferred-topology' nor "
            "'kueue.x-k8s.io/podset-required-topology' is specified",
        ),
        (
            {P + "required-topology": "Not A Label"},
            f"{AT}[{P}required-topology]: 'Not A Label': name part must consist of alphanumeric "
            "characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        ),
        (
            {
                P + "slice-required-topology-constraints": '[{"topology": "rack", "size": 3}, '
                '{"topology": "host", "size": 2}]'
            },
            f"{AT}[{P}slice-required-topology-constraints][1].size: 2: must evenly divide the "
            "parent layer size 3",
        ),
    ],
)
def test_a_bad_topology_annotation_is_refused_with_kueues_words(annotations, message):
    answer = validate_job(review(annotations), JOB)
    assert answer["allowed"] is False
    assert answer["status"]["message"].endswith(message)


def test_good_topology_annotations_are_allowed():
    for good in (
        {P + "required-topology": "cloud.provider.com/topology-rack"},
        {P + "preferred-topology": "cloud.provider.com/topology-block",
         P + "slice-required-topology": "kubernetes.io/hostname", P + "slice-size": "2"},
        {P + "unconstrained-topology": "true"},
    ):  # fmt: skip
        assert validate_job(review(good), JOB)["allowed"] is True


def test_a_flavor_with_towers_older_topology_key_is_warned_toward_topologies():
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "racks", "annotations": {"tower.dev/topology-key": "rack"}},
        "spec": {"nodeLabels": {"pool": "gpu"}},
    }
    request = {"uid": "u", "operation": "CREATE",
               "kind": {"group": "kueue.x-k8s.io", "kind": "ResourceFlavor"}, "object": flavor}  # fmt: skip
    answer = validate_kueue(request, "ResourceFlavor")
    assert answer["allowed"] is True
    (warning,) = answer["warnings"]
    assert warning.startswith("ResourceFlavor racks: tower.dev/topology-key is Tower's older way")
    assert "docs/topology.md" in warning
