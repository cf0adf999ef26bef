"""integrations.labelKeysToCopy on the API double: a Job's, a pod group's and a
LeaderWorkerSet's Workload is made with their labels of those keys, once; a group whose
members disagree gets none and says why; a StatefulSet's gets none (Kueue's reconciler passes
none); and the Configuration file reaches the controller's settings."""

from __future__ import annotations

import argparse

from extender.core.jobframework.adapter import workload_name
from extender.kube import config_file
from extender.kube.api import resources as r
from tests.controller.conftest import eventually
from tests.controller.test_kubeflow import load
from tests.controller.test_pod_groups import (
    LWS,
    STATEFULSETS,
    events,
    group_pods,
    lws_crd,  # noqa: F401 (a fixture)
    lws_workloads,
    workload,
)
from tests.controller.test_pods import EXAMPLES, setup

KEYS = ("team", "cost-center", "not-on-any-job")
JOB_UID = "kueue.x-k8s.io/job-uid"


def copied_of(made):
    return {k: v for k, v in (made["metadata"].get("labels") or {}).items() if k in KEYS}


def test_a_jobs_workload_is_made_with_its_labels_of_the_keys_once(cluster, start_controller):
    setup(cluster)
    start_controller(label_keys_to_copy=KEYS)
    job = cluster.job("labelled", "1", labels={"team": "ml", "cost-center": "42", "tier": "x"})
    made = eventually(lambda: cluster.workload_of(job), what="the Job's Workload")
    assert made["metadata"]["labels"] == {
        "team": "ml",
        "cost-center": "42",
        JOB_UID: job["metadata"]["uid"],
    }
    # Copied when the Workload is made, never after (Kueue's words: "not updated even if the
    # labels of the underlying job are changed").
    cluster.admin.patch(r.JOBS, "labelled", {"metadata": {"labels": {"team": "web"}}}, "default")
    eventually(
        lambda: (cluster.workload_of(job).get("status") or {}).get("admission"), what="admitted"
    )
    assert copied_of(cluster.workload_of(job)) == {"team": "ml", "cost-center": "42"}


def test_without_the_setting_no_label_is_copied(cluster, start_controller):
    setup(cluster)
    start_controller()
    job = cluster.job("plain", "1", labels={"team": "ml"})
    made = eventually(lambda: cluster.workload_of(job), what="the Job's Workload")
    assert made["metadata"]["labels"] == {JOB_UID: job["metadata"]["uid"]}


def test_a_groups_members_give_their_labels_and_members_that_disagree_get_no_workload(
    cluster, start_controller
):
    setup(cluster)
    start_controller(label_keys_to_copy=KEYS)
    leader, worker = group_pods()
    leader["metadata"]["labels"].update(team="ml", **{"cost-center": "42"})
    worker["metadata"]["labels"].update(team="web")
    first = cluster.admin.create(r.PODS, leader, "default")
    second = cluster.admin.create(r.PODS, worker, "default")
    said = eventually(
        lambda: [m for m in events(cluster, "ErrWorkloadCompose") if "label team" in m],
        what="why the group has no Workload",
    )
    assert said[0] == (
        f"pods {first['metadata']['name']} and {second['metadata']['name']} have different "
        "values of label team: ml!=web (integrations.labelKeysToCopy)"
    ), said
    assert workload(cluster, "sample-group") is None
    # The worker made again without the label: the members agree, the leader gives both.
    gone = second["metadata"]["name"]
    cluster.admin.delete(r.PODS, gone, "default")
    eventually(lambda: cluster.get("pods", gone, "default") is None, what="the worker gone")
    del worker["metadata"]["labels"]["team"]
    cluster.admin.create(r.PODS, worker, "default")
    made = eventually(lambda: workload(cluster, "sample-group"), what="the group's Workload")
    assert copied_of(made) == {"team": "ml", "cost-center": "42"}


def test_a_leaderworkersets_groups_get_its_labels_and_a_statefulsets_none(
    cluster,
    start_controller,
    lws_crd,  # noqa: F811 (the fixture imported above)
):
    setup(cluster)
    start_controller(label_keys_to_copy=KEYS)
    [lws] = load(EXAMPLES / "serving" / "sample-leaderworkerset.yaml")
    lws["metadata"].setdefault("labels", {})["team"] = "serving"
    created = cluster.admin.create(LWS, lws, "default")
    for name in lws_workloads(cluster, created["metadata"]["uid"], 2):
        made = eventually(lambda n=name: workload(cluster, n), what="each group's Workload")
        assert copied_of(made) == {"team": "serving"}
    [sts] = load(EXAMPLES / "serving" / "sample-statefulset.yaml")
    sts["metadata"].setdefault("labels", {})["team"] = "serving"
    created = cluster.admin.create(STATEFULSETS, sts, "default")
    name = workload_name("StatefulSet", "apps", "nginx-statefulset", created["metadata"]["uid"])
    made = eventually(lambda: workload(cluster, name), what="the StatefulSet's Workload")
    assert copied_of(made) == {}


def test_the_configuration_file_sets_the_keys_the_controller_copies(tmp_path):
    path = tmp_path / "kueue.yaml"
    path.write_text(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\n"
        "kind: Configuration\n"
        "integrations:\n"
        "  frameworks: [batch/job]\n"
        "  labelKeysToCopy: [team, cost-center]\n"
    )
    args = argparse.Namespace(config=str(path))
    warnings = config_file.settle(args)
    assert args.label_keys_to_copy == ("team", "cost-center")
    assert not [w for w in warnings if "labelKeysToCopy" in w]
    args = argparse.Namespace(config=None)
    config_file.settle(args)
    assert args.label_keys_to_copy == ()
