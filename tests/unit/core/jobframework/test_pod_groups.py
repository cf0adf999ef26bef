"""Pod groups' rules (extender/core/jobframework/groups.py) and the StatefulSet parent, table by
table: Kueue's role hash (its own test vectors), who belongs to which group, when a group is
one Workload and with which podSets, which members are excess or replaced, when it ends."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from extender.core.api.parse import ManifestError
from extender.core.jobframework import groups
from extender.core.jobframework.adapter import workload_name
from extender.core.jobframework.registry import ADAPTERS, PARENTS
from extender.core.jobframework.webhooks import queue_patch

POD = ADAPTERS["pod"]
STS = PARENTS["statefulset"]


def container(requests: dict[str, str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": "c", "image": "busybox"}
    if requests is not None:
        out["resources"] = {"requests": requests}
    return out


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        # Kueue v0.19.2's own vectors (pkg/controller/jobs/pod, TestGetRoleHash).
        ({"containers": [container({})]}, "a9f06f3a"),
        ({"containers": [container({"cpu": "1"})]}, "dc85db45"),
        ({"containers": [container({"memory": "1Gi", "cpu": "1"})]}, "4ebdd4a6"),
        ({"containers": [container({"cpu": "3"})]}, "5a03e517"),
    ],
)
def test_the_role_hash_is_kueues(spec, expected):
    assert groups.role_hash(spec) == expected


def test_the_role_is_the_shape_not_the_image_nor_the_command():
    a = {"containers": [container({"cpu": "1"})], "restartPolicy": "Never"}
    b = {"containers": [{**container({"cpu": "1"}), "image": "nginx", "command": ["x"]}]}
    c = {"containers": [container({"cpu": "2"})]}
    assert groups.role_hash(a) == groups.role_hash(b) != groups.role_hash(c)
    tolerated = {**a, "tolerations": [{"key": "k", "operator": "Exists"}]}
    assert groups.role_hash(tolerated) != groups.role_hash(a)


def pod(
    name: str = "p", *, labels: dict[str, str] | None = None, **annotations: str
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"kueue.x-k8s.io/queue-name": "q", **(labels or {})},
            "annotations": dict(annotations),
        },
        "spec": {"containers": [container({"cpu": "3"})]},
    }


GROUP = "kueue.x-k8s.io/pod-group-name"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"


@pytest.mark.parametrize(
    ("obj", "path", "words"),
    [
        (pod(labels={GROUP: "g"}), f"metadata.annotations[{TOTAL}]", "is required"),
        (pod(**{TOTAL: "2"}), f"metadata.labels[{GROUP}]", "is required"),
        (pod(labels={GROUP: "g"}, **{TOTAL: "two"}), f"metadata.annotations[{TOTAL}]", "'two'"),
        (pod(labels={GROUP: "g"}, **{TOTAL: "0"}), f"metadata.annotations[{TOTAL}]", "at least 1"),
        (
            pod(labels={GROUP: "Not_A_Name"}, **{TOTAL: "2"}),
            f"metadata.labels[{GROUP}]",
            "DNS-1123",
        ),
    ],
)
def test_a_members_metadata_is_checked_at_create(obj, path, words):
    with pytest.raises(ManifestError) as err:
        POD.pod_sets(obj)
    assert err.value.path == path
    assert words in err.value.message


@pytest.mark.parametrize(
    ("old", "new", "path"),
    [
        (pod(labels={GROUP: "g"}), pod(labels={GROUP: "h"}), f"metadata.labels[{GROUP}]"),
        (pod(labels={GROUP: "g"}), pod(), f"metadata.labels[{GROUP}]"),
        (
            pod(**{"kueue.x-k8s.io/retriable-in-group": "false"}),
            pod(),
            "metadata.annotations[kueue.x-k8s.io/retriable-in-group]",
        ),
    ],
)
def test_a_member_stays_in_its_group_and_unretriable(old, new, path):
    with pytest.raises(ManifestError) as err:
        POD.check_update(old, new)
    assert err.value.path == path
    POD.check_update(old, old)  # unchanged is fine


def test_a_member_belongs_to_its_group_by_its_role_and_the_annotation_wins():
    member = pod(labels={GROUP: "from-label"}, **{TOTAL: "2"})
    assert POD.group_of(member) == ("from-label", "5a03e517")
    member["metadata"]["annotations"][GROUP] = "from-annotation"
    member["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] = "stamped"
    assert POD.group_of(member) == ("from-annotation", "stamped")


def test_the_webhook_stamps_a_members_role_hash_as_kueue_does():
    obj = pod(labels={GROUP: "g"}, **{TOTAL: "2"})
    del obj["metadata"]["annotations"][TOTAL]
    obj["metadata"]["annotations"] = None
    once = jsonpatch.apply_patch(obj, queue_patch(obj, POD))
    assert once["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] == "5a03e517"
    assert jsonpatch.apply_patch(once, queue_patch(once, POD)) == once
    single = pod()
    assert (
        "kueue.x-k8s.io/role-hash"
        not in jsonpatch.apply_patch(single, queue_patch(single, POD))["metadata"]["annotations"]
    )


def test_the_webhook_copies_a_members_rank_into_kueues_pod_index_label():
    """Kueue's pod webhook: the label that `pod-group-pod-index-label` names is copied to
    `kueue.x-k8s.io/pod-group-pod-index`, the label a group's topology placement ranks by."""
    obj = pod(
        labels={GROUP: "g", "apps.kubernetes.io/pod-index": "2"},
        **{TOTAL: "3", "kueue.x-k8s.io/pod-group-pod-index-label": "apps.kubernetes.io/pod-index"},
    )
    once = jsonpatch.apply_patch(obj, queue_patch(obj, POD))
    assert once["metadata"]["labels"]["kueue.x-k8s.io/pod-group-pod-index"] == "2"
    assert jsonpatch.apply_patch(once, queue_patch(once, POD)) == once
    # The group's podSet is ranked by that label, as Kueue's pod controller builds it.
    [main] = groups.compose([member("a")], 1, False)
    assert main.pod_index_label == "kueue.x-k8s.io/pod-group-pod-index"


def sts(replicas: int | None = 3, ready: int = 0, status_replicas: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": [container({"cpu": "100m"})]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": "ns", "uid": "sts-uid"},
        "spec": spec,
        "status": {"readyReplicas": ready, "replicas": status_replicas},
    }


def test_a_statefulset_is_one_workload_of_all_its_replicas():
    name = workload_name("StatefulSet", "apps", "web", "sts-uid")
    assert STS.workload_names(sts()) == (name,)
    [main] = STS.group_pod_sets(sts(), name) or []
    assert (main.name, main.count) == ("main", 3)
    [one] = STS.group_pod_sets(sts(replicas=None), name) or []
    assert one.count == 1  # Kubernetes' default
    assert STS.group_pod_sets(sts(replicas=0), name) is None
    owned = pod()
    owned["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "name": "web",
            "uid": "sts-uid",
            "controller": True,
        }
    ]
    owned["metadata"]["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] = "statefulset"
    assert POD.group_of(owned) == (name, "main")


@pytest.mark.parametrize(
    ("old", "new", "refused"),
    [
        (sts(3), sts(3), None),
        (sts(3), sts(0), None),
        (sts(0), sts(5), None),
        (sts(3), sts(2), "cannot change from 3 to 2"),
        (sts(None), sts(4), "cannot change from 1 to 4"),
        (sts(0, status_replicas=2), sts(3), "scaling down is still in progress"),
    ],
)
def test_a_statefulset_scales_only_to_zero_and_back(old, new, refused):
    if refused is None:
        STS.update_problem(old, new)
        return
    with pytest.raises(ManifestError) as err:
        STS.update_problem(old, new)
    assert err.value.path == "spec.replicas"
    assert refused in err.value.message


def member(
    name: str,
    role: str = "r",
    *,
    phase: str = "",
    gated: bool = True,
    holds: bool = True,
    unretriable: bool = False,
) -> groups.Member:
    return groups.Member(
        name=name,
        uid=f"uid-{name}",
        role=role,
        gated=gated,
        phase=phase,
        running=not gated and phase == "",
        holds=holds,
        unretriable=unretriable,
        total=2,
        queue="q",
        template={"spec": {"containers": [container({"cpu": "1"})]}},
    )


@pytest.mark.parametrize(
    ("members", "total", "fast", "expected"),
    [
        ([member("a"), member("b")], 2, False, [("r", 2)]),
        ([member("a", "x"), member("b", "y"), member("c", "x")], 3, False, [("x", 2), ("y", 1)]),
        # Roles in name order, whatever the pods' order.
        ([member("a", "z"), member("b", "m")], 2, False, [("m", 1), ("z", 1)]),
        # A Failed member does not count; more runnable members than the total: the total.
        (
            [member("a"), member("b", phase="Failed"), member("c"), member("d")],
            2,
            False,
            [("r", 2)],
        ),
        # Fast admission: the whole group at once, from the first member.
        ([member("a")], 4, True, [("r", 4)]),
    ],
)
def test_a_groups_pod_sets(members, total, fast, expected):
    assert [(p.name, p.count) for p in groups.compose(members, total, fast)] == expected


def test_a_group_short_of_members_waits_and_says_how_many():
    with pytest.raises(ManifestError) as err:
        groups.compose([member("a"), member("b", phase="Gone")], 2, False)
    assert "has 1 of its 2 pods" in err.value.message


def test_a_group_of_too_many_roles_is_refused():
    many = [member(f"p{i}", f"role{i:02}") for i in range(19)]
    with pytest.raises(ManifestError) as err:
        groups.compose(many, 19, False)
    assert "at most 18 roles" in err.value.message


@pytest.mark.parametrize(
    ("members", "problem"),
    [
        ([member("a"), member("b")], None),
        (
            [member("a"), groups.Member("b", "u", "r", True, "", False, True, total=3, queue="q")],
            "different kueue.x-k8s.io/pod-group-total-count values: 2!=3",
        ),
        (
            [
                member("a"),
                groups.Member("b", "u", "r", True, "", False, True, total=2, queue="other"),
            ],
            "different queue names: q!=other",
        ),
        # A Failed member's metadata does not matter.
        (
            [
                member("a"),
                groups.Member("b", "u", "r", True, "Failed", False, True, total=9, queue="x"),
            ],
            None,
        ),
    ],
)
def test_a_groups_members_must_agree(members, problem):
    found = groups.disagreement(members)
    assert (found is None) if problem is None else (problem in (found or ""))


def test_excess_members_go_the_held_and_running_kept_first():
    members = [
        member("c", gated=True),
        member("a", gated=False),
        member("b", gated=True, holds=False),
        member("z", "other"),
    ]
    assert [m.name for m in groups.excess(members, {"r": 2})] == ["b", "z"]
    assert groups.excess(members[:2], {"r": 2}) == []


def test_a_failed_member_is_let_go_once_replaced():
    failed = member("a", phase="Failed", gated=False)
    assert groups.replaced([failed, member("b")], {"r": 2}) == []
    assert groups.replaced([failed, member("b"), member("c")], {"r": 2}) == [failed]


@pytest.mark.parametrize(
    ("phases", "unretriable", "ended"),
    [
        (["Succeeded", "Succeeded"], False, "Pods succeeded: 2/2."),
        (["Succeeded", ""], False, None),
        (["Succeeded", "Failed"], False, None),  # retriable: a replacement may come
        (["Succeeded", "Failed"], True, "Pods succeeded: 1/2."),
        (["", "Failed"], True, None),  # one still runs
    ],
)
def test_a_group_ends_when_all_succeeded_or_an_unretriable_one_ended_it(phases, unretriable, ended):
    members = [
        member(f"p{i}", phase=phase, gated=False, unretriable=unretriable)
        for i, phase in enumerate(phases)
    ]
    end = groups.finished(members, 2)
    assert (end is None) if ended is None else (end == ("Succeeded", ended))


LWS = PARENTS["leaderworkerset.x-k8s.io/leaderworkerset"]


def lws(replicas: int = 2, size: int = 3, leader: bool = True) -> dict[str, Any]:
    template: dict[str, Any] = {
        "size": size,
        "workerTemplate": {
            "metadata": {"labels": {"leaderworkerset.sigs.k8s.io/template-revision-hash": "x"}},
            "spec": {"containers": [container({"cpu": "200m"})]},
        },
    }
    if leader:
        template["leaderTemplate"] = {"spec": {"containers": [container({"cpu": "100m"})]}}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "serve", "namespace": "ns", "uid": "lws-uid"},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": template},
    }


def test_a_leaderworkerset_is_one_workload_per_group():
    names = LWS.workload_names(lws())
    assert names == tuple(
        workload_name("LeaderWorkerSet", "leaderworkerset.x-k8s.io", f"serve-{i}", "lws-uid")
        for i in range(2)
    )
    assert names[0].startswith("leaderworkerset-serve-0-")
    leader, worker = LWS.group_pod_sets(lws(), names[1]) or []
    assert [(leader.name, leader.count), (worker.name, worker.count)] == [
        ("leader", 1),
        ("worker", 2),
    ]
    # The LeaderWorkerSet's own keys are not the Workload's, as Kueue copies the template.
    assert "labels" not in worker.template["metadata"]
    [main] = LWS.group_pod_sets(lws(leader=False), names[0]) or []
    assert (main.name, main.count) == ("main", 3)
    assert LWS.group_pod_sets(lws(replicas=1), names[1]) is None  # scaled down: that group goes
    assert LWS.owner_annotations(lws(), names[1])["kueue.x-k8s.io/component-workload-index"] == "1"


def lws_pod(index: str | None, worker: bool) -> dict[str, Any]:
    labels = {"leaderworkerset.sigs.k8s.io/name": "serve"}
    if index is not None:
        labels["leaderworkerset.sigs.k8s.io/group-index"] = index
    annotations = {"kueue.x-k8s.io/pod-suspending-parent": LWS.framework}
    if worker:
        annotations["leaderworkerset.sigs.k8s.io/leader-name"] = "serve-1"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": labels, "annotations": annotations},
        "spec": {"containers": [container({"cpu": "200m"})]},
    }


@pytest.mark.parametrize(
    ("leader", "worker", "role"),
    [
        (True, False, "leader"),
        (True, True, "worker"),
        (False, True, "main"),
        (False, False, "main"),
    ],
)
def test_a_leaderworkerset_pod_is_told_its_group_and_role(leader, worker, role):
    pod = lws_pod("1", worker)
    assert POD.group_of(pod) == ("unstamped:serve", "")  # not yet told: followed by nobody
    patch = LWS.stamp(lws(leader=leader), pod)
    assert patch is not None
    stamped = jsonpatch.apply_patch(
        pod,
        [
            {
                "op": "add",
                "path": "/metadata/annotations",
                "value": {**pod["metadata"]["annotations"], **patch["metadata"]["annotations"]},
            }
        ],
    )
    name = LWS.workload_names(lws())[1]
    assert POD.group_of(stamped) == (name, role)
    assert stamped["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "3"
    assert LWS.stamp(lws(), lws_pod(None, worker)) is None  # its index is not labelled yet


@pytest.mark.parametrize(
    ("old", "new", "path"),
    [
        (lws(size=3), lws(size=4), "spec.leaderWorkerTemplate.size"),
        (lws(leader=True), lws(leader=False), "spec.leaderWorkerTemplate.leaderTemplate"),
        (lws(), lws(replicas=-1), "spec.replicas"),
        (lws(), lws(replicas=1_000_001), "spec.replicas"),
    ],
)
def test_a_leaderworkersets_groups_keep_their_shape(old, new, path):
    with pytest.raises(ManifestError) as err:
        LWS.update_problem(old, new)
    assert err.value.path == path
    LWS.update_problem(lws(replicas=2), lws(replicas=5))  # scaling is group by group


def test_a_leaderworkersets_templates_are_marked_and_its_statefulsets_left_alone():
    ops = LWS.template_ops(lws(), "q")
    marked = jsonpatch.apply_patch(lws(), ops)
    for which in ("leaderTemplate", "workerTemplate"):
        meta = marked["spec"]["leaderWorkerTemplate"][which]["metadata"]
        assert meta["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] == LWS.framework
        assert meta["annotations"]["kueue.x-k8s.io/pod-group-serving"] == "true"
        assert meta["labels"]["kueue.x-k8s.io/queue-name"] == "q"
    its_sts = sts()
    its_sts["spec"]["template"]["metadata"] = {
        "annotations": {"kueue.x-k8s.io/pod-suspending-parent": LWS.framework}
    }
    assert STS.template_ops(its_sts, "q") == []
    assert STS.workload_names(its_sts) == ()


@pytest.mark.parametrize(
    ("phases", "current", "evicted", "want"),
    [
        (["", ""], None, None, None),  # nothing missing, never said: nothing to say
        (["", "Failed"], None, None, ("True", "PodsFailed", "Some Failed pods need replacement")),
        (["", "Gone"], None, ("Preempted", "p"), ("True", "Preempted", "p")),
        (["", "Failed"], ("True", "PodsFailed", "Some Failed pods need replacement"), None, None),
        (
            ["", "", "Failed"],  # replaced: a third pod runs in the failed one's place
            ("True", "PodsFailed", "Some Failed pods need replacement"),
            None,
            ("False", "PodsReady", "No pods need replacement"),
        ),
    ],
)
def test_waiting_for_replacement_pods_is_kueues(phases, current, evicted, want):
    members = [member(f"p{i}", phase=phase, gated=False) for i, phase in enumerate(phases)]
    assert groups.replacement_condition({"r": 2}, members, current, evicted) == want
