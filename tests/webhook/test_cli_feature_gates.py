"""`python -m webhook` checks Kueue's feature gates as the controller does, file and flag."""

from __future__ import annotations

import pytest

from webhook.settings import from_args

V1BETA2 = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"


@pytest.fixture(autouse=True)
def _no_gates_from_the_environment(monkeypatch):
    monkeypatch.delenv("TOWER_FEATURE_GATES", raising=False)
    monkeypatch.delenv("TOWER_CONFIG", raising=False)


def test_gates_tower_can_honour_are_accepted(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(V1BETA2 + "featureGates: {LocalQueueMetrics: false}\n")
    assert from_args(["--config", str(config), "--feature-gates", "MetricsForCohorts=false"])


def test_the_files_unknown_gate_is_kueues_error_and_exit_2(tmp_path, capsys):
    config = tmp_path / "config.yaml"
    config.write_text(V1BETA2 + "featureGates: {NoSuchGate: true}\n")
    with pytest.raises(SystemExit) as stop:
        from_args(["--config", str(config)])
    assert stop.value.code == 2
    assert capsys.readouterr().err == (
        f"error: --config {config}: featureGates: unrecognized feature gate: NoSuchGate\n"
    )


def test_the_flags_gate_tower_cannot_do_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as stop:
        from_args(["--feature-gates", "LocalQueueMetrics=false,PriorityBoost=true"])
    assert stop.value.code == 2
    assert capsys.readouterr().err == (
        "error: --feature-gates: feature gate PriorityBoost=true is not supported: Tower does "
        "not read kueue.x-k8s.io/priority-boost\n"
    )
