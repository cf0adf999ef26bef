"""The Configuration takeover writes for Tower: Kueue's own, read by Tower's controller so that
it leads on its own Lease and watches Kueue's where Kueue led."""

from __future__ import annotations

from pathlib import Path

import yaml

from extender.core.config.kueue_config import parse
from extender.kube.config_file import from_file, kueue_lease_of
from extender.kube.plugin.takeover import tower_configuration

MANAGER = Path(__file__).resolve().parents[2] / "data" / "kueue-install" / "manager.yaml"


def kueues() -> str:
    [config_map] = [
        d for d in yaml.safe_load_all(MANAGER.read_text()) if d and d["kind"] == "ConfigMap"
    ]
    return config_map["data"]["controller_manager_config.yaml"]


def test_tower_leads_on_its_own_lease_and_watches_kueues_where_kueue_led():
    text = tower_configuration(kueues(), "ConfigMap kueue-system/kueue-manager-config",
                               "kueue-system", "tower-controller")  # fmt: skip
    config = parse(yaml.safe_load(text), namespace="tower-system")
    assert from_file(config)["leader_election_id"] == "tower-controller"
    assert "leader_election_namespace" not in from_file(config)  # Tower's own namespace
    assert kueue_lease_of(config, "tower-system") == "kueue-system/c1f6bfd2.kueue.x-k8s.io"
    assert config.integrations == tuple(yaml.safe_load(kueues())["integrations"]["frameworks"])


def test_kueue_in_another_namespace_is_watched_there():
    text = tower_configuration(kueues(), "--config kueue.yaml", "batch-system", "tower-controller")
    config = parse(yaml.safe_load(text), namespace="tower-system")
    assert kueue_lease_of(config, "tower-system") == "batch-system/c1f6bfd2.kueue.x-k8s.io"
    assert text.startswith("# Kueue's Configuration from --config kueue.yaml, written by")
