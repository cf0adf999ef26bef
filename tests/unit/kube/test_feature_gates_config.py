"""Kueue's featureGates in `--config` and `--feature-gates`, resolved into the controller's flags."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from extender.kube.config_file import ConfigFileError, load, settle
from extender.kube.flags import add_arguments

V1BETA2 = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"


def settled(tmp_path: Path, gates: str | None, *flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    argv = list(flags)
    if gates is not None:
        path = tmp_path / "config.yaml"
        path.write_text(f"{V1BETA2}featureGates: {gates}\n")
        argv += ["--config", str(path)]
    args = parser.parse_args(argv)
    settle(args)
    return args


@pytest.fixture(autouse=True)
def _no_gates_from_the_environment(monkeypatch):
    monkeypatch.delenv("TOWER_FEATURE_GATES", raising=False)
    monkeypatch.delenv("TOWER_CONFIG", raising=False)


@pytest.mark.parametrize(
    ("gates", "flags", "want"),
    [
        (None, (), {"TASReplaceNodeOnPodTermination": True, "LocalQueueMetrics": True}),
        (
            "{TASReplaceNodeOnPodTermination: false}",
            (),
            {"TASReplaceNodeOnPodTermination": False, "LocalQueueMetrics": True},
        ),
        (
            None,
            ("--feature-gates", "TASReplaceNodeOnNodeTaints=false,LocalQueueMetrics=false"),
            {"TASReplaceNodeOnNodeTaints": False, "LocalQueueMetrics": False},
        ),
        (
            "{TASReplaceNodeOnPodTermination: false, LocalQueueMetrics: false}",
            ("--feature-gates", "TASReplaceNodeOnPodTermination=true"),
            {"TASReplaceNodeOnPodTermination": True, "LocalQueueMetrics": False},
        ),
    ],
    ids=[
        "neither: Kueue's defaults",
        "the file's gate",
        "the flag's gates",
        "the flag wins gate by gate, the file keeps the rest",
    ],
)
def test_gates_reach_the_controllers_settings(tmp_path, gates, flags, want):
    args = settled(tmp_path, gates, *flags)
    assert {name: args.feature_gates[name] for name in want} == want
    assert args.metrics_config.local_queues is want["LocalQueueMetrics"]


def test_the_environment_variable_is_the_flag(tmp_path, monkeypatch):
    monkeypatch.setenv("TOWER_FEATURE_GATES", "MetricsForCohorts=false")
    assert settled(tmp_path, None).feature_gates["MetricsForCohorts"] is False


@pytest.mark.parametrize(
    ("gates", "want"),
    [
        ("{NoSuchGate: true}", "featureGates: unrecognized feature gate: NoSuchGate"),
        (
            "{HierarchicalCohorts: false}",
            "featureGates: cannot set feature gate HierarchicalCohorts to false, feature is "
            "locked to true",
        ),
        (
            "{PriorityBoost: true}",
            "featureGates: feature gate PriorityBoost=true is not supported: Tower does not "
            "read kueue.x-k8s.io/priority-boost",
        ),
    ],
    ids=["unknown", "locked", "not in Tower"],
)
def test_a_file_asking_what_cannot_be_is_one_line_naming_the_field(tmp_path, gates, want):
    path = tmp_path / "config.yaml"
    path.write_text(f"{V1BETA2}featureGates: {gates}\n")
    with pytest.raises(ConfigFileError) as err:
        load(str(path))
    assert str(err.value) == f"--config {path}: {want}"


def test_a_flag_asking_what_cannot_be_is_one_line_naming_the_flag(tmp_path):
    with pytest.raises(ConfigFileError) as err:
        settled(tmp_path, None, "--feature-gates", "FlavorFungibility=false")
    assert str(err.value) == (
        "--feature-gates: feature gate FlavorFungibility=false is not supported: Tower follows "
        "a ClusterQueue's flavorFungibility"
    )
    with pytest.raises(ConfigFileError) as err:
        settled(tmp_path, None, "--feature-gates", "LocalQueueMetrics")
    assert str(err.value) == "--feature-gates: missing bool value for LocalQueueMetrics"


def test_gates_are_no_longer_warned(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(f"{V1BETA2}featureGates: {{TASCacheTopologyTree: true}}\n")
    assert load(str(path)).warnings("config.yaml") == []


def test_disable_wait_for_pods_ready_turns_the_files_wait_for_pods_ready_off(tmp_path):
    # v1beta2 turns waitForPodsReady on when the file says nothing of it; the gate turns it off.
    assert settled(tmp_path, "{}").wait_for_pods_ready is not None
    assert settled(tmp_path, "{DisableWaitForPodsReady: true}").wait_for_pods_ready is None
    flagged = settled(tmp_path, "{}", "--feature-gates", "DisableWaitForPodsReady=true")
    assert flagged.wait_for_pods_ready is None
