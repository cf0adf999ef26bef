"""`python -m extender run --feature-gates`: a gate that cannot be is one line and exit 2."""

from __future__ import annotations

import pytest

from tests.controller.test_runtime import run_controller


@pytest.mark.parametrize(
    ("gates", "want"),
    [
        ("NoSuchGate=true", "unrecognized feature gate: NoSuchGate"),
        (
            "ManagedJobsNamespaceSelectorAlwaysRespected=false",
            "cannot set feature gate ManagedJobsNamespaceSelectorAlwaysRespected to false, "
            "feature is locked to true",
        ),
        (
            "TASBalancedPlacement=true",
            "feature gate TASBalancedPlacement=true is not supported: Tower has no balanced "
            "TAS placement",
        ),
    ],
    ids=["unknown", "locked", "not in Tower"],
)
def test_a_gate_that_cannot_be_stops_the_start_in_one_line(gates, want):
    proc = run_controller("--feature-gates", gates)
    assert proc.returncode == 2
    assert proc.stderr == f"error: --feature-gates: {want}\n"
