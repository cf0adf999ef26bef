"""The core's builder: objects as `kubectl get -o json` returns them, into a ClusterState."""

from typing import Any

import pytest

from extender.core.api.models import LocalQueue
from extender.core.api.parse import ManifestError
from extender.core.jobframework.workloads import workload as parse_workload
from extender.core.scheduling.builder import StateBuilder, parse_config
from extender.core.scheduling.cycle import INADMISSIBLE, ClusterState

KUEUE = "kueue.x-k8s.io/v1beta2"
FLAVOR = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}}
LQ = {
    "apiVersion": KUEUE,
    "kind": "LocalQueue",
    "metadata": {"name": "user-queue", "namespace": "team"},
    "spec": {"clusterQueue": "cq"},
}


def cluster_queue(name: str = "cq", cpu: str = "4") -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}
                    ],
                }
            ],
        },
    }


def workload(name: str, cpu: str = "1", **status: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
        "spec": {
            "queueName": "user-queue",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]
                        }
                    },
                }
            ],
        },
    }
    if status:
        obj["status"] = status
    return obj


def reserved(cq: str, cpu: str, at: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    return {
        "admission": {
            "clusterQueue": cq,
            "podSetAssignments": [
                {
                    "name": "main",
                    "flavors": {"cpu": "default"},
                    "resourceUsage": {"cpu": cpu},
                    "count": 1,
                }
            ],
        },
        "conditions": [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": at}],
    }


def test_a_whole_read_configures_then_takes_in_workloads_in_any_order():
    state = ClusterState()
    built = StateBuilder(state).build(
        [
            workload("running", "3", **reserved("cq", "3")),
            workload("waiting", "2"),
            cluster_queue(),
            LQ,
            FLAVOR,
        ],
        now=0.0,
    )
    assert built.invalid == {}
    assert sorted(built.workloads) == ["team/running", "team/waiting"]
    holder = state.admitted_workload("team/running")
    assert holder is not None
    assert holder.reserved_at == 1767225600.0
    assert state.quota_usage("cq") == {("default", "cpu"): 3000}
    assert state.pending_workload("team/waiting") is not None
    assert [w.key for w, _ in state.pending()] == ["team/waiting"]


def test_a_whole_read_leaves_out_what_holds_nothing_and_names_what_does_not_parse():
    state = ClusterState()
    broken_cq = cluster_queue("broken", cpu="-1")
    finished = workload(
        "done", conditions=[{"type": "Finished", "status": "True", "reason": "Succeeded"}]
    )
    deleting = workload("going")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    deactivated = workload("off")
    deactivated["spec"]["active"] = False
    no_queue = workload("lost")
    del no_queue["spec"]["queueName"]
    built = StateBuilder(state).build(
        [FLAVOR, cluster_queue(), LQ, broken_cq, finished, deleting, deactivated, no_queue],
        now=0.0,
    )
    assert set(built.finished) == {"team/done"}
    assert built.workloads == {}
    assert state.workload_count() == 0
    assert set(built.invalid) == {"ClusterQueue/broken", "Workload/team/lost"}
    assert built.invalid["Workload/team/lost"] == "spec.queueName: is required"
    assert not state.cluster_queue_known("broken")


def test_quota_reserved_in_an_unknown_cluster_queue_is_queued_instead():
    state = ClusterState()
    StateBuilder(state).build(
        [FLAVOR, cluster_queue(), LQ, workload("elsewhere", **reserved("gone", "1"))], now=0.0
    )
    assert not state.is_admitted("team/elsewhere")
    assert state.pending_workload("team/elsewhere") is not None


def test_one_object_at_a_time_applies_and_deletes():
    state = ClusterState()
    builder = StateBuilder(state)
    builder.apply(FLAVOR)
    builder.apply(cluster_queue())
    lq = builder.apply(LQ)
    assert lq == LocalQueue("team", "user-queue", "cq")
    state.add_workload(parse_workload(workload("w")))
    assert state.queued_in("team/w") == "cq"
    assert builder.delete("LocalQueue", "team/user-queue") == lq
    assert state.local_queue("team/user-queue") is None
    assert state.pending_status("team/w").reason == INADMISSIBLE
    assert builder.delete("LocalQueue", "team/user-queue") is None  # already gone


def test_objects_listed_without_a_kind_are_applied_by_the_kind_given():
    state = ClusterState()
    flavor = {k: v for k, v in FLAVOR.items() if k != "kind"}
    StateBuilder(state).apply(flavor, "ResourceFlavor")
    assert state.resource_flavor("default") is not None


def test_an_object_that_does_not_parse_keeps_the_last_good_version():
    state = ClusterState()
    builder = StateBuilder(state)
    builder.apply(FLAVOR)
    builder.apply(cluster_queue(cpu="4"))
    with pytest.raises(ManifestError):
        builder.apply(cluster_queue(cpu="-1"))
    cq = state.cluster_queue("cq")
    assert cq is not None
    assert cq.quotas[("default", "cpu")].nominal == 4000


def test_a_batch_rebuilds_the_quota_tree_once_for_all_its_objects():
    state = ClusterState()
    builder = StateBuilder(state)
    rebuilds = 0
    rebuild = state.cache.rebuild

    def counted() -> None:
        nonlocal rebuilds
        rebuilds += 1
        rebuild()

    state.cache.rebuild = counted  # type: ignore[method-assign]
    with builder.batch():
        builder.apply(FLAVOR)
        for i in range(20):
            builder.apply(cluster_queue(f"cq-{i}"))
        assert not state.cluster_queue_known("cq-0")  # not yet: at the end of the batch
    assert rebuilds == 1
    assert len(state.cluster_queue_names()) == 20


def test_a_deletion_after_an_update_in_one_batch_wins():
    state = ClusterState()
    builder = StateBuilder(state)
    with builder.batch():
        builder.apply(FLAVOR)
        builder.apply(cluster_queue())
        builder.delete("ClusterQueue", "cq")
    assert not state.cluster_queue_known("cq")
    assert state.resource_flavor("default") is not None


def test_priority_classes_are_kept_without_touching_the_queues():
    state = ClusterState()
    builder = StateBuilder(state)
    rebuild = state.cache.rebuild
    state.cache.rebuild = lambda: pytest.fail("priority classes rebuilt the quota tree")  # type: ignore[method-assign]
    builder.apply(
        {
            "apiVersion": KUEUE,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        }
    )
    builder.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "low"},
            "value": 10,
        }
    )
    state.cache.rebuild = rebuild  # type: ignore[method-assign]
    assert state.workload_priority_classes()["high"].value == 1000
    assert state.priority_classes()["low"].value == 10
    builder.delete("WorkloadPriorityClass", "high")
    assert "high" not in state.workload_priority_classes()


def test_parse_config_refuses_a_kind_that_does_not_configure():
    with pytest.raises(ManifestError, match="not a configuration kind"):
        parse_config(workload("w"))


def test_a_configuration_copied_out_configures_an_equal_state():
    state = ClusterState()
    StateBuilder(state).build([FLAVOR, cluster_queue(), LQ], now=0.0)
    copy = ClusterState()
    StateBuilder(copy).configure(state.configuration())
    assert copy.configuration() == state.configuration()
    assert copy.cluster_queue_active("cq") == (True, "Ready", "Can admit new workloads")


def test_a_reserved_workloads_reclaimable_pods_hold_no_quota():
    running = workload("running", "1", **reserved("cq", "4"))
    running["spec"]["podSets"][0]["count"] = 4
    running["status"]["admission"]["podSetAssignments"][0]["count"] = 4
    running["status"]["reclaimablePods"] = [{"name": "main", "count": 3}]
    state = ClusterState()
    StateBuilder(state).build([FLAVOR, cluster_queue(), LQ, running], now=0.0)
    assert state.quota_usage("cq") == {("default", "cpu"): 1000}
