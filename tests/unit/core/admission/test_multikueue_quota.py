"""MultiKueue manager quota automation as policy: the sums, spelled as Kueue spells them, and
the condition's reasons."""

from __future__ import annotations

from typing import Any

import pytest

from extender.core.admission.multikueue_quota import WorkerQueues, automate


def _cq(name: str, quotas: dict[str, str], flavors: int = 1) -> dict[str, Any]:
    flavor = {"name": "f", "resources": [{"name": k, "nominalQuota": v} for k, v in quotas.items()]}
    return {"metadata": {"name": name}, "spec": {"resourceGroups": [
        {"coveredResources": list(quotas), "flavors": [flavor] * flavors}]}}  # fmt: skip


def _lq(namespace: str, name: str, cq: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"clusterQueue": cq}}


AUTOMATED = {"spec": {"quotaManagement": "Automated", "clusters": ["w1", "w2"]}}
MANAGER = _cq("q1", {"cpu": "0", "memory": "0", "ephemeral-storage": "0", "gpu": "0"})


def test_the_sums_are_spelled_as_kueues_e2e_expects():
    """Kueue's baseline e2e: 2 + 1200m cpu, 1G + 4G memory, 15G + 5G storage."""
    one = WorkerQueues([_lq("ns", "lq", "q1")],
                       [_cq("q1", {"cpu": "2", "memory": "1G", "ephemeral-storage": "15G",
                                   "gpu": "2"})])  # fmt: skip
    two = WorkerQueues([_lq("ns", "lq", "q1")],
                       [_cq("q1", {"cpu": "1200m", "memory": "4G", "ephemeral-storage": "5G",
                                   "gpu": "1"})])  # fmt: skip
    got = automate(MANAGER, AUTOMATED, [("ns", "lq")], [one, two])
    assert (got.status, got.reason) == ("True", "QuotaAutomated")
    assert got.resources == (("cpu", "3200m"), ("memory", "5G"), ("ephemeral-storage", "20G"),
                             ("gpu", "3"))  # fmt: skip


@pytest.mark.parametrize(
    ("quantities", "want"),
    [(["1Gi", "1Gi"], "2Gi"), (["512Mi", "512Mi"], "1Gi"), (["500m", "500m"], "1"),
     (["100G", "0"], "100G"), (["1e3", "1e3"], "2e3"), (["1500", "500"], "2k")],
)  # fmt: skip
def test_a_sum_keeps_the_format_of_the_first_quantity(quantities, want):
    workers = [WorkerQueues([_lq("ns", "lq", "q")], [_cq("q", {"memory": q})]) for q in quantities]
    got = automate(_cq("m", {"memory": "0"}), AUTOMATED, [("ns", "lq")], workers)
    assert got.resources == (("memory", want),)


def test_only_the_queues_of_the_managers_local_queues_count():
    worker = WorkerQueues([_lq("ns", "lq", "q1"), _lq("other", "lq", "q2")],
                          [_cq("q1", {"cpu": "1"}), _cq("q2", {"cpu": "5"})])  # fmt: skip
    got = automate(_cq("m", {"cpu": "0"}), AUTOMATED, [("ns", "lq")], [worker])
    assert got.resources == (("cpu", "1"),)


def test_a_covered_resource_no_worker_has_is_zero():
    got = automate(_cq("m", {"cpu": "4", "gpu": "4"}), AUTOMATED, [("ns", "lq")], [])
    assert got.resources == (("cpu", "0"), ("gpu", "0"))


def test_the_reasons_it_is_not_automated():
    said = automate(MANAGER, None, [], [])
    assert (said.status, said.reason, said.message) == (
        "False", "UnsupportedConfiguration", "The referenced MultiKueueConfig was not found.")  # fmt: skip
    said = automate(MANAGER, {"spec": {}}, [], [])
    assert (said.reason, said.resources) == ("NotRequested", None)
    said = automate(_cq("m", {"cpu": "1"}, flavors=2), AUTOMATED, [], [])
    assert said.message == ("Quota automation requires that the manager-side ClusterQueue has "
                            "exactly one ResourceFlavor")  # fmt: skip
    worker = WorkerQueues([_lq("ns", "lq", "q")], [_cq("q", {"cpu": "1", "b": "1", "a": "1"})])
    said = automate(_cq("m", {"cpu": "1"}), AUTOMATED, [("ns", "lq")], [worker])
    assert (said.status, said.message) == (
        "False", "manager-side coveredResources is missing resources configured on workers: [a b]")  # fmt: skip
