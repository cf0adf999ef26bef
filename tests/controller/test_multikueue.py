"""MultiKueue across two API doubles: a manager and a worker, each with its own Tower.

Kueue's setup (site/static/examples/multikueue/multikueue-setup.yaml on the manager,
single-clusterqueue-setup.yaml on the worker, the worker's kubeconfig in a Secret) and then
what Kueue's e2e "Should run a job on worker if admitted" expects: the manager's Job is
handed to MultiKueue (spec.managedBy) by the webhook, reserves quota on the manager, runs
on the worker only, mirrors the worker's status, finishes with it, and its copies on the
worker are removed.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from certs import kube as certs_kube
from extender.core.admission.multikueue import MultiKueueSettings
from extender.kube.api import resources as r
from extender.kube.servers.dashboard import Dashboard
from tests.controller.conftest import Cluster, Running, eventually
from tests.controller.test_kubectl_tower import tower
from tests.controller.workers import name_worker, worker_cluster, worker_secret
from tests.servers import ROOT, start_webhook

EXAMPLES = ROOT / "tests" / "data" / "kueue-v0.19.2" / "examples"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"


def _apply_file(cluster: Cluster, path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        if doc:
            cluster.apply(doc)


@pytest.fixture
def routed_webhook(tmp_path, webhook, cluster) -> Iterator[Any]:
    """The webhook as the manager runs it: it reads the manager's queues (--kubeconfig)."""
    server = start_webhook(
        webhook.certs, tmp_path / "mk-metrics", "--kubeconfig", cluster.admin_config, workers=1
    )
    ca = (webhook.certs / "ca.crt").read_bytes()
    certs_kube.install(cluster.admin.api_client, server.url, ca)
    yield server
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(timeout=20)
    print(server.proc.stdout.read().decode()[-3000:])


@pytest.fixture
def worker(tmp_path, webhook) -> Iterator[Cluster]:
    with worker_cluster(tmp_path / "worker", webhook) as c:
        yield c


def _condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return c
    return None


def _start(cluster: Cluster, **settings: Any) -> Running:
    from extender.kube.controller.context import Settings

    return Running(cluster.controller_client(), Settings(status_interval=0.05, **settings))


def test_a_job_runs_on_the_worker_that_admits_it(cluster, worker, routed_webhook, tmp_path):
    _apply_file(worker, EXAMPLES / "single-clusterqueue-setup.yaml")
    worker_secret(cluster, worker, "worker1-secret")
    _apply_file(cluster, EXAMPLES / "multikueue" / "multikueue-setup.yaml")
    settings = MultiKueueSettings(gc_interval=1.0)
    running = [_start(cluster, multikueue=settings), _start(worker)]
    try:
        # Kueue's "verify" step: the cluster, the check and the ClusterQueue are active.
        mkc = eventually(
            lambda: _condition(
                cluster.get("multikueueclusters", "multikueue-test-worker1"), "Active"
            ),
            what="the MultiKueueCluster's Active condition",
        )
        assert (mkc["status"], mkc["reason"], mkc["message"]) == ("True", "Active", "Connected")
        check = eventually(
            lambda: (
                c
                if (c := _condition(cluster.get("admissionchecks", "sample-multikueue"), "Active"))
                and c["status"] == "True"
                else None
            ),
            what="the AdmissionCheck Active",
        )
        assert (check["reason"], check["message"]) == ("Active", "The admission check is active")

        job = cluster.job("job", "100m", queue="user-queue", duration="6s")
        assert job["spec"]["managedBy"] == MULTIKUEUE  # handed to MultiKueue by the webhook
        wl = eventually(lambda: cluster.workload_of(job), what="the manager's Workload")
        key = wl["metadata"]["name"]

        def admitted() -> dict[str, Any] | None:
            w = cluster.get("workloads", key, "default")
            c = _condition(w, "Admitted")
            return w if c and c["status"] == "True" else None

        wl = eventually(admitted, timeout=20, what="the manager's Workload admitted")
        [state] = wl["status"]["admissionChecks"]
        assert state["state"] == "Ready"
        assert state["message"] == 'The workload was admitted on "multikueue-test-worker1"'
        assert wl["status"]["clusterName"] == "multikueue-test-worker1"
        assert "nominatedClusterNames" not in wl["status"]

        # `kubectl tower why` says where it is.
        where = json.loads(tower(cluster, "why", "job", "-n", "default", "-o", "json").stdout)
        assert where["state"] == "Admitted"
        assert where["multiKueue"] == {
            "reservedIn": "cluster-queue",
            "admittedBy": "multikueue-test-worker1",
        }
        told = tower(cluster, "why", "job", "-n", "default").stdout
        assert "admitted by worker cluster multikueue-test-worker1, where it runs" in told
        # And the dashboard, under its ClusterQueue.
        board = Dashboard(running[0].cache.store).state(time.time())
        [queue] = [q for q in board["clusterQueues"] if q["name"] == "cluster-queue"]
        assert queue["multiCluster"] == [
            {
                "workload": f"default/{key}",
                "where": "quota reserved in ClusterQueue cluster-queue; admitted by worker "
                "cluster multikueue-test-worker1, where it runs",
                "reservedIn": "cluster-queue",
                "admittedBy": "multikueue-test-worker1",
            }
        ]

        # Kueue's MultiKueue counters: its copy made on the worker, and admitted there.
        sample = running[0].controller.metrics.registry.get_sample_value
        on_worker = {
            "cluster_queue": "cluster-queue",
            "cluster": "multikueue-test-worker1",
            "replica_role": "standalone",
        }
        assert sample("multikueue_workloads_dispatched_total", on_worker) == 1
        assert sample("multikueue_workloads_admitted_total", on_worker) == 1

        # The manager's Job is started, but only the worker's Job controller runs it.
        eventually(
            lambda: cluster.get("jobs", "job", "default")["spec"].get("suspend") is False,
            what="the manager's Job unsuspended",
        )
        remote = eventually(lambda: worker.get("jobs", "job", "default"), what="the worker's Job")
        assert remote["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
        assert remote["metadata"]["annotations"]["kueue.x-k8s.io/prebuilt-workload-name"] == key
        assert "managedBy" not in remote["spec"]
        remote_wl = worker.get("workloads", key, "default")
        assert remote_wl is not None
        assert [o["name"] for o in remote_wl["metadata"]["ownerReferences"]] == ["job"]

        # Kueue's e2e: startTime, active 1 and no completionTime, mirrored on the manager.
        status = eventually(
            lambda: (
                s
                if (s := cluster.get("jobs", "job", "default").get("status") or {}).get("active")
                == 1
                else None
            ),
            what="the manager's Job mirroring the worker's",
        )
        assert status["startTime"]
        assert "completionTime" not in status

        # It finishes on the worker: the manager's Workload finishes as it did, the Job
        # shows Complete, and the copies on the worker are removed.
        finished = eventually(
            lambda: (
                c
                if (c := _condition(cluster.get("workloads", key, "default"), "Finished"))
                and c["status"] == "True"
                else None
            ),
            timeout=20,
            what="the manager's Workload finished",
        )
        assert finished["reason"] == "Succeeded"
        complete = _condition(cluster.get("jobs", "job", "default"), "Complete")
        assert complete is not None
        assert complete["status"] == "True"
        eventually(
            lambda: (
                worker.get("workloads", key, "default") is None
                and worker.get("jobs", "job", "default") is None
            ),
            timeout=20,
            what="the worker's copies removed",
        )
    finally:
        for item in running:
            item.halt()


def test_a_missing_secret_says_where_tower_looks(cluster):
    cluster.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "MultiKueueCluster",
            "metadata": {"name": "w1"},
            "spec": {"clusterSource": {"kubeConfig": {"location": "nowhere"}}},
        }
    )
    running = _start(cluster)
    try:
        active = eventually(
            lambda: _condition(cluster.get("multikueueclusters", "w1"), "Active"),
            what="the Active condition",
        )
        assert (active["status"], active["reason"]) == ("False", "BadKubeConfig")
        assert 'secrets "nowhere" not found in tower-system' in active["message"]
    finally:
        running.halt()


def test_the_manifests_are_kueues_own(cluster):
    """The example file is Kueue v0.19.2's, unchanged (tests/data/kueue-v0.19.2/examples/)."""
    setup = list(
        yaml.safe_load_all((EXAMPLES / "multikueue" / "multikueue-setup.yaml").read_text())
    )
    assert [d["kind"] for d in setup] == [
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
        "AdmissionCheck",
        "MultiKueueConfig",
        "MultiKueueCluster",
    ]
    assert json.dumps(setup[-1]["spec"]) == json.dumps(
        {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "worker1-secret"}}}
    )


def _manager_setup(cluster: Cluster, clusters: list[str]) -> None:
    """Kueue's multikueue-setup.yaml, with the config naming these workers."""
    for doc in yaml.safe_load_all((EXAMPLES / "multikueue" / "multikueue-setup.yaml").read_text()):
        if doc["kind"] == "MultiKueueConfig":
            doc["spec"]["clusters"] = clusters
        if doc and doc["kind"] != "MultiKueueCluster":
            cluster.apply(doc)


def _worker_setup(worker: Cluster, cpu: str) -> None:
    for doc in yaml.safe_load_all((EXAMPLES / "single-clusterqueue-setup.yaml").read_text()):
        if doc["kind"] == "ClusterQueue":
            doc["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = cpu
        worker.apply(doc)


def _check_of(cluster: Cluster, key: str) -> dict[str, Any]:
    wl = cluster.get("workloads", key, "default") or {}
    return ((wl.get("status") or {}).get("admissionChecks") or [{}])[0]


def test_deleting_the_managers_job_removes_the_copies(cluster, worker, routed_webhook):
    _worker_setup(worker, "9")
    name_worker(cluster, worker, "multikueue-test-worker1", "worker1-secret")
    _manager_setup(cluster, ["multikueue-test-worker1"])
    running = [_start(cluster), _start(worker)]
    try:
        job = cluster.job("long", "100m", queue="user-queue", duration="600s")
        key = eventually(lambda: cluster.workload_of(job), what="its Workload")["metadata"]["name"]
        eventually(lambda: worker.get("jobs", "long", "default"), timeout=20, what="the remote Job")
        cluster.admin.delete(r.JOBS, "long", "default", propagation="Background")
        eventually(
            lambda: (
                worker.get("jobs", "long", "default") is None
                and worker.get("workloads", key, "default") is None
            ),
            timeout=20,
            what="the copies removed from the worker",
        )
    finally:
        for item in running:
            item.halt()


def test_a_workload_no_worker_admits_is_given_back_with_each_workers_answer(
    cluster, worker, routed_webhook
):
    """Beyond Kueue (#8602): no worker has room, so no copy is admitted; after the bound the
    manager's quota is given back with what each worker said, and it is dispatched again."""
    _worker_setup(worker, "0")
    name_worker(cluster, worker, "multikueue-test-worker1", "worker1-secret")
    _manager_setup(cluster, ["multikueue-test-worker1"])
    running = [
        _start(cluster, multikueue=MultiKueueSettings(admission_timeout=6.0)),
        _start(worker),
    ]
    try:
        job = cluster.job("big", "1", queue="user-queue", duration="600s")
        key = eventually(lambda: cluster.workload_of(job), what="its Workload")["metadata"]["name"]
        eventually(lambda: worker.get("workloads", key, "default"), what="the copy on the worker")
        where = json.loads(tower(cluster, "why", "big", "-n", "default", "-o", "json").stdout)
        assert where["state"] == "Dispatched"
        assert where["multiKueue"] == {
            "reservedIn": "cluster-queue",
            "dispatchedTo": ["multikueue-test-worker1"],
        }

        def given_back() -> dict[str, Any] | None:
            c = _condition(cluster.get("workloads", key, "default"), "Evicted")
            return c if c and c["status"] == "True" else None

        evicted = eventually(given_back, timeout=45, what="the reservation given back")
        assert evicted["reason"] == "AdmissionCheck"
        assert "no worker cluster admitted the workload within 6s" in evicted["message"]
        # What the worker said of its copy: its own queue has no room.
        assert "(multikueue-test-worker1: " in evicted["message"]
        assert "more than the 0 cluster-queue has in all" in evicted["message"]
        assert "Previously" not in evicted["message"]
        # It is queued again, and dispatched again (the copy is made anew).
        eventually(
            lambda: (
                _check_of(cluster, key).get("state") == "Pending"
                and _condition(cluster.get("workloads", key, "default"), "QuotaReserved")["status"]
                == "True"
            ),
            timeout=20,
            what="reserved and dispatched again",
        )
    finally:
        for item in running:
            item.halt()


def test_a_lost_worker_is_inactive_and_its_workload_runs_elsewhere(
    cluster, webhook, routed_webhook, tmp_path
):
    """worker1 admits it and goes away: its cluster turns Active=False, and after
    workerLostTimeout the manager dispatches the Workload again; worker2 runs it. When
    worker1 is back, its stale copy is removed: one worker holds it at a time."""
    with (
        worker_cluster(tmp_path / "w1", webhook) as w1,
        worker_cluster(tmp_path / "w2", webhook) as w2,
    ):
        _worker_setup(w1, "9")
        _worker_setup(w2, "0")  # no room at first: worker1 wins
        name_worker(cluster, w1, "w1", "w1-secret")
        name_worker(cluster, w2, "w2", "w2-secret")
        _manager_setup(cluster, ["w1", "w2"])
        settings = MultiKueueSettings(worker_lost_timeout=2.0, admission_timeout=0.0)
        running = [_start(cluster, multikueue=settings), _start(w1), _start(w2)]
        try:
            job = cluster.job("moving", "100m", queue="user-queue", duration="600s")
            key = eventually(lambda: cluster.workload_of(job), what="its Workload")["metadata"][
                "name"
            ]
            eventually(
                lambda: (
                    _check_of(cluster, key).get("message") == 'The workload was admitted on "w1"'
                ),
                timeout=20,
                what="admitted on w1",
            )
            eventually(lambda: w2.get("workloads", key, "default") is None, what="w2's copy gone")
            # The manager's Job counts w1's running pod (copied): once w1 is lost, that count
            # is never copied again, and must not hold the quota here forever.
            eventually(
                lambda: (
                    (cluster.get("jobs", "moving", "default").get("status") or {}).get("active")
                    == 1
                ),
                timeout=20,
                what="the manager's Job mirroring w1's running pod",
            )
            w2.admin.patch(
                r.CLUSTER_QUEUES,
                "cluster-queue",
                {
                    "spec": {
                        "resourceGroups": [
                            {
                                "coveredResources": ["cpu", "memory"],
                                "flavors": [
                                    {
                                        "name": "default-flavor",
                                        "resources": [
                                            {"name": "cpu", "nominalQuota": "9"},
                                            {"name": "memory", "nominalQuota": "36Gi"},
                                        ],
                                    }
                                ],
                            }
                        ]
                    }
                },
            )
            down = threading.Thread(target=w1.api.restart, kwargs={"downtime": 12.0})
            down.start()
            lost = eventually(
                lambda: (
                    c
                    if (c := _condition(cluster.get("multikueueclusters", "w1"), "Active"))
                    and c["status"] == "False"
                    else None
                ),
                timeout=15,
                what="w1 inactive",
            )
            assert lost["reason"] == "ClientConnectionFailed"
            eventually(
                lambda: (
                    _check_of(cluster, key).get("message") == 'The workload was admitted on "w2"'
                ),
                timeout=60,
                what="admitted again, on w2",
            )
            assert w2.get("jobs", "moving", "default") is not None
            down.join()
            eventually(
                lambda: (
                    w1.get("workloads", key, "default") is None
                    and w1.get("jobs", "moving", "default") is None
                ),
                timeout=40,
                what="w1's stale copies removed once it is back",
            )
            assert cluster.get("workloads", key, "default")["status"]["clusterName"] == "w2"
        finally:
            for item in running:
                item.halt()


def test_the_incremental_dispatcher_nominates_step_by_step(
    cluster, webhook, routed_webhook, tmp_path
):
    """Kueue's Incremental dispatcher, stepSize 1: the first round nominates the config's
    first worker only, and only it gets a copy; the next round adds the second."""
    with (
        worker_cluster(tmp_path / "w1", webhook) as w1,
        worker_cluster(tmp_path / "w2", webhook) as w2,
    ):
        for w in (w1, w2):
            _worker_setup(w, "0")  # nobody admits: the rounds are what is seen
        name_worker(cluster, w1, "w1", "w1-secret")
        name_worker(cluster, w2, "w2", "w2-secret")
        _manager_setup(cluster, ["w1", "w2"])
        settings = MultiKueueSettings(
            dispatcher="kueue.x-k8s.io/multikueue-dispatcher-incremental",
            incremental_step=1,
            incremental_round=3.0,  # Kueue's is five minutes: the same rounds, sooner
            admission_timeout=0.0,
        )
        running = [_start(cluster, multikueue=settings), _start(w1), _start(w2)]
        try:
            job = cluster.job("stepwise", "1", queue="user-queue", duration="600s")
            key = eventually(lambda: cluster.workload_of(job), what="its Workload")["metadata"][
                "name"
            ]
            eventually(lambda: w1.get("workloads", key, "default"), timeout=20, what="w1's copy")
            wl = cluster.get("workloads", key, "default")
            assert wl["status"]["nominatedClusterNames"] == ["w1"]
            time.sleep(0.5)  # a second look changes nothing within the round
            assert w2.get("workloads", key, "default") is None
            assert cluster.get("workloads", key, "default")["status"]["nominatedClusterNames"] == [
                "w1"
            ]
            # The next round adds the next worker of the config (the list only grows).
            eventually(lambda: w2.get("workloads", key, "default"), timeout=20, what="w2's copy")
            wl = cluster.get("workloads", key, "default")
            assert wl["status"]["nominatedClusterNames"] == ["w1", "w2"]
            assert w1.get("workloads", key, "default") is not None
        finally:
            for item in running:
                item.halt()


def test_a_job_left_to_its_own_controller_is_rejected_as_kueue_rejects_it(cluster, worker):
    """Without the webhook's read (no --kubeconfig here) nothing hands the Job to
    MultiKueue: the check is Rejected with Kueue's message, and the Workload deactivated,
    rather than run on the manager and a worker both."""
    _worker_setup(worker, "9")
    name_worker(cluster, worker, "multikueue-test-worker1", "worker1-secret")
    _manager_setup(cluster, ["multikueue-test-worker1"])
    running = [_start(cluster), _start(worker)]
    try:
        job = cluster.job("plain", "100m", queue="user-queue", duration="600s")
        assert "managedBy" not in job["spec"]
        key = eventually(lambda: cluster.workload_of(job), what="its Workload")["metadata"]["name"]
        # Rejected, then deactivated (after which the check is reset to Pending, as Kueue
        # resets it on eviction): the deactivation carries the rejection's message.
        eventually(
            lambda: cluster.get("workloads", key, "default")["spec"].get("active") is False,
            timeout=45,
            what="the Workload deactivated",
        )
        evicted = eventually(
            lambda: _condition(cluster.get("workloads", key, "default"), "Evicted"),
            what="the Workload evicted",
        )
        assert evicted["reason"] == "DeactivatedDueToAdmissionCheck"
        assert evicted["message"] == (
            "The workload is deactivated due to AdmissionCheck in Rejected state: "
            '"sample-multikueue" (The owner is not managed by Kueue: Expecting spec.managedBy '
            'to be "kueue.x-k8s.io/multikueue" not "", Previously: "Pending")'
        )
        assert worker.get("workloads", key, "default") is None  # never dispatched
        assert cluster.get("jobs", "plain", "default")["spec"]["suspend"] is True
    finally:
        for item in running:
            item.halt()


def test_copies_whose_workload_is_gone_are_collected_every_gc_interval(cluster, worker):
    """Kueue's gcInterval: a copy on a worker that no Workload on the manager stands for (a
    manager that was down when its job was deleted) is removed, with its job; what another
    origin made there is left alone."""
    _worker_setup(worker, "9")
    name_worker(cluster, worker, "multikueue-test-worker1", "worker1-secret")
    _manager_setup(cluster, ["multikueue-test-worker1"])

    def orphan(name: str, origin: str) -> None:
        worker.admin.create(
            r.WORKLOADS,
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {
                    "name": name,
                    "labels": {"kueue.x-k8s.io/multikueue-origin": origin},
                },
                "spec": {
                    "queueName": "user-queue",
                    "podSets": [
                        {
                            "name": "main",
                            "count": 1,
                            "template": {
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "c",
                                            "image": "busybox",
                                            "resources": {"requests": {"cpu": "100m"}},
                                        }
                                    ]
                                }
                            },
                        }
                    ],
                },
            },
            "default",
        )

    orphan("left-behind", "multikueue")
    orphan("another-managers", "elsewhere")
    # Its job on the worker, as the manager made it (the prebuilt Workload annotation).
    worker.admin.create(
        r.JOBS,
        {
            "metadata": {
                "name": "left-behind-job",
                "labels": {"kueue.x-k8s.io/multikueue-origin": "multikueue"},
                "annotations": {"kueue.x-k8s.io/prebuilt-workload-name": "left-behind"},
            },
            "spec": {
                "suspend": True,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox"}],
                    }
                },
            },
        },
        "default",
    )
    running = [_start(cluster, multikueue=MultiKueueSettings(gc_interval=1.0))]
    try:
        eventually(
            lambda: (
                worker.get("workloads", "left-behind", "default") is None
                and worker.get("jobs", "left-behind-job", "default") is None
            ),
            timeout=20,
            what="the orphaned copy and its job collected",
        )
        time.sleep(1.5)  # a collection more
        assert worker.get("workloads", "another-managers", "default") is not None
    finally:
        for item in running:
            item.halt()


def test_a_copy_evicted_on_its_worker_sends_the_workload_back(cluster, worker, routed_webhook):
    """The worker evicts its copy (deactivated there): the manager's check goes Retry with
    Kueue's message, the reservation here is given back, and the Workload is dispatched and
    admitted again."""
    _worker_setup(worker, "9")
    name_worker(cluster, worker, "multikueue-test-worker1", "worker1-secret")
    _manager_setup(cluster, ["multikueue-test-worker1"])
    running = [_start(cluster), _start(worker)]
    try:
        job = cluster.job("evicted", "100m", queue="user-queue", duration="600s")
        key = eventually(lambda: cluster.workload_of(job), what="its Workload")["metadata"]["name"]
        admitted = 'The workload was admitted on "multikueue-test-worker1"'
        eventually(
            lambda: _check_of(cluster, key).get("message") == admitted,
            timeout=20,
            what="admitted on the worker",
        )
        first = worker.get("workloads", key, "default")["metadata"]["uid"]
        worker.admin.patch(r.WORKLOADS, key, {"spec": {"active": False}}, "default")
        # Evicted here by the check's Retry (its quota given back once the worker's job
        # stopped), and queued again.
        evicted = eventually(
            lambda: _condition(cluster.get("workloads", key, "default"), "Evicted"),
            timeout=20,
            what="the manager's Workload evicted",
        )
        assert evicted["reason"] == "AdmissionCheck", evicted
        eventually(
            lambda: _condition(cluster.get("workloads", key, "default"), "Requeued"),
            timeout=20,
            what="the manager's Workload queued again",
        )
        events = [
            e.get("message")
            for e in cluster.api.list("events", "default")
            if e.get("reason") == "MultiKueue"
        ]
        assert any(
            'Workload evicted on worker cluster: "multikueue-test-worker1", resetting for '
            're-admission. Previously: "Ready"' in str(m)
            for m in events
        ), events
        # Dispatched again: a new copy, admitted.
        eventually(
            lambda: (
                (copy := worker.get("workloads", key, "default")) is not None
                and copy["metadata"]["uid"] != first
                and _check_of(cluster, key).get("message") == admitted
            ),
            timeout=30,
            what="dispatched and admitted again",
        )
    finally:
        for item in running:
            item.halt()


def test_the_managers_nodes_do_not_hold_back_a_job_that_runs_on_a_worker(
    cluster, worker, routed_webhook
):
    """Kueue's e2e 'Should preempt ... (same worker)' asks for example.com/gpu-h100, which no
    node of the manager has: the manager reserves quota on quota alone (its pods never run
    there), and the worker admits it. Tower's physical fit, on for extended resources, is not
    asked on the manager of a MultiKueue ClusterQueue."""
    gpu = "example.com/gpu-h100"

    def with_gpus(path: Path) -> Iterator[dict[str, Any]]:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc["kind"] == "ClusterQueue":
                group = doc["spec"]["resourceGroups"][0]
                group["coveredResources"].append(gpu)
                group["flavors"][0]["resources"].append({"name": gpu, "nominalQuota": "2"})
            if doc and doc["kind"] == "MultiKueueConfig":
                doc["spec"]["clusters"] = ["multikueue-test-worker1"]
            if doc and doc["kind"] != "MultiKueueCluster":
                yield doc

    worker.apply(*with_gpus(EXAMPLES / "single-clusterqueue-setup.yaml"))
    name_worker(cluster, worker, "multikueue-test-worker1", "worker1-secret")
    cluster.apply(*with_gpus(EXAMPLES / "multikueue" / "multikueue-setup.yaml"))
    running = [_start_placed(cluster), _start(worker)]
    try:
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "gpu", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "busybox:1.36",
                 "resources": {"requests": {gpu: "2"}, "limits": {gpu: "2"}}}]}}},
        }  # fmt: skip
        job = cluster.admin.create(r.JOBS, body, "default")
        key = eventually(lambda: cluster.workload_of(job), what="its Workload")["metadata"]["name"]
        eventually(
            lambda: (
                _check_of(cluster, key).get("message")
                == 'The workload was admitted on "multikueue-test-worker1"'
            ),
            timeout=20,
            what="admitted on the worker, whatever the manager's nodes",
        )
    finally:
        for item in running:
            item.halt()


def _start_placed(cluster: Cluster) -> Running:
    """A controller as `_start`'s, with physical fit on (nodes and pods watched), as
    `python -m extender run` has it by default."""
    from extender.core.jobframework import registry
    from extender.kube.api.cache import Cache, watch_for_kinds
    from extender.kube.api.events import Recorder
    from extender.kube.api.placement import Placement
    from extender.kube.controller.context import Settings
    from extender.kube.controller.loop import Controller

    settings = Settings(status_interval=0.05)
    client = cluster.controller_client()
    running = Running.__new__(Running)
    running.stop = threading.Event()
    running.cache = Cache(
        client,
        adapters=registry.enabled(settings.integrations),
        group_parents=registry.group_parents(settings.integrations),
        placement=Placement(),
    )
    running.cache.discover_kinds()
    running.cache.discover_optional()
    watch_for_kinds(running.cache, running.stop, every=0.2)
    running.cache.start(running.stop)
    running.recorder = Recorder(client)
    running.controller = Controller(client, running.cache, settings=settings,
                                    recorder=running.recorder)  # fmt: skip
    running.thread = threading.Thread(target=running.controller.run, args=(running.stop,),
                                      daemon=True)  # fmt: skip
    running.thread.start()
    assert running.controller.ready.wait(10), "the controller's caches never synced"
    return running


def test_a_priority_changed_on_the_manager_reaches_the_workers_copy(
    cluster, worker, routed_webhook
):
    """Kueue's e2e 'Should keep workload priority event if job reconcile': the job's
    priority-class label changed on the manager changes its Workload's priority there, and
    the copy on the worker that admitted it is updated in place (not replaced)."""
    _worker_setup(worker, "9")
    name_worker(cluster, worker, "multikueue-test-worker1", "worker1-secret")
    _manager_setup(cluster, ["multikueue-test-worker1"])
    for where in (cluster, worker):
        for name, value in (("high", 300), ("low", 100)):
            where.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
                         "metadata": {"name": name}, "value": value})  # fmt: skip
    running = [_start(cluster), _start(worker)]
    try:
        job = cluster.job("prio", "100m", duration="600s",
                          labels={"kueue.x-k8s.io/priority-class": "high"})  # fmt: skip
        key = eventually(lambda: cluster.workload_of(job), what="its Workload")["metadata"]["name"]
        eventually(
            lambda: (
                _check_of(cluster, key).get("message")
                == 'The workload was admitted on "multikueue-test-worker1"'
            ),
            timeout=20,
            what="admitted on the worker",
        )
        first = worker.get("workloads", key, "default")
        assert first["spec"]["priority"] == 300
        cluster.admin.patch(
            r.JOBS, "prio", {"metadata": {"labels": {"kueue.x-k8s.io/priority-class": "low"}}},
            "default",
        )  # fmt: skip
        copy = eventually(
            lambda: (
                (c := worker.get("workloads", key, "default"))
                and c["spec"].get("priority") == 100
                and c
            ),
            timeout=20,
            what="the worker's copy at the low priority",
        )
        assert copy["spec"]["priorityClassRef"]["name"] == "low"
        assert copy["metadata"]["uid"] == first["metadata"]["uid"]
    finally:
        for item in running:
            item.halt()
