"""MultiKueue's policies, table by table: nominations, the check's Active condition, the
config reference, a worker's kubeconfig, the copies and who won (Kueue's words)."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from extender.core.admission import multikueue as mk
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


A = registry.ADAPTERS
MK = mk.CONTROLLER


@pytest.mark.parametrize(
    ("adapter", "spec", "ops"),
    [
        (JOB, {}, [{"op": "add", "path": "/spec/managedBy", "value": MK}]),
        (
            JOB,
            {"managedBy": "kubernetes.io/job-controller"},
            [{"op": "add", "path": "/spec/managedBy", "value": MK}],
        ),
        (JOB, {"managedBy": "example.com/other"}, []),  # someone else's: left alone, as Kueue
        (JOBSET, {}, [{"op": "add", "path": "/spec/managedBy", "value": MK}]),
        (
            JOBSET,
            {"managedBy": "jobset.sigs.k8s.io/jobset-controller"},
            [{"op": "add", "path": "/spec/managedBy", "value": MK}],
        ),
        # Kubeflow's jobs keep it in their runPolicy, which a new job may not have yet.
        (
            A["kubeflow.org/mpijob"],
            {},
            [{"op": "add", "path": "/spec/runPolicy", "value": {"managedBy": MK}}],
        ),
        (
            A["kubeflow.org/mpijob"],
            {"runPolicy": {"suspend": True}},
            [{"op": "add", "path": "/spec/runPolicy/managedBy", "value": MK}],
        ),
        (
            A["kubeflow.org/mpijob"],
            {"runPolicy": {"managedBy": "kubeflow.org/mpi-operator"}},
            [{"op": "add", "path": "/spec/runPolicy/managedBy", "value": MK}],
        ),
        (A["kubeflow.org/mpijob"], {"runPolicy": {"managedBy": "example.com/x"}}, []),
        (
            A["kubeflow.org/pytorchjob"],
            {"runPolicy": {"managedBy": "kubeflow.org/training-operator"}},
            [{"op": "add", "path": "/spec/runPolicy/managedBy", "value": MK}],
        ),
        (
            A["kubeflow.org/jaxjob"],
            {},
            [{"op": "add", "path": "/spec/runPolicy", "value": {"managedBy": MK}}],
        ),
        (
            A["ray.io/rayjob"],
            {"managedBy": "ray.io/kuberay-operator"},
            [{"op": "add", "path": "/spec/managedBy", "value": MK}],
        ),
        (A["ray.io/raycluster"], {}, [{"op": "add", "path": "/spec/managedBy", "value": MK}]),
        (A["ray.io/rayservice"], {}, [{"op": "add", "path": "/spec/managedBy", "value": MK}]),
        (
            A["workload.codeflare.dev/appwrapper"],
            {"managedBy": "workload.codeflare.dev/appwrapper-controller"},
            [{"op": "add", "path": "/spec/managedBy", "value": MK}],
        ),
        # trainer's CRD defaults it to its own controller before the webhook sees it.
        (
            A["trainer.kubeflow.org/trainjob"],
            {"managedBy": "trainer.kubeflow.org/trainjob-controller"},
            [{"op": "add", "path": "/spec/managedBy", "value": MK}],
        ),
        (A["pod"], {}, []),  # a pod has no managedBy
    ],
)
def test_which_jobs_the_webhook_hands_to_multikueue(adapter, spec, ops):
    obj = {"spec": spec}
    assert adapter.managed_by_ops(obj, MK) == ops
    if ops:  # applied, the job names MultiKueue where the kind reads it
        handed = jsonpatch.apply_patch(obj, ops)
        assert adapter.managed_by(handed) == MK


@pytest.mark.parametrize(
    ("framework", "field"),
    [
        ("batch/job", "spec.managedBy"),
        ("kubeflow.org/mpijob", "spec.runPolicy.managedBy"),
        ("kubeflow.org/tfjob", "spec.runPolicy.managedBy"),
        ("ray.io/rayservice", "spec.managedBy"),
    ],
)
def test_a_job_not_handed_to_multikueue_is_rejected_naming_its_field(framework, field):
    adapter = registry.ADAPTERS[framework]
    assert adapter.managed_by_field == field
    assert mk.not_managed(None, adapter.managed_by_field) == (
        f'The owner is not managed by Kueue: Expecting {field} to be "{MK}" not ""'
    )


@pytest.mark.parametrize(
    ("framework", "spec", "worker_spec"),
    [
        (
            "kubeflow.org/mpijob",
            {"runPolicy": {"managedBy": MK, "suspend": True}, "mpiReplicaSpecs": {}},
            {"runPolicy": {"suspend": True}, "mpiReplicaSpecs": {}},
        ),
        ("ray.io/rayjob", {"managedBy": MK, "entrypoint": "x"}, {"entrypoint": "x"}),
        # The manager's own admission (Kueue's runtime patch) is not the worker's to run.
        (
            "trainer.kubeflow.org/trainjob",
            {
                "managedBy": MK,
                "runtimePatches": [
                    {"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {}},
                    {"manager": "example.com/mine", "time": 1},
                ],
            },
            {"runtimePatches": [{"manager": "example.com/mine", "time": 1}]},
        ),
        (
            "trainer.kubeflow.org/trainjob",
            {"managedBy": MK, "runtimePatches": [{"manager": "kueue.x-k8s.io/manager"}]},
            {},
        ),
    ],
)
def test_the_copy_for_a_worker_leaves_the_kind_to_its_own_controller(framework, spec, worker_spec):
    adapter = registry.ADAPTERS[framework]
    local = {"metadata": {"name": "j", "namespace": "ns", "uid": "u"}, "spec": spec}
    copy = adapter.remote_copy(local, {"origin": "o"}, {})
    assert copy["spec"] == worker_spec
    assert adapter.managed_by(copy) is None
    assert local["spec"] == spec  # the manager's job is left as it is


def test_a_rayservices_serve_config_is_carried_to_the_worker():
    service = registry.ADAPTERS["ray.io/rayservice"]
    remote = {"spec": {"serveConfigV2": "applications: []", "rayClusterConfig": {}}}
    assert (
        service.remote_spec_patch({"spec": {"serveConfigV2": "applications: []"}}, remote) is None
    )
    new = "applications: [{name: app}]"
    assert service.remote_spec_patch({"spec": {"serveConfigV2": new}}, remote) == {
        "spec": {"serveConfigV2": new}
    }
    # The watch cache keeps it, so a change on the manager is seen.
    kept = service.kept({"spec": {"serveConfigV2": new, "rayClusterConfig": {"headGroupSpec": {}}}})
    assert kept["serveConfigV2"] == new
    # Other kinds carry nothing after admission (Kueue creates their copy once).
    job = registry.ADAPTERS["ray.io/rayjob"]
    assert (
        job.remote_spec_patch({"spec": {"entrypoint": "a"}}, {"spec": {"entrypoint": "b"}}) is None
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


GATED = {"spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}}
UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
SCHEDULED = {"type": "PodScheduled", "status": "True"}
SAID_GATED = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "SchedulingGated",
    "message": "Scheduling is blocked due to non-empty scheduling gates",
    "lastProbeTime": None,
    "lastTransitionTime": None,
}


@pytest.mark.parametrize(
    ("local", "remote_conditions", "want_conditions"),
    [
        # Not scheduled there yet: the gated pod here says it is gated, not Unschedulable
        # (which a cluster autoscaler on the manager would scale up for).
        (GATED, [UNSCHEDULABLE], [SAID_GATED]),
        (GATED, [], [SAID_GATED]),
        # Scheduled there: the worker's condition, as it is.
        (GATED, [SCHEDULED, {"type": "Ready", "status": "True"}], None),
        # A pod here that is not gated (never, for MultiKueue's) keeps the worker's.
        ({"spec": {}}, [UNSCHEDULABLE], None),
    ],
)
def test_a_pod_takes_its_workers_status_but_stays_gated_here(
    local, remote_conditions, want_conditions
):
    pod = registry.ADAPTERS["pod"]
    remote = {"status": {"phase": "Pending", "conditions": remote_conditions, "podIP": "10.0.0.1"}}
    status = pod.status_from_worker(local, remote)
    assert status["phase"] == "Pending"
    assert status["podIP"] == "10.0.0.1"
    want = remote_conditions if want_conditions is None else want_conditions
    assert status["conditions"] == want
    assert remote["status"]["conditions"] == remote_conditions  # the worker's left as it is


def test_a_workload_runs_on_a_worker_when_one_of_its_checks_is_multikueues():
    controllers = {"mk": mk.CONTROLLER, "prov": "kueue.x-k8s.io/provisioning-request"}
    with_checks = lambda *names: {  # noqa: E731
        "status": {"admissionChecks": [{"name": n, "state": "Pending"} for n in names]}
    }
    assert mk.runs_on_worker(with_checks("prov", "mk"), controllers.get)
    assert not mk.runs_on_worker(with_checks("prov"), controllers.get)
    assert not mk.runs_on_worker(with_checks("gone"), controllers.get)
    assert not mk.runs_on_worker({}, controllers.get)


@pytest.mark.parametrize(
    ("name", "where", "turn"),
    [
        # Not all made yet: none is dispatched (looked at again shortly).
        (
            "g0",
            {"g0": None},
            mk.Turn(waits="its sibling Workloads ['g1'] are not made yet", retry=1.0),
        ),
        # All made, none placed: the first goes, the others wait for it.
        ("g0", {"g0": None, "g1": None}, mk.Turn()),
        ("g1", {"g0": None, "g1": None}, mk.Turn(waits="it follows the first of its group, g0")),
        # The first went to w2: the others follow it there.
        ("g1", {"g0": "w2", "g1": None}, mk.Turn(follow="w2")),
        ("g0", {"g0": "w2", "g1": "w2"}, mk.Turn(follow="w2")),
        # Never split across workers.
        (
            "g2",
            {"g0": "w1", "g1": "w2", "g2": None},
            mk.Turn(waits="its sibling Workloads went to different workers: ['w1', 'w2']"),
        ),
    ],
)
def test_a_leaderworkersets_workloads_go_to_one_worker(name, where, turn):
    components = sorted({*where, "g1"})
    assert mk.component_turn(name, components, where) == turn
