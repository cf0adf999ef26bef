"""Kueue's two-phase admission, as a policy: which checks apply, what their states decide,
and what an eviction and a start do with them (extender/core/admission/checks.py)."""

from __future__ import annotations

import pytest

from extender.core.admission import checks as ac
from extender.core.admission.checks import CheckState, UpdateConflictError, check_states
from extender.core.api.labels import Toleration
from extender.core.api.models import (
    Admission,
    CheckRule,
    ClusterQueue,
    PodSet,
    PodSetAssignment,
    Workload,
)
from extender.core.api.parse import ManifestError, admission_check, cluster_queue
from extender.core.jobframework.adapter import PodSetInfo
from extender.core.scheduling.cycle import ClusterState


def admission(*flavors: str) -> Admission:
    return Admission(
        "cq",
        tuple(
            PodSetAssignment(f"ps{i}", {"cpu": f}, {"cpu": 1000}, 1) for i, f in enumerate(flavors)
        ),
    )


CQ = ClusterQueue(
    "cq",
    admission_checks=(
        CheckRule("all"),
        CheckRule("gpu-only", frozenset({"gpu"})),
        CheckRule("spot-or-gpu", frozenset({"spot", "gpu"})),
    ),
)


@pytest.mark.parametrize(
    ("flavors", "expected"),
    [
        (("default",), ("all",)),
        (("gpu",), ("all", "gpu-only", "spot-or-gpu")),
        (("spot",), ("all", "spot-or-gpu")),
        (("default", "spot"), ("all", "spot-or-gpu")),  # any podSet's flavor counts
        ((), ()),  # no flavor assigned: no check applies, as in Kueue
    ],
)
def test_which_checks_apply_to_a_reservation(flavors, expected):
    assert ac.applicable(CQ, admission(*flavors)) == expected


def test_synced_keeps_each_checks_state_and_adds_the_new_ones_pending():
    kept = CheckState("b", ac.PENDING, "Reset to Pending", 5.0, retry_count=2)
    out = ac.synced([kept, CheckState("gone", ac.READY)], ["c", "b"], now=9.0)
    assert out == [kept, CheckState("c", ac.PENDING, "", 9.0)]


def s(name: str, state: str, message: str = "") -> CheckState:
    return CheckState(name, state, message)


@pytest.mark.parametrize(
    ("checks", "decision"),
    [
        ([], ac.Decision(ac.ADMIT)),
        ([s("a", ac.READY), s("b", ac.READY)], ac.Decision(ac.ADMIT)),
        ([s("a", ac.READY), s("b", ac.PENDING)], ac.Decision(ac.WAIT)),
        (
            [s("a", ac.RETRY, "no capacity"), s("b", ac.PENDING)],
            ac.Decision(ac.RETRY_ACTION, "a", 'AdmissionCheck in Retry state: "a" (no capacity)'),
        ),
        (
            [s("b", ac.RETRY), s("a", ac.RETRY, "x")],
            ac.Decision(ac.RETRY_ACTION, "a", 'AdmissionChecks in Retry state: "a" (x); "b"'),
        ),
        (  # Rejected before Retry
            [s("a", ac.RETRY), s("z", ac.REJECTED, "quota exceeded")],
            ac.Decision(ac.REJECT, "z", 'AdmissionCheck in Rejected state: "z" (quota exceeded)'),
        ),
    ],
)
def test_what_the_states_decide(checks, decision):
    assert ac.decide(checks) == decision


def test_requeue_at_is_the_latest_retry_delay():
    checks = [
        CheckState("a", ac.RETRY, last_transition=100.0, requeue_after=60),
        CheckState("b", ac.RETRY, last_transition=130.0, requeue_after=10),
        CheckState("c", ac.READY, last_transition=0.0, requeue_after=999),
    ]
    assert ac.requeue_at(checks) == 160.0
    assert ac.requeue_at([CheckState("a", ac.RETRY, requeue_after=None)]) is None


def test_an_eviction_resets_every_check_and_counts_a_retry():
    before = [
        CheckState("a", ac.RETRY, "full", 1.0, retry_count=1, requeue_after=30),
        CheckState("b", ac.READY, "ok", 1.0, pod_set_updates=({"name": "main"},)),
        CheckState("c", ac.PENDING, "waiting", 1.0),
    ]
    after = ac.reset_after_eviction(before, now=50.0)
    assert after == [
        CheckState(
            "a",
            ac.PENDING,
            "Reset to Pending after eviction. Previously: Retry",
            50.0,
            2,
            30,
        ),
        CheckState("b", ac.PENDING, "Reset to Pending after eviction. Previously: Ready", 50.0),
        before[2],
    ]


def test_pod_set_updates_merge_into_what_the_start_sets():
    infos = {"main": PodSetInfo(3, node_selector={"zone": "a"}, labels={"x": "1"})}
    checks = [
        CheckState(
            "prov",
            ac.READY,
            pod_set_updates=(
                {
                    "name": "main",
                    "annotations": {"autoscaling.x-k8s.io/consume-provisioning-request": "pr-1"},
                    "nodeSelector": {"pool": "p1", "zone": "a"},
                    "tolerations": [{"key": "gpu", "operator": "Exists"}],
                },
                {"name": "other", "labels": {"ignored": "yes"}},
            ),
        )
    ]
    out = ac.with_updates(infos, checks)["main"]
    assert out.node_selector == {"zone": "a", "pool": "p1"}
    assert out.annotations == {"autoscaling.x-k8s.io/consume-provisioning-request": "pr-1"}
    assert out.labels == {"x": "1"}
    assert out.tolerations == [{"key": "gpu", "operator": "Exists"}]


def test_conflicting_pod_set_updates_are_kueues_permanent_error():
    infos = {"main": PodSetInfo(1, node_selector={"zone": "a"})}
    checks = [
        CheckState(
            "c1", ac.READY, pod_set_updates=({"name": "main", "nodeSelector": {"zone": "b"}},)
        )
    ]
    with pytest.raises(UpdateConflictError) as err:
        ac.with_updates(infos, checks)
    assert str(err.value) == (
        'in admission check "c1": invalid admission check PodSetUpdate: conflict for '
        "nodeSelector: conflict for key=zone, value1=a, value2=b"
    )


def cq_obj(version: str = "v1beta2", **spec: object) -> dict:
    return {
        "apiVersion": f"kueue.x-k8s.io/{version}",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": spec,
    }


def test_a_cluster_queue_names_its_checks_by_strategy_or_v1beta1_list():
    strategy = {"admissionChecks": [{"name": "prov", "onFlavors": ["gpu"]}, {"name": "all"}]}
    assert cluster_queue(cq_obj(admissionChecksStrategy=strategy)).admission_checks == (
        CheckRule("prov", frozenset({"gpu"})),
        CheckRule("all"),
    )
    assert cluster_queue(cq_obj("v1beta1", admissionChecks=["a", "b"])).admission_checks == (
        CheckRule("a"),
        CheckRule("b"),
    )


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"admissionChecksStrategy": {"admissionChecks": [{}]}}, "admissionChecks[0].name"),
        ({"admissionChecksStrategy": {"admissionChecks": "prov"}}, "admissionChecks"),
        (
            {"admissionChecksStrategy": {"admissionChecks": [{"name": "a"}, {"name": "a"}]}},
            "admissionChecks[1].name",
        ),
    ],
)
def test_a_bad_strategy_names_the_field(spec, path):
    with pytest.raises(ManifestError) as err:
        cluster_queue(cq_obj(**spec))
    assert err.value.path.endswith(path)


def check_obj(**status: object) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": "prov"},
        "spec": {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {
                "apiGroup": "kueue.x-k8s.io",
                "kind": "ProvisioningRequestConfig",
                "name": "cfg",
            },
        },
        "status": status,
    }


def test_an_admission_check_is_active_by_its_condition():
    assert not admission_check(check_obj()).active
    active = admission_check(
        check_obj(conditions=[{"type": "Active", "status": "True", "message": "ok"}])
    )
    assert active.active
    assert active.message == "ok"
    assert active.parameters == ("kueue.x-k8s.io", "ProvisioningRequestConfig", "cfg")


def test_a_cluster_queue_waits_for_its_checks_to_exist_and_be_active():
    state = ClusterState()
    state.configure(cluster_queues=[CQ])
    assert state.cluster_queue_active("cq") == (
        False,
        "AdmissionCheckNotFound",
        "Can't admit new workloads: references missing AdmissionCheck(s): all,gpu-only,"
        "spot-or-gpu.",
    )
    checks = [
        admission_check({**check_obj(), "metadata": {"name": n}}) for n in ("all", "gpu-only")
    ]
    active = admission_check(
        {
            **check_obj(conditions=[{"type": "Active", "status": "True"}]),
            "metadata": {"name": "spot-or-gpu"},
        }
    )
    state.configure(admission_checks=[*checks, active])
    assert state.cluster_queue_active("cq")[:2] == (False, "AdmissionCheckInactive")
    assert state.cluster_queue_active("cq")[2].endswith("AdmissionCheck(s): all,gpu-only.")
    state.configure(
        admission_checks=[
            admission_check(
                {
                    **check_obj(conditions=[{"type": "Active", "status": "True"}]),
                    "metadata": {"name": n},
                }
            )
            for n in ("all", "gpu-only")
        ]
    )
    assert state.cluster_queue_active("cq")[0] is True
    state.delete_admission_check("all")
    assert state.cluster_queue_active("cq")[1] == "AdmissionCheckNotFound"


def test_check_states_read_from_a_workload_survive_a_malformed_entry():
    obj = {
        "status": {
            "admissionChecks": [
                {
                    "name": "a",
                    "state": "Retry",
                    "message": "m",
                    "lastTransitionTime": "2026-12-01T10:00:00Z",
                    "retryCount": 2,
                    "requeueAfterSeconds": 60,
                },
                {"name": "b", "state": "Bogus", "lastTransitionTime": "yesterday"},
                "not an entry",
                {"state": "Ready"},
            ]
        }
    }
    a, b = check_states(obj)
    assert (a.name, a.state, a.retry_count, a.requeue_after) == ("a", ac.RETRY, 2, 60)
    assert a.last_transition > 0
    assert (b.state, b.last_transition) == (ac.PENDING, 0.0)


MK = "kueue.x-k8s.io/multikueue"
PROV = "kueue.x-k8s.io/provisioning-request"


@pytest.mark.parametrize(
    ("rules", "controllers", "want"),
    [
        ((CheckRule("mk"),), {"mk": MK}, None),
        ((CheckRule("mk"), CheckRule("other")), {"mk": MK, "other": "example.com/x"}, None),
        (
            (CheckRule("mk1"), CheckRule("mk2")),
            {"mk1": MK, "mk2": MK},
            (
                "MultipleMultiKueueAdmissionChecks",
                "Cannot use multiple MultiKueue AdmissionChecks on the same ClusterQueue, "
                "found: mk1,mk2",
            ),
        ),
        (
            (CheckRule("mk", frozenset({"gpu"})),),
            {"mk": MK},
            (
                "MultiKueueAdmissionCheckAppliedPerFlavor",
                "Cannot specify MultiKueue AdmissionCheck per flavor, found: mk",
            ),
        ),
        (
            (CheckRule("mk"), CheckRule("prov")),
            {"mk": MK, "prov": PROV},
            (
                "MultiKueueWithProvisioningRequest",
                "Cannot use both MultiKueue and ProvisioningRequest AdmissionChecks together, "
                "found: mk, prov",
            ),
        ),
    ],
)
def test_kueues_rules_for_multikueue_checks_on_a_cluster_queue(rules, controllers, want):
    state = ClusterState()
    checks = [
        admission_check(
            {
                **check_obj(conditions=[{"type": "Active", "status": "True"}]),
                "metadata": {"name": name},
                "spec": {"controllerName": controller},
            }
        )
        for name, controller in controllers.items()
    ]
    state.configure(
        cluster_queues=[ClusterQueue("cq", admission_checks=rules)], admission_checks=checks
    )
    active = state.cluster_queue_active("cq")
    if want is None:
        assert active[0] is True, active
    else:
        assert active == (False, want[0], f"Can't admit new workloads: {want[1]}.")


def _placed(*checks: CheckState) -> Workload | str:
    pod_sets = (
        PodSet("main", 2, {"cpu": 1000}, node_selector={"zone": "a"}),
        PodSet("other", 1, {"cpu": 1000}, tolerations=(Toleration("gpu", "Exists"),)),
    )
    workload = Workload("ns", "w", "uid", "lq", pod_sets)
    return ac.with_placement_updates(workload, list(checks))


@pytest.mark.parametrize(
    ("checks", "main_selector", "other_tolerations", "error"),
    [
        ((), {"zone": "a"}, [("gpu", "Exists")], None),
        (  # a Ready check's node selector is merged into the podSet it names
            (CheckState("prov", "Ready", pod_set_updates=({"name": "main", "nodeSelector": {"pool": "p7"}},)),),
            {"zone": "a", "pool": "p7"}, [("gpu", "Exists")], None,
        ),
        (  # a check not Ready yet says nothing to the placement
            (CheckState("prov", "Pending", pod_set_updates=({"name": "main", "nodeSelector": {"pool": "p7"}},)),),
            {"zone": "a"}, [("gpu", "Exists")], None,
        ),
        (  # tolerations are added once
            (CheckState("prov", "Ready", pod_set_updates=({"name": "other", "tolerations": [
                {"key": "gpu", "operator": "Exists"}, {"key": "spot", "operator": "Exists"}]},)),),
            {"zone": "a"}, [("gpu", "Exists"), ("spot", "Exists")], None,
        ),
        (  # the same key with another value cannot be merged: Kueue's message
            (CheckState("prov", "Ready", pod_set_updates=({"name": "main", "nodeSelector": {"zone": "b"}},)),),
            None, None,
            'invalid podSetUpdate for PodSet main, error: in admission check "prov": invalid '
            "admission check PodSetUpdate: conflict for nodeSelector: conflict for key=zone, "
            "value1=a, value2=b",
        ),
        (  # a toleration of the wrong shape is named, not raised
            (CheckState("prov", "Ready", pod_set_updates=({"name": "other", "tolerations": [
                {"key": "gpu", "operator": "Maybe"}]},)),),
            None, None, "invalid podSetUpdate for PodSet other, error: tolerations[0].operator",
        ),
    ],
)  # fmt: skip
def test_a_delayed_placement_sees_the_ready_checks_pod_set_updates(
    checks: tuple[CheckState, ...],
    main_selector: dict[str, str] | None,
    other_tolerations: list[tuple[str, str]] | None,
    error: str | None,
) -> None:
    placed = _placed(*checks)
    if error is not None:
        assert isinstance(placed, str)
        assert placed.startswith(error)
        return
    assert not isinstance(placed, str)
    main, other = placed.pod_sets
    assert dict(main.node_selector) == main_selector
    assert [(t.key, t.operator) for t in other.tolerations] == other_tolerations
