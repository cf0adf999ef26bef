"""MultiKueue's policies, table by table: nominations, the check's Active condition, the
config reference, a worker's kubeconfig, the copies and who won (Kueue's words)."""

from __future__ import annotations

from typing import Any

import pytest

from extender.core import multikueue as mk
from extender.core.jobframework import registry

ALL, INC = mk.ALL_AT_ONCE, mk.INCREMENTAL


@pytest.mark.parametrize(
    ("dispatcher", "nominated", "round_started", "now", "want"),
    [
        # AllAtOnce: every connected worker, in the config's order; nothing when unchanged.
        (ALL, (), None, 0.0, (("a", "c"), None)),
        (ALL, ("c", "a"), None, 0.0, None),
        (ALL, ("a", "b"), None, 0.0, (("a", "c"), None)),
        # Incremental: the config's next `step` (connected or not), a round every 5 min.
        (INC, (), None, 10.0, (("a", "b"), 10.0)),
        (INC, ("a", "b"), 10.0, 200.0, None),
        (INC, ("a", "b"), 10.0, 310.0, (("a", "b", "c", "d"), 310.0)),
        (INC, ("a", "b", "c", "d"), 310.0, 900.0, None),  # nobody left to add
        # Another dispatcher nominates: left to it.
        ("example.com/mine", (), None, 0.0, None),
    ],
)
def test_nominate(dispatcher, nominated, round_started, now, want):
    clusters, connected = ("a", "b", "c", "d"), ("a", "c")
    assert mk.nominate(dispatcher, clusters, connected, nominated, round_started, now, 2) == want


@pytest.mark.parametrize(
    ("error", "clusters", "want"),
    [
        (None, [("w1", True)], ("True", "Active", "The admission check is active")),
        (
            None,
            [("w1", True), ("w2", False), ("w3", None)],
            ("True", "SomeActiveClusters", "Missing clusters: [w3], Inactive clusters: [w2]"),
        ),
        (
            None,
            [("w1", False), ("w2", False)],
            ("False", "NoUsableClusters", "Inactive clusters: [w1 w2]"),
        ),
        (
            'multikueueconfigs.kueue.x-k8s.io "c" not found',
            [],
            (
                "False",
                "BadConfig",
                'Cannot load the AdmissionChecks parameters: multikueueconfigs.kueue.x-k8s.io "c" '
                "not found",
            ),
        ),
    ],
)
def test_check_active(error, clusters, want):
    c = mk.check_active(error, clusters)
    assert (c.status, c.reason, c.message) == want


@pytest.mark.parametrize(
    ("params", "want"),
    [
        (None, "missing parameters reference"),
        (
            {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig"},
            "empty name: bad parameters reference",
        ),
        (
            {"apiGroup": "x.io", "kind": "MultiKueueConfig", "name": "c"},
            'wrong group "x.io", expecting "kueue.x-k8s.io": bad parameters reference',
        ),
        (
            {"apiGroup": "kueue.x-k8s.io", "kind": "Other", "name": "c"},
            'wrong kind "Other", expecting "MultiKueueConfig": bad parameters reference',
        ),
        (
            {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "gone"},
            'multikueueconfigs.kueue.x-k8s.io "gone" not found',
        ),
        ({"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "c"}, None),
    ],
)
def test_config_error(params, want):
    assert mk.config_error(params, {"c": {}}) == want


def kubeconfig(
    cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "clusters": [
            {"name": "w", "cluster": {"server": "https://10.0.0.1:6443", **(cluster or {})}}
        ],
        "users": [{"name": "u", "user": {"token": "t", **(user or {})}}],
        "contexts": [{"name": "c", "context": {"cluster": "w", "user": "u"}}],
        "current-context": "c",
    }


@pytest.mark.parametrize(
    ("config", "want"),
    [
        (kubeconfig(), None),
        (kubeconfig({"certificate-authority-data": "eA=="}), None),
        (kubeconfig({"insecure-skip-tls-verify": True}), "insecure-skip-tls-verify is not allowed"),
        (
            kubeconfig({"certificate-authority": "/ca.crt"}),
            "certificate-authority files are not allowed (use certificate-authority-data)",
        ),
        (kubeconfig({"server": ""}), "the kubeconfig's cluster has no server"),
        (kubeconfig(user={"tokenFile": "/t"}), "tokenFile is not allowed"),
        (kubeconfig(user={"exec": {"command": "x"}}), "exec plugins are not allowed"),
        (
            kubeconfig(user={"auth-provider": {"name": "gcp"}}),
            "auth-provider plugins are not allowed",
        ),
        (
            kubeconfig(user={"username": "a", "password": "b"}),
            "basic authentication is not allowed",
        ),
        (
            kubeconfig(user={"client-key": "/k"}),
            "client-key files are not allowed (use client-key-data)",
        ),
        ({"contexts": []}, "the kubeconfig has no current context"),
    ],
)
def test_a_workers_kubeconfig_is_refused_as_kueue_refuses_it(config, want):
    assert mk.insecure(config) == want


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ({"clusterSource": {"kubeConfig": {"location": "s"}}}, mk.KubeConfigSource("s", "Secret")),
        (
            {"kubeConfig": {"location": "/p", "locationType": "Path"}},
            mk.KubeConfigSource("/p", "Path"),
        ),
        ({"clusterSource": {"kubeConfig": {"location": ""}}}, "BadConfig"),
        (
            {"clusterSource": {"clusterProfileRef": {"name": "p"}}},
            "MultiKueueClusterProfileFeatureDisabled",
        ),
    ],
)
def test_cluster_source(spec, want):
    got = mk.cluster_source({"spec": spec})
    assert (got if isinstance(got, mk.KubeConfigSource) else got[0]) == want


def test_the_copy_on_a_worker_keeps_name_spec_and_labels_but_not_the_managers_job():
    local = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "job-a-1",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": "9",
            "labels": {"kueue.x-k8s.io/job-uid": "u", "team": "x"},
            "ownerReferences": [{"kind": "Job", "name": "a"}],
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
        },
        "spec": {"queueName": "user-queue", "podSets": [{"name": "main", "count": 1}]},
        "status": {"admission": {"clusterQueue": "cq"}},
    }
    assert mk.remote_workload(local, "origin-a") == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "job-a-1",
            "namespace": "ns",
            "labels": {"team": "x", "kueue.x-k8s.io/multikueue-origin": "origin-a"},
        },
        "spec": {"queueName": "user-queue", "podSets": [{"name": "main", "count": 1}]},
    }


def _with(kind: str, at: str) -> dict[str, Any]:
    return {"status": {"conditions": [{"type": kind, "status": "True", "lastTransitionTime": at}]}}


def test_the_first_admitted_wins():
    remotes = {
        "w1": _with("Admitted", "2026-01-01T00:00:05Z"),
        "w2": _with("Admitted", "2026-01-01T00:00:02Z"),
        "w3": None,
        "w4": _with("QuotaReserved", "2026-01-01T00:00:01Z"),
    }
    assert mk.earliest(remotes, "Admitted") == "w2"
    assert mk.earliest(remotes, "Finished") is None


def test_what_a_worker_says_of_a_copy_it_has_not_admitted():
    pending = {
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "False", "message": "couldn't assign flavors"}
            ]
        }
    }
    assert mk.pending_reason(pending) == "couldn't assign flavors"
    assert mk.pending_reason(None) == "no copy yet"
    assert mk.pending_reason({}) == "pending, without a reason yet"


# ----- the job adapters' MultiKueue parts ---------------------------------------------------

JOB = registry.ADAPTERS["batch/job"]
JOBSET = registry.ADAPTERS["jobset.x-k8s.io/jobset"]


@pytest.mark.parametrize(
    ("adapter", "managed_by", "handed"),
    [
        (JOB, None, True),
        (JOB, "kubernetes.io/job-controller", True),
        (JOB, "example.com/other", False),  # someone else's: left alone, as Kueue does
        (JOBSET, None, True),
        (JOBSET, "jobset.sigs.k8s.io/jobset-controller", True),
        (registry.ADAPTERS["ray.io/rayjob"], None, False),  # not run through MultiKueue here
    ],
)
def test_which_jobs_the_webhook_hands_to_multikueue(adapter, managed_by, handed):
    obj = {"spec": {} if managed_by is None else {"managedBy": managed_by}}
    ops = adapter.managed_by_ops(obj, mk.CONTROLLER)
    assert ops == (
        [{"op": "add", "path": "/spec/managedBy", "value": mk.CONTROLLER}] if handed else []
    )


def test_a_job_on_the_worker_is_the_managers_without_what_its_api_server_made():
    local = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "job",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "7",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
            "annotations": {"tower.dev/original-suspend": "false"},
            "ownerReferences": [{"kind": "X", "name": "y"}],
        },
        "spec": {
            "suspend": True,
            "managedBy": mk.CONTROLLER,
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}},
            "template": {
                "metadata": {
                    "labels": {
                        "batch.kubernetes.io/controller-uid": "u1",
                        "controller-uid": "u1",
                        "job-name": "job",
                        "batch.kubernetes.io/job-name": "job",
                    }
                },
                "spec": {"containers": [{"name": "c"}]},
            },
        },
        "status": {"active": 1},
    }
    labels, annotations = mk.job_markers("multikueue", "job-job-abcde")
    remote = JOB.remote_copy(local, labels, annotations)
    assert remote == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "job",
            "namespace": "ns",
            "labels": {
                "kueue.x-k8s.io/queue-name": "user-queue",
                "kueue.x-k8s.io/multikueue-origin": "multikueue",
            },
            "annotations": {
                "tower.dev/original-suspend": "false",
                "kueue.x-k8s.io/prebuilt-workload-name": "job-job-abcde",
            },
        },
        "spec": {
            "suspend": True,
            "template": {
                "metadata": {"labels": {"batch.kubernetes.io/job-name": "job"}},
                "spec": {"containers": [{"name": "c"}]},
            },
        },
    }
    assert local["spec"]["managedBy"] == mk.CONTROLLER  # the manager's Job is untouched


def _job(suspend: bool, conditions: list[str] = ()) -> dict[str, Any]:
    return {
        "spec": {"suspend": suspend},
        "status": {
            "startTime": "t",
            "conditions": [{"type": c, "status": "True"} for c in conditions],
        },
    }


@pytest.mark.parametrize(
    ("local", "remote", "copied"),
    [
        (_job(False), _job(False), True),  # both running: the worker's status, whole
        (_job(True), _job(True), True),
        (_job(True), _job(False), False),  # not started here yet: startTime would freeze it
        (_job(True), _job(False, ["Complete"]), True),  # ended there: told at once
    ],
)
def test_when_the_managers_job_takes_the_workers_status(local, remote, copied):
    got = JOB.status_from_worker(local, remote)
    assert got == (remote["status"] if copied else None)
    # A JobSet takes it always (Kueue's JobSet adapter).
    assert JOBSET.status_from_worker(local, remote) == remote["status"]
