"""deploy/scheduler/: kube-scheduler configured to call Tower's extender as the issue and
kube-scheduler's own validation (validateExtenders) require."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from extender.core.placement.fit import is_extended_resource
from extender.kube.servers.scheduler_extender import FILTER, PRIORITIZE
from tests import yamlc

SCHEDULER = Path(__file__).resolve().parents[2] / "deploy" / "scheduler"


def default_profile() -> dict[str, Any]:
    config: dict[str, Any] = yamlc.safe_load((SCHEDULER / "kube-scheduler-config.yaml").read_text())
    return config


def second_scheduler() -> list[dict[str, Any]]:
    text = (SCHEDULER / "second-scheduler.yaml").read_text()
    return [d for d in yamlc.safe_load_all(text) if d]


def second_config() -> dict[str, Any]:
    cm = next(d for d in second_scheduler() if d["kind"] == "ConfigMap")
    config: dict[str, Any] = yamlc.safe_load(cm["data"]["config.yaml"])
    return config


def _millis(duration: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s)", duration)
    assert match, duration
    return float(match[1]) * (1 if match[2] == "ms" else 1000)


@pytest.mark.parametrize("config", [default_profile(), second_config()], ids=["default", "second"])
def test_the_extender_is_configured_as_required(config: dict[str, Any]) -> None:
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    (extender,) = config["extenders"]
    prefix = extender["urlPrefix"].rstrip("/")
    assert f"{prefix.rsplit('/', 1)[-1]}" == "scheduler"
    assert f"/scheduler/{extender['filterVerb']}" == FILTER
    assert f"/scheduler/{extender['prioritizeVerb']}" == PRIORITIZE
    assert extender["nodeCacheCapable"] is True
    assert extender["ignorable"] is True
    assert _millis(extender["httpTimeout"]) <= 500
    assert extender["weight"] == 5  # kube-scheduler refuses prioritize with weight <= 0
    names = [m["name"] for m in extender["managedResources"]]
    assert len(names) == len(set(names))  # kube-scheduler refuses duplicates
    assert names
    assert all(is_extended_resource(n) for n in names)
    assert "bindVerb" not in extender
    assert "preemptVerb" not in extender


def test_the_second_scheduler_has_its_own_profile_and_reaches_the_service() -> None:
    config = second_config()
    assert [p["schedulerName"] for p in config["profiles"]] == ["tower-scheduler"]
    assert config["extenders"][0]["urlPrefix"].startswith(
        "http://tower-controller.tower-system.svc:8082/"
    )


def test_the_second_schedulers_objects_are_valid() -> None:
    for obj in second_scheduler():
        kubernetes_validate.validate(obj, "1.32.0", strict=True)
