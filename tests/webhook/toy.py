"""Toy kinds of job, registered by a fixture and taken out after the test: what a new adapter
gets from the registry (webhook paths and patches, webhook configurations, RBAC rules)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from extender.core.jobframework import adapter as adapter_module
from extender.core.jobframework import registry
from extender.core.jobframework.adapter import JobAdapter


class ToyJob(JobAdapter):
    """A kind of another group, suspended by spec.paused."""

    framework = "example.com/toyjob"
    group, version, kind, plural = "example.com", "v1", "ToyJob", "toyjobs"
    suspend_path = ("spec", "paused")

    def templates(self, obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        return {}


class DeepToyJob(JobAdapter):
    """A kind suspended two levels down, as an MPIJob's spec.runPolicy.suspend."""

    framework = "example.com/deeptoyjob"
    group, version, kind, plural = "example.com", "v2beta1", "DeepToyJob", "deeptoyjobs"
    suspend_path = ("spec", "runPolicy", "suspend")


class ToyPod(JobAdapter):
    """A kind of the core group (as Kueue's pod integration), made by a ToySet."""

    framework = "example.com/toypod"
    group, version, kind, plural = "", "v1", "ToyPod", "toypods"


class ToySet(JobAdapter):
    """A parent that queues the ToyPods it creates."""

    framework = "example.com/toyset"
    group, version, kind, plural = "apps.example.com", "v1", "ToySet", "toysets"
    children = (("", "ToyPod"),)


TOYS = (ToyJob, DeepToyJob, ToyPod, ToySet)


@pytest.fixture
def toys() -> Iterator[dict[str, JobAdapter]]:
    """The toy kinds registered, under their framework names; unregistered afterwards."""
    parents, kinds = dict(adapter_module._PARENTS), dict(adapter_module._KINDS)
    added = {cls.framework: registry.register(cls()) for cls in TOYS}
    try:
        yield added
    finally:
        for name in added:
            del registry.ADAPTERS[name]
        adapter_module._PARENTS.clear()
        adapter_module._PARENTS.update(parents)
        adapter_module._KINDS.clear()
        adapter_module._KINDS.update(kinds)
