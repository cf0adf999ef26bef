"""Kueue's metrics section and its metrics' feature gates in `--config`: acted on, not warned."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

import pytest

from extender.core.config.kueue_config import LabelSelector, MetricsConfig, SelectorRequirement
from extender.kube.api.metrics import Metrics
from extender.kube.config_file import ConfigFileError, load, settle
from extender.kube.flags import add_arguments

V1BETA2 = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"


def settled(tmp_path: Path, body: str | None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    argv = []
    if body is not None:
        path = tmp_path / "config.yaml"
        path.write_text(V1BETA2 + textwrap.dedent(body))
        argv = ["--config", str(path)]
    args = parser.parse_args(argv)
    return args, settle(args)


def test_without_a_file_or_a_word_of_metrics_kueues_defaults_hold(tmp_path):
    for body in (None, ""):
        args, warnings = settled(tmp_path, body)
        assert args.metrics_config == MetricsConfig()
        assert warnings == []
    defaults = MetricsConfig()
    assert defaults.cluster_queue_resources is False  # Kueue's enableClusterQueueResources
    assert defaults.exposes_local_queue({})  # LocalQueueMetrics: Beta, on


def test_the_metrics_fields_and_gates_are_acted_on_without_a_warning(tmp_path):
    args, warnings = settled(
        tmp_path,
        """\
        metrics:
          enableClusterQueueResources: true
          localQueueMetrics:
            enable: true
            localQueueSelector:
              matchLabels: {team: a}
              matchExpressions: [{key: tier, operator: NotIn, values: [dev]}]
        featureGates: {MetricsForCohorts: false, MetricForWorkloadCreationLatency: false}
        """,
    )
    assert warnings == []
    config = args.metrics_config
    assert config.cluster_queue_resources is True
    assert config.local_queue_selector == LabelSelector(
        (("team", "a"),), (SelectorRequirement("tier", "NotIn", ("dev",)),)
    )
    assert (config.cohorts, config.workload_creation_latency) == (False, False)
    assert config.exposes_local_queue({"team": "a"})
    assert not config.exposes_local_queue({"team": "a", "tier": "dev"})
    assert not config.exposes_local_queue({"team": "b"})


def test_a_local_queue_metrics_section_without_enable_turns_them_off_as_in_kueue(tmp_path):
    # Kueue defaults the section to {enable: true} only when it is absent.
    args, _ = settled(tmp_path, "metrics: {localQueueMetrics: {}}\n")
    assert not args.metrics_config.exposes_local_queue({})
    args, _ = settled(tmp_path, "featureGates: {LocalQueueMetrics: false}\n")
    assert not args.metrics_config.exposes_local_queue({})


def test_custom_labels_with_their_gate_label_the_metrics_and_are_not_warned(tmp_path):
    body = """\
        metrics:
          customLabels: [{name: team, sourceLabelKey: team}]
        featureGates: {CustomMetricLabels: %s, LocalQueueMetrics: true}
        """
    args, warnings = settled(tmp_path, body % "true")
    assert warnings == []
    names = Metrics(custom_labels=args.custom_labels).families.label_names
    assert names["kueue_pending_workloads"][-2:] == ("replica_role", "custom_team")
    # Gate off: Kueue's label sets, and one line saying the entries do nothing.
    args, warnings = settled(tmp_path, body % "false")
    assert Metrics(custom_labels=args.custom_labels).families.label_names == (
        Metrics().families.label_names
    )
    [line] = warnings
    assert "metrics.customLabels is set but feature gate CustomMetricLabels is off" in line


def test_the_flag_turns_a_metrics_gate_the_file_left_on_off(tmp_path):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    path = tmp_path / "config.yaml"
    path.write_text(V1BETA2 + "featureGates: {MetricsForCohorts: true}\n")
    args = parser.parse_args(["--config", str(path), "--feature-gates", "MetricsForCohorts=false"])
    settle(args)
    assert (args.metrics_config.cohorts, args.metrics_config.local_queues) == (False, True)
    assert args.feature_gates["MetricsForCohorts"] is False


def test_a_bad_local_queue_selector_is_one_line_naming_it(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(
        V1BETA2
        + "metrics: {localQueueMetrics: {enable: true, localQueueSelector: "
        + "{matchExpressions: [{key: a, operator: Has}]}}}\n"
    )
    with pytest.raises(ConfigFileError) as err:
        load(str(path))
    assert str(err.value) == (
        f"--config {path}: metrics.localQueueMetrics.localQueueSelector.matchExpressions[0]"
        ".operator: 'Has' is not one of In, NotIn, Exists, DoesNotExist"
    )
