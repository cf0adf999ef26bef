"""integrations.labelKeysToCopy as Kueue reads it: which labels a Workload is made with."""

from __future__ import annotations

import pytest

from extender.core.config.kueue_config import parse
from extender.core.jobframework.copied_labels import copied, from_members
from extender.core.jobframework.jobs import workload_for
from extender.kube.api.objects import workload_manifest

KEYS = ("team", "cost-center", "not-on-the-job")


@pytest.mark.parametrize(
    ("labels", "keys", "want"),
    [
        ({"team": "a", "other": "x"}, KEYS, {"team": "a"}),
        ({"team": "a", "cost-center": "7"}, KEYS, {"team": "a", "cost-center": "7"}),
        ({"team": "a"}, (), {}),
        (None, KEYS, {}),
        ({"other": "x"}, KEYS, {}),
    ],
    ids=[
        "only the keys asked for",
        "every key asked for the job carries",
        "no keys asked: nothing copied",
        "a job without labels",
        "a job with none of the keys",
    ],
)
def test_a_jobs_labels_of_the_keys_asked_for_are_copied(labels, keys, want):
    assert copied(labels, keys) == want


@pytest.mark.parametrize(
    ("members", "want", "want_problem"),
    [
        ([("a", {"team": "x"}), ("b", {"team": "x"})], {"team": "x"}, None),
        ([("a", {"team": "x"}), ("b", {})], {"team": "x"}, None),
        ([("a", None), ("b", {"cost-center": "7"})], {"cost-center": "7"}, None),
        (
            [("a", {"team": "x"}), ("b", {"team": "y"})],
            {},
            "pods a and b have different values of label team: x!=y (integrations.labelKeysToCopy)",
        ),
        (
            [("a", {"team": "x", "other": "1"}), ("b", {"team": "x", "other": "2"})],
            {"team": "x"},
            None,
        ),
    ],
    ids=[
        "members that agree",
        "a member without the key lets the others give it",
        "a key only one member carries",
        "members that disagree: no Workload, and why",
        "a key not asked for may differ",
    ],
)
def test_a_groups_members_must_agree_on_the_labels_copied(members, want, want_problem):
    assert from_members(members, KEYS) == (want, want_problem)


def job(labels):
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "sample", "namespace": "default", "uid": "u-1", "labels": labels},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                }
            }
        },
    }


def test_the_workload_is_made_with_the_copied_labels_and_its_jobs_uid_wins():
    obj = job(
        {
            "kueue.x-k8s.io/queue-name": "user-queue",
            "team": "a",
            "other": "x",
            "kueue.x-k8s.io/job-uid": "forged",
        }
    )
    model = workload_for(obj, uid="u-1", creation_time=0.0)
    labels = workload_manifest(obj, model, ("team", "kueue.x-k8s.io/job-uid"))["metadata"]["labels"]
    assert labels == {"team": "a", "kueue.x-k8s.io/job-uid": "u-1"}
    assert workload_manifest(obj, model)["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": "u-1"}


def config(integrations):
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "integrations": integrations,
    }


def test_the_configuration_asks_for_the_keys_and_is_not_warned_about_them():
    parsed = parse(config({"frameworks": ["batch/job"], "labelKeysToCopy": ["team", "cost"]}))
    assert parsed.label_keys_to_copy == ("team", "cost")
    assert not any("labelKeysToCopy" in line for line in parsed.warnings("kueue.yaml"))
    assert parse(config({"frameworks": ["batch/job"]})).label_keys_to_copy == ()
