"""A concurrent-admission family's next actions (Kueue's concurrentadmission controller, v0.19.2),
and the objects it reads and makes."""

from __future__ import annotations

import pytest

from extender.core.admission.concurrent import (
    ALLOWED_FLAVORS,
    PARENT_LABEL,
    PREEMPTION_GATE,
    PREEMPTION_GATED,
    RETAIN_FIRST,
    AdmitParent,
    ClearVariant,
    Create,
    Delete,
    EvictParent,
    FinishVariant,
    Member,
    Policy,
    SetActive,
    decide,
    flavor_order,
    member,
    parent_of,
    policy_of,
    variant_flavor,
    variant_manifest,
    variant_name,
    variant_to_ungate,
)

FLAVORS = ("reservation", "spot")
TRY = Policy()


def _v(flavor: str, **kw: object) -> Member:
    return Member(name=f"v-{flavor}", flavor=flavor, **kw)  # type: ignore[arg-type]


PARENT = Member("parent")
ADMITTED_PARENT = Member("parent", reserved=True, admitted=True)

CASES = {
    "a new parent gets a variant per flavor": (PARENT, [], FLAVORS, TRY, [Create("reservation"), Create("spot")]),
    "a missing variant is made, a stale one deleted": (
        PARENT,
        [_v("spot"), _v("gone")],
        FLAVORS,
        TRY,
        [Create("reservation"), Delete("v-gone", "gone")],
    ),
    "nothing admitted: nothing to do": (PARENT, [_v("reservation"), _v("spot")], FLAVORS, TRY, []),
    "nothing admitted: every variant is activated": (
        PARENT,
        [_v("reservation", active=False), _v("spot")],
        FLAVORS,
        TRY,
        [SetActive("v-reservation", True, "no other Variant being admitted")],
    ),
    "the first admitted variant lends the parent its admission; the worse are deactivated": (
        PARENT,
        [_v("reservation", reserved=True, admitted=True), _v("spot")],
        FLAVORS,
        TRY,
        [
            SetActive("v-spot", False, "being lower priority than admitted Variant v-reservation"),
            AdmitParent("v-reservation"),
        ],
    ),
    "admitted on a worse flavor: the better variants stay active": (
        PARENT,
        [_v("reservation"), _v("spot", reserved=True, admitted=True)],
        FLAVORS,
        TRY,
        [AdmitParent("v-spot")],
    ),
    "RetainFirstAdmission deactivates every other variant": (
        ADMITTED_PARENT,
        [_v("reservation"), _v("spot", reserved=True, admitted=True)],
        FLAVORS,
        Policy(RETAIN_FIRST),
        [SetActive("v-reservation", False, "RetainFirstAdmission: another Variant v-spot is admitted")],
    ),
    "lastAcceptableFlavor deactivates the variants below it": (
        ADMITTED_PARENT,
        [_v("a"), _v("b"), _v("c", reserved=True, admitted=True)],
        ("a", "b", "c"),
        Policy(last_acceptable="a"),
        [SetActive("v-b", False, "being lower priority than admitted Variant v-c")],
    ),
    "an evicted variant evicts its admitted parent first": (
        ADMITTED_PARENT,
        [_v("reservation"), _v("spot", reserved=True, admitted=True, evicted=True)],
        FLAVORS,
        TRY,
        [EvictParent("VariantEvicted", "Admitted variant was evicted")],
    ),
    "an evicted parent is waited for": (
        Member("parent", reserved=True, admitted=True, evicted=True),
        [_v("reservation"), _v("spot", reserved=True, admitted=True, evicted=True)],
        FLAVORS,
        TRY,
        [],
    ),
    "once the parent holds nothing, the evicted variant gives its quota back": (
        PARENT,
        [
            _v("reservation"),
            _v("spot", reserved=True, admitted=True, evicted=True, reason="FlavorMigration"),
        ],
        FLAVORS,
        TRY,
        [ClearVariant("v-spot", "FlavorMigration", "")],
    ),
    "the parent admitted with no variant admitted is evicted": (
        ADMITTED_PARENT,
        [_v("reservation"), _v("spot")],
        FLAVORS,
        TRY,
        [EvictParent("ConcurrentAdmission", "No variant is running")],
    ),
    "an inactive parent deactivates its variants": (
        Member("parent", active=False),
        [_v("reservation"), _v("spot", active=False)],
        FLAVORS,
        TRY,
        [SetActive("v-reservation", False, "Parent Workload parent not active")],
    ),
    "a finished parent finishes its variants": (
        Member("parent", finished=True, reason="Succeeded", message="done"),
        [_v("reservation", finished=True), _v("spot", reserved=True)],
        FLAVORS,
        TRY,
        [FinishVariant("v-spot", "Succeeded", "done")],
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("parent", "variants", "flavors", "policy", "want"), CASES.values(), ids=CASES.keys()
)
def test_decide(parent, variants, flavors, policy, want):  # fmt: skip
    assert list(decide(parent, variants, flavors, policy)) == want


def _cq(policy: dict | None) -> dict:
    spec: dict = {"resourceGroups": [{"flavors": [{"name": "reservation"}, {"name": "spot"}]}]}
    if policy is not None:
        spec["concurrentAdmissionPolicy"] = policy
    return {"spec": spec}


def test_the_policy_as_a_cluster_queue_sets_it():
    assert policy_of(_cq(None)) is None
    assert policy_of(_cq({})) == Policy()
    assert policy_of(_cq({"migration": {"mode": RETAIN_FIRST}})) == Policy(RETAIN_FIRST)
    constrained = {"migration": {"constraints": {"lastAcceptableFlavorName": "spot"}}}
    assert policy_of(_cq(constrained)) == Policy(last_acceptable="spot")
    assert flavor_order(_cq(None)) == ("reservation", "spot")


PARENT_OBJ = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Workload",
    "metadata": {
        "name": "job-sample-3f1ab",
        "namespace": "ns",
        "uid": "u-1",
        "labels": {PARENT_LABEL: "true", "kueue.x-k8s.io/job-uid": "j-1", "team": "a"},
        "annotations": {"note": "kept"},
        "ownerReferences": [{"kind": "Job", "name": "sample", "uid": "j-1", "controller": True}],
    },
    "spec": {"queueName": "main", "podSets": [{"name": "main", "count": 1}], "active": True},
    "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}]},
}


def test_a_variant_copies_its_parent_for_one_flavor():
    variant = variant_manifest(PARENT_OBJ, "spot")
    meta = variant["metadata"]
    assert meta["name"] == variant_name("job-sample-3f1ab", "u-1", "spot")
    assert meta["name"].startswith("job-sample-variant-spot-")
    assert meta["labels"] == {"team": "a"}
    assert meta["annotations"] == {"note": "kept", ALLOWED_FLAVORS: "spot"}
    assert parent_of(variant) == ("job-sample-3f1ab", "u-1")
    assert variant_flavor(variant) == "spot"
    assert variant["spec"]["preemptionGates"] == [{"name": PREEMPTION_GATE}]
    assert variant["spec"]["podSets"] == PARENT_OBJ["spec"]["podSets"]
    assert "status" not in variant
    assert "active" not in variant["spec"]
    assert parent_of(PARENT_OBJ) is None  # owned by its job, not by a Workload


def test_a_workload_as_a_member():
    assert member(PARENT_OBJ) == Member("job-sample-3f1ab", reserved=True, evaluated=True)
    evicted = {
        "metadata": {"name": "v", "annotations": {ALLOWED_FLAVORS: "spot,other"}},
        "spec": {"active": False},
        "status": {"conditions": [{"type": "Evicted", "status": "True", "reason": "Preempted", "message": "m"}]},
    }  # fmt: skip
    assert member(evicted) == Member(
        "v", "spot", False, evicted=True, reason="Preempted", message="m"
    )


def test_a_gated_variant_as_a_member():
    gated = {
        "metadata": {"name": "v", "annotations": {ALLOWED_FLAVORS: "spot"}},
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "False", "message": PREEMPTION_GATED}],
            "preemptionGates": [
                {"name": PREEMPTION_GATE, "position": "Open", "lastTransitionTime": "1970-01-01T00:01:40Z"}
            ],
        },
    }  # fmt: skip
    assert member(gated) == Member("v", "spot", evaluated=True, gated=True, gate_opened_at=100.0)


JUDGED = {"evaluated": True}
GATED = {"evaluated": True, "gated": True}
GATES = {
    "the first gated variant in the flavors' order": ([_v("spot", **GATED), _v("reservation", **GATED)], 0, "v-reservation"),
    "a variant that fits needs no gate: the next gated one": ([_v("reservation", **JUDGED), _v("spot", **GATED)], 0, "v-spot"),
    "none before a better variant is judged": ([_v("reservation"), _v("spot", **GATED)], 0, None),
    "no gate to open": ([_v("reservation", **JUDGED), _v("spot", **JUDGED)], 0, None),
    "an admitted or inactive variant is not waiting": (
        [_v("reservation", reserved=True, **GATED), _v("spot", active=False, **GATED)], 0, None,
    ),
    "one gate at a time": ([_v("reservation", gate_opened_at=100.0, **GATED), _v("spot", **GATED)], 200, None),
    "the next gate after Kueue's five minutes": (
        [_v("reservation", gate_opened_at=100.0, **GATED), _v("spot", **GATED)], 400, "v-spot",
    ),
}  # fmt: skip


@pytest.mark.parametrize(("variants", "now", "want"), GATES.values(), ids=GATES.keys())
def test_variant_to_ungate(variants, now, want):
    assert variant_to_ungate(variants, FLAVORS, now) == want
