"""Kueue's admission-gated-by annotation: its format and update rules, with Kueue's errors
(Kueue v0.19.2, pkg/util/webhook/validation_admissiongatedby.go and its webhook tests)."""

import pytest

from extender.core.api.admission_gates import (
    gates,
    problems_on_create,
    problems_on_update,
    propagated_event_message,
)

PATH = "metadata.annotations[kueue.x-k8s.io/admission-gated-by]"
RFC1123 = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    r"used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
BAD_PATH = r"Invalid path (regex used for validation is '[A-Za-z0-9/\-._~%!$&'()*+,;=:]+')"


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("", []),
        ("example.com/controller", []),
        ("example.com/gate ", []),
        ("example.com/gate ,example.com/gate2", []),
        ("example.com/gate, example.com/gate2", []),
        (" example.com/gate", []),
        ("example.com/a,not.example.com/b", []),
        (
            "this is an invalid value",
            [
                f'{PATH}: Invalid value: "this is an invalid value": must be a domain-prefixed '
                'path (such as "acme.io/foo")'
            ],
        ),
        (
            "duplicates.are/invalid,duplicates.are/invalid",
            [
                f'{PATH}: Invalid value: "duplicates.are/invalid,duplicates.are/invalid": '
                "duplicate gate name: duplicates.are/invalid"
            ],
        ),
        (
            "cannot.be.too.long/" + "but-this-is-too-long" * 20,
            [f"{PATH}: Too long: may not be more than 63 bytes"],
        ),
        ("example.com/gate name", [f'{PATH}: Invalid value: "gate name": {BAD_PATH}']),
        ("example .com/gate", [f'{PATH}: Invalid value: "example .com": {RFC1123}']),
        (
            "valid.com/gate,invalid gate.com/controller",
            [f'{PATH}: Invalid value: "invalid gate.com": {RFC1123}'],
        ),
        (
            "example.com/a,,example.com/b",
            [
                f'{PATH}: Invalid value: "example.com/a,,example.com/b": cannot contain empty gate names'
            ],
        ),
    ],
    ids=[
        "absent",
        "one gate",
        "trailing space",
        "space before comma",
        "space after comma",
        "leading space",
        "two gates",
        "not a domain-prefixed path",
        "a gate named twice",
        "a name longer than 63",
        "a space in the path",
        "a space in the domain",
        "one good gate, one with a space",
        "an empty name between commas",
    ],
)
def test_format_on_create(value, want):
    assert problems_on_create(value) == want


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        ("example.com/a,example.com/b", "example.com/a", []),
        ("example.com/a", None, []),
        ("example.com/a", "", []),
        ("example.com/a", "example.com/a", []),
        (None, "example.com/a", [f"{PATH}: Forbidden: cannot add admission gate after creation"]),
        ("", "example.com/a", [f"{PATH}: Forbidden: cannot add admission gate after creation"]),
        (
            "example.com/a",
            "example.com/a,example.com/b",
            [f"{PATH}: Forbidden: can only remove gates, not add new ones"],
        ),
        (
            "example.com/a",
            "example.com/b",
            [f"{PATH}: Forbidden: can only remove gates, not add new ones"],
        ),
    ],
    ids=[
        "one of two taken off",
        "the annotation taken off",
        "emptied",
        "unchanged",
        "added after creation",
        "an empty annotation filled",
        "a gate added",
        "a gate swapped for another",
    ],
)
def test_rules_on_update(old, new, want):
    assert problems_on_update(old, new) == want


def test_gates_are_comma_separated_and_trimmed():
    assert gates(" example.com/a , example.com/b") == ("example.com/a", "example.com/b")
    assert gates("  ") == ()


def test_the_job_event_quotes_the_value_as_kueue_does():
    assert (
        propagated_event_message("example.com/controller1,example.com/controller2")
        == 'Updated workload AdmissionGatedBy to "example.com/controller1,example.com/controller2"'
    )
    assert propagated_event_message("") == 'Updated workload AdmissionGatedBy to ""'
