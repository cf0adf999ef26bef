"""A Workload held by admission gates waits in no queue, says who holds it, and is queued
once the last gate is off (Kueue's scheduler_test.go "Scheduler with AdmissionGatedBy")."""

from dataclasses import replace

from extender.core.jobframework.workloads import workload as parse_workload
from tests.builders import CQ, WL, run_until_quiet, state_with

GATES = "example.com/controller1,example.com/controller2"


def names(decisions):
    return [d.workload.name for d in decisions]


def test_a_gated_workload_is_not_admitted_while_quota_is_free():
    state = state_with(CQ("cq").group(("default", {"cpu": "5"})).obj())
    gated = replace(WL("gated").request("cpu", "1").obj(), admission_gated_by=GATES)
    state.add_workload(gated)
    assert run_until_quiet(state) == []
    status = state.pending_status(gated.key)
    assert (status.reason, status.message) == ("AdmissionGated", f"Admission is gated by: {GATES}")
    assert state.queued_in(gated.key) is None  # in no queue: not a head


def test_a_gated_head_does_not_hold_back_the_workloads_behind_it_even_in_strict_fifo():
    state = state_with(CQ("cq").strict().group(("default", {"cpu": "5"})).obj())
    first = replace(WL("first").created(0).request("cpu", "1").obj(), admission_gated_by=GATES)
    state.add_workload(first)
    state.add_workload(WL("second").created(1).request("cpu", "1").obj())
    assert names(run_until_quiet(state)) == ["second"]
    assert state.pending_status(first.key).reason == "AdmissionGated"


def test_removing_the_last_gate_queues_it_with_kueues_message_then_admits_it():
    state = state_with(CQ("cq").group(("default", {"cpu": "5"})).obj())
    plain = WL("w").request("cpu", "1").obj()
    state.add_workload(replace(plain, admission_gated_by="example.com/a,example.com/b"))
    assert run_until_quiet(state) == []
    state.add_workload(replace(plain, admission_gated_by="example.com/b"))  # one taken off
    assert run_until_quiet(state) == []
    assert state.pending_status(plain.key).message == "Admission is gated by: example.com/b"
    state.add_workload(plain)
    state.queues.gate_cleared(plain.key)
    status = state.pending_status(plain.key)
    assert (status.reason, status.message) == (
        "Pending",
        "AdmissionGatedBy cleared, waiting for quota reservation",
    )
    assert names(run_until_quiet(state)) == ["w"]


def test_the_workload_parser_reads_the_annotation_as_written():
    obj = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "w",
            "namespace": "default",
            "annotations": {"kueue.x-k8s.io/admission-gated-by": GATES},
        },
        "spec": {
            "queueName": "lq",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}],
        },
    }
    assert parse_workload(obj).admission_gated_by == GATES
    del obj["metadata"]["annotations"]
    assert parse_workload(obj).admission_gated_by == ""
