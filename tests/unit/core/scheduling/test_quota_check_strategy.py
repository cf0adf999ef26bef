"""resources.quotaCheckStrategy: which requests for resources a ClusterQueue has no quota for
block admission (Kueue's BlockUndeclared, the default) or are left out (IgnoreUndeclared)."""

from __future__ import annotations

import pytest

from extender.core.api.models import LocalQueue
from extender.core.scheduling.options import SchedulingOptions
from tests.builders import CQ, WL, admit, run_until_quiet, state_with

IGNORE = SchedulingOptions(ignore_undeclared_resources=True)
BLOCK = SchedulingOptions()


def _cpu_only(within: str = "Never"):
    return CQ("cq").preemption(within=within).group(("default", {"cpu": "100"})).obj()


def _job(name: str, cpu: str = "1", **kw: str) -> WL:
    wl = WL(name).uid(name).queue("lq").request("cpu", cpu).request("memory", "1Gi")
    for key, value in kw.items():
        wl = wl.request(key.replace("_", "/"), value)
    return wl


@pytest.mark.parametrize(
    ("options", "admitted"),
    [pytest.param(BLOCK, False, id="BlockUndeclared"), pytest.param(IGNORE, True, id="Ignore")],
)
def test_a_request_for_an_undeclared_resource(options, admitted):
    state = state_with(_cpu_only(), scheduling=options)
    job = _job("job").obj()
    state.add_workload(job)
    run_until_quiet(state)
    assert state.is_admitted(job.key) is admitted
    if admitted:
        held = state.admitted_workload(job.key)
        # The admission names only what has a flavor, as Kueue's toAPI writes resourceUsage.
        assert held.admission.pod_set_assignments[0].flavors == {"cpu": "default"}
        assert dict(held.admission.pod_set_assignments[0].resource_usage) == {"cpu": 1000}
        assert dict(state.quota_usage("cq")) == {("default", "cpu"): 1000}
    else:
        status = state.pending_status(job.key)
        assert "requests memory, which ClusterQueue cq has no quota for" in status.message


def test_ignored_resources_still_leave_declared_ones_checked():
    state = state_with(_cpu_only(), scheduling=IGNORE)
    big = _job("big", cpu="101").obj()
    state.add_workload(big)
    run_until_quiet(state)
    assert not state.is_admitted(big.key)
    assert "cpu" in state.pending_status(big.key).message


def test_a_search_over_several_pod_sets_ignores_them_too():
    state = state_with(_cpu_only(), scheduling=IGNORE)
    job = (
        WL("two").queue("lq").pod_set("leader", 1, cpu="1", memory="1Gi")
        .pod_set("workers", 2, cpu="2", **{"example.com/gpu": "1"}).obj()
    )  # fmt: skip
    admit(state, job)
    flavors = [p.flavors for p in state.admitted_workload(job.key).admission.pod_set_assignments]
    assert flavors == [{"cpu": "default"}, {"cpu": "default"}]
    assert dict(state.quota_usage("cq")) == {("default", "cpu"): 5000}


def test_a_cluster_queue_applied_later_ignores_them_as_well():
    state = state_with(scheduling=IGNORE)
    state.apply_cluster_queue(_cpu_only())
    state.apply_local_queue(LocalQueue("default", "lq", "cq"))
    admit(state, _job("job").obj())


def test_kueue_e2e_preempts_workloads_with_an_undeclared_resource():
    """test/e2e/sequential/baseline/quota_check_strategy_test.go "should preempt workloads
    with undeclared resource that have lower priority", on the core."""
    state = state_with(_cpu_only(within="LowerPriority"), scheduling=IGNORE)
    low = _job("low", cpu="100").priority(10).obj()
    admit(state, low)
    high = _job("high", cpu="100").priority(1000).created(1).obj()
    state.add_workload(high)
    result = state.schedule(1)
    assert [(e.workload.name, e.preemption_reason) for e in result.evicted] == [
        ("low", "InClusterQueue")
    ]
    state.release(low.key)
    run_until_quiet(state, now=1)
    assert state.is_admitted(high.key)
