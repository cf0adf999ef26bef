"""What Tower writes as YAML, kubectl reads back as the same strings (kubectl is the oracle)."""

from __future__ import annotations

import json
import random
import shutil
import subprocess

import pytest
import yaml

from extender.kube.api.yaml_text import dump
from extender.kube.plugin.output import emit

# Strings PyYAML writes bare and kubectl reads as numbers, and their look-alikes that are
# strings to both.
TRICKY = [
    "1e3", "036e0", "09", "0o17", "0x1F", "0b101", "1_0", ".5", "1.", "1.e5", "-.inf", ".nan",
    "abc", "on", "v1", "10Gi", "1e", "e3", "0", "-1", "+1", "2026-12-01", "1:30", "null", "~",
    "y", "N", "0e5_", "_1",
]  # fmt: skip


def _kubectl_reads(text: str) -> dict[str, str]:
    """The data of a ConfigMap as kubectl parses it (offline: `label --local`)."""
    done = subprocess.run(
        ["kubectl", "label", "--local", "-f", "-", "checked=yes", "-o", "json"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    data: dict[str, str] = json.loads(done.stdout)["data"]
    return data


def _config_map(values: list[str]) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "strings"},
        "data": {f"k{i}": v for i, v in enumerate(values)},
    }


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is the oracle here")
def test_kubectl_reads_back_every_string_as_written() -> None:
    rng = random.Random(20261201)
    alphabet = "0123456789eExXoObBnNyY._+-:infaINF"
    values = TRICKY + ["".join(rng.choices(alphabet, k=rng.randint(1, 6))) for _ in range(600)]
    config_map = _config_map(values)

    assert _kubectl_reads(dump(config_map, sort_keys=False)) == config_map["data"]
    assert yaml.safe_load(dump(config_map)) == config_map  # and PyYAML reads it as before


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is the oracle here")
def test_plain_pyyaml_is_what_this_guards_against() -> None:
    config_map = _config_map(["1e3", "036e0"])
    read = _kubectl_reads(yaml.safe_dump(config_map))
    assert read != config_map["data"]


def test_kubectl_tower_yaml_output_quotes_a_numeric_looking_name() -> None:
    text = emit({"clusterQueue": "1e3", "namespace": "team-a"}, "yaml", str)
    assert text == "clusterQueue: '1e3'\nnamespace: team-a"
