"""The maximum execution time: the label's checks, the time left, the seconds accumulated."""

import pytest

from extender.core.admission.exec_time import accumulated, stopped_reason, time_left
from extender.core.jobframework.exec_limit import (
    LABEL,
    label_change_problem,
    label_problem,
    limit_of,
)


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("600", None),
        ("+5", None),  # Go's Atoi takes a sign
        ("0", "Invalid value: 0: should be greater than 0"),
        ("-3", "Invalid value: -3: should be greater than 0"),
        ("abc", 'Invalid value: "abc": strconv.Atoi: parsing "abc": invalid syntax'),
        ("1.5", 'Invalid value: "1.5": strconv.Atoi: parsing "1.5": invalid syntax'),
        ("1_000", 'Invalid value: "1_000": strconv.Atoi: parsing "1_000": invalid syntax'),
        (" 7", 'Invalid value: " 7": strconv.Atoi: parsing " 7": invalid syntax'),
        ("", 'Invalid value: "": strconv.Atoi: parsing "": invalid syntax'),
        (
            "99999999999999999999",
            'Invalid value: "99999999999999999999": strconv.Atoi: parsing '
            '"99999999999999999999": value out of range',
        ),
    ],
)
def test_the_label_on_create(value, want):
    """Kueue's validateCreateForMaxExecTime."""
    assert label_problem(value) == want


@pytest.mark.parametrize(
    ("old", "new", "suspended", "want"),
    [
        ("10", "20", False, 'Invalid value: "20": field is immutable'),
        ("10", None, False, 'Invalid value: "": field is immutable'),
        (None, "20", False, 'Invalid value: "20": field is immutable'),
        ("10", "20", True, None),  # suspended before and after: it may change
        ("10", "10", False, None),
        (None, None, False, None),
    ],
)
def test_the_label_on_update(old, new, suspended, want):
    """Kueue's validateUpdateForMaxExecTime."""
    assert label_change_problem(old, new, suspended) == want


@pytest.mark.parametrize(
    ("labels", "want"),
    [
        ({LABEL: "600"}, 600),
        ({}, None),
        ({LABEL: "0"}, None),
        ({LABEL: "nope"}, None),
        ({LABEL: str(2**31)}, None),  # past int32: Kueue's ParseInt(…, 32) fails, no limit
        ({LABEL: str(2**31 - 1)}, 2**31 - 1),
    ],
)
def test_the_limit_a_workload_gets_from_its_job(labels, want):
    assert limit_of(labels) == want


@pytest.mark.parametrize(
    ("limit", "past", "since", "now", "want"),
    [
        (None, None, 100.0, 500.0, None),  # no limit: never out of time
        (60, None, 100.0, 130.0, 30.0),
        (60, 50, 100.0, 105.0, 5.0),  # earlier admissions count
        (60, None, 100.0, 160.0, 0.0),  # exactly up: out of time
        (60, 50, 100.0, 120.0, -10.0),
    ],
)
def test_time_left(limit, past, since, now, want):
    assert time_left(limit, past, since, now) == want


@pytest.mark.parametrize(
    ("past", "since", "now", "want"),
    [
        (None, 100.0, 102.9, 2),  # whole seconds, truncated
        (7, 100.0, 110.0, 17),
        (7, 100.0, 99.0, 7),  # a clock behind the condition adds nothing
    ],
)
def test_accumulated_after_an_admission_ends(past, since, now, want):
    assert accumulated(past, since, now) == want


def test_why_names_the_limit_and_the_seconds_that_still_count():
    said = stopped_reason(2, 2, "team-a", "job-short-1")
    assert said == (
        "stopped by its execution-time limit: it was admitted 2s in all "
        "(spec.maximumExecutionTimeSeconds), so it was deactivated; `kubectl tower resume "
        "workload job-short-1 -n team-a` queues it again (2s count against it)"
    )
    assert stopped_reason(None, None, "ns", "wl").endswith("queues it again")
