"""Port of Kueue v0.19.2's test/e2e/multikueue/sequential/e2e_test.go: the MultiKueue cases that
restart the manager's Tower with another Configuration, cut a worker off, or reach workers
through ClusterProfiles (tests/e2e/kueue/multikueue.py, mk_sequential.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from tests.e2e.conftest import KUBECONFIG
from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.mk_sequential import (
    PLUGIN,
    Cut,
    access_provider,
    drop_worker_token,
    expect_active,
    install_profile_crd,
    plugin_kubeconfig,
    profile,
    set_secret_kubeconfig,
    through,
    token_secret,
    worker_kubeconfig,
    worker_token,
)
from tests.e2e.kueue.multikueue import (
    MULTIKUEUE_CONTROLLER,
    TOWER_NS,
    MultiKueueSetup,
    Worker,
    cluster_queue,
    expect_check_state,
    expect_not_on,
    generated,
    has_quota,
    is_admitted,
    is_evicted,
    job_gone_on,
    wait_active,
    workers_fixture,  # noqa: F401 (the fixture)
)
from tests.e2e.kueue.restarts import restart_with
from tests.e2e.kueue.util import (
    CONFIGURATION,
    KUEUE,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    TIMEOUT,
    Cluster,
    Tower,
    V,
    condition,
    consistently,
    eventually,
    make_job,
)

pytestmark = pytest.mark.e2e

GO = "multikueue/sequential/e2e_test.go"
SEQ = "MultiKueue Sequential "
INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
PROFILE_GATE = "MultiKueueClusterProfile"
PROFILES = ("multicluster.x-k8s.io", "v1alpha1", "clusterprofiles")
VERY_LONG_TIMEOUT = 300.0


def configuration(gates: dict[str, bool] | None = None, **multikueue: object) -> str:
    """The suite's Configuration with these feature gates and multiKueue fields set."""
    document = yaml.safe_load(CONFIGURATION)
    document.setdefault("featureGates", {}).update(gates or {})
    if multikueue:
        document.setdefault("multiKueue", {}).update(multikueue)
    return yaml.safe_dump(document)


@pytest.fixture
def seq(
    cluster: Cluster, workers: tuple[Worker, Worker], kubelet_namespaces: set[str]
) -> Iterator[MultiKueueSetup]:
    """The sequential BeforeEach: 2 cpu / 4G on the manager, 2 / 1G and 1200m / 4G on the
    workers (and ephemeral storage), preemption within each ClusterQueue."""
    ns = cluster.create_namespace_from_prefix("multikueue-")
    kubelet_namespaces.add(ns)
    setup = MultiKueueSetup(
        cluster, workers, ns,
        quotas=({"cpu": "2", "memory": "4G", "ephemeral-storage": "100G"},
                {"cpu": "2", "memory": "1G", "ephemeral-storage": "15G"},
                {"cpu": "1200m", "memory": "4G", "ephemeral-storage": "5G"}),
    )  # fmt: skip
    yield setup
    setup.teardown()


@kueue_case(GO, SEQ + "Incremental mode Should run a job on worker if admitted")
def test_incremental_dispatcher(seq: MultiKueueSetup, tower: Tower) -> None:
    mk = seq
    restart_with(tower, configuration(dispatcherName=INCREMENTAL))
    try:
        # 2G of memory: only worker 2 can admit it.
        body = make_job("job", mk.ns, queue=mk.lq, requests={"cpu": "1", "memory": "2G"})
        made = mk.manager.batch.create_namespaced_job(mk.ns, body)
        eventually(lambda: mk.manager.batch.read_namespaced_job("job", mk.ns).spec.managed_by
                   == MULTIKUEUE_CONTROLLER, TIMEOUT, "managed by MultiKueue")  # fmt: skip
        name = mk.manager.workload_for_job(made, mk.ns)
        eventually(lambda: is_admitted(mk.manager.workload(name, mk.ns)), MEDIUM_TIMEOUT,
                   f"{name} admitted")  # fmt: skip
        worker2 = mk.cluster_names[1]
        expect_check_state(mk.manager, name, mk.ns, mk.check, "Ready",
                           f'The workload was admitted on "{worker2}"')  # fmt: skip
        batch = mk.manager.batch
        eventually(lambda: batch.read_namespaced_job("job", mk.ns).spec.suspend is False,
                   TIMEOUT, "the manager's job unsuspended")  # fmt: skip

        def mirrored() -> bool:
            s = batch.read_namespaced_job("job", mk.ns).status
            assert (s.start_time is not None, s.active, s.completion_time) == (True, 1, None), s
            return True

        eventually(mirrored, MEDIUM_TIMEOUT, "the job's status from the worker")
        mk.workers[1].terminate_active_pods(mk.ns, 1, 0, "batch.kubernetes.io/job-name=job")

        def finished() -> bool:
            found = condition(mk.manager.workload(name, mk.ns), "Finished")
            assert (found.get("status"), found.get("reason")) == ("True", "Succeeded"), found
            return True

        eventually(finished, MEDIUM_TIMEOUT, f"{name} finished")
        expect_not_on(mk.workers, name, mk.ns, LONG_TIMEOUT)
        job_gone_on(mk.workers, "job", mk.ns)
        conditions = batch.read_namespaced_job("job", mk.ns).status.conditions or []
        assert any(c.type == "Complete" and c.status == "True" for c in conditions), conditions
    finally:
        restart_with(tower)


@kueue_case(GO, SEQ + "The connection to a worker cluster is unreliable Should update the "
            "cluster status to reflect the connection state")  # fmt: skip
def test_unreliable_connection(seq: MultiKueueSetup) -> None:
    """Kueue rebinds worker 1's kube-apiserver to loopback inside its kind node, so that the
    manager cannot reach it, and back. Here the manager reaches worker 1 through a TCP path
    the test cuts and mends (the shared plane's kube-apiserver is not restarted: the worker's
    own Tower keeps its connection, and Kueue's restart of the worker's controller has nothing
    to recover from)."""
    mk = seq
    worker1 = mk.workers[0]
    worker1.cluster.create("clusterqueues", cluster_queue(
        "q2", mk.flavor, {"cpu": "2", "memory": "1G"}, preemption=False))  # fmt: skip
    wait_active(worker1.cluster, "clusterqueues", "q2")
    mkc = mk.cluster_names[0]
    server = worker_kubeconfig(worker1)["clusters"][0]["cluster"]["server"]
    host, port = server.removeprefix("https://").rsplit(":", 1)
    cut = Cut(host, int(port))
    direct = yaml.safe_dump(worker_kubeconfig(worker1))
    try:
        set_secret_kubeconfig(worker1.name, through(worker1, cut))
        # Tower reads the Secret again at its next look (10 s) and reconnects through the cut.
        eventually(lambda: cut.accepted > 0, MEDIUM_TIMEOUT, f"{mkc} reached through the cut")
        expect_active(mk.manager, mkc, ("True", "Active", "Connected"), MEDIUM_TIMEOUT)
        cut.cut()  # Disconnecting worker1 node's APIServer

        def inactive() -> bool:
            found = condition(mk.manager.get("multikueueclusters", mkc), "Active")
            got = (found.get("status"), found.get("reason"))
            assert got == ("False", "ClientConnectionFailed"), found
            return True

        eventually(inactive, MEDIUM_TIMEOUT, f"{mkc} inactive")
        cut.mend()  # Reconnecting worker1 node's APIServer
        expect_active(mk.manager, mkc, ("True", "Active", "Connected"), LONG_TIMEOUT)
    finally:
        cut.cut()
        set_secret_kubeconfig(worker1.name, direct)
    # Kueue is operational on the worker after the reconnection: q2 is deleted.
    worker1.cluster.delete("clusterqueues", "q2")

    def q2_gone() -> bool:
        try:
            worker1.cluster.get("clusterqueues", "q2")
        except client.ApiException as err:
            return err.status == 404
        return False

    eventually(q2_gone, VERY_LONG_TIMEOUT, "q2 deleted on worker 1")


def _delete_profile(manager: Cluster, name: str) -> None:
    try:
        manager.custom.delete_namespaced_custom_object(*PROFILES[:2], TOWER_NS, PROFILES[2], name)
    except client.ApiException as err:
        if err.status != 404:
            raise


@kueue_case(GO, SEQ + "Connection via ClusterProfile no plugins uses ClusterProfile as way to "
            "connect worker cluster")  # fmt: skip
def test_cluster_profile_no_plugins(seq: MultiKueueSetup, tower: Tower) -> None:
    mk = seq
    install_profile_crd(mk.manager)
    restart_with(tower, configuration({PROFILE_GATE: True}))
    worker3 = generated(mk.manager, "multikueueclusters", {
        "apiVersion": f"{KUEUE}/{V}", "kind": "MultiKueueCluster",
        "metadata": {"generateName": "worker3-"},
        "spec": {"clusterSource": {"clusterProfileRef": {"name": "clusterprofile3-missing"}}}})  # fmt: skip
    try:
        # updating MultiKueueConfig to include worker that use ClusterProfile
        clusters = [*mk.cluster_names, worker3]
        mk.manager.custom.patch_cluster_custom_object(
            KUEUE, V, "multikueueconfigs", mk.config, {"spec": {"clusters": clusters}}
        )
        expect_active(mk.manager, worker3, ("False", "BadClusterProfile",
                      "load client config failed: ClusterProfile.multicluster.x-k8s.io "
                      '"clusterprofile3-missing" not found'), MEDIUM_TIMEOUT)  # fmt: skip
        # creating the missing ClusterProfile
        mk.manager.custom.create_namespaced_custom_object(
            *PROFILES[:2], TOWER_NS, PROFILES[2], profile("clusterprofile3", "clustermanager3")
        )
        eventually(lambda: mk.manager.custom.get_namespaced_custom_object(
            *PROFILES[:2], TOWER_NS, PROFILES[2], "clusterprofile3"), MEDIUM_TIMEOUT,
            "the ClusterProfile exists")  # fmt: skip
        mk.manager.custom.patch_cluster_custom_object(
            KUEUE, V, "multikueueclusters", worker3,
            {"spec": {"clusterSource": {"clusterProfileRef": {"name": "clusterprofile3"}}}},
        )  # fmt: skip
        expect_active(mk.manager, worker3, ("False", "BadClusterProfile",
                      "load client config failed: no access provider configured"),
                      MEDIUM_TIMEOUT)  # fmt: skip
    finally:
        _delete_profile(mk.manager, "clusterprofile3")
        mk.manager.delete("multikueueclusters", worker3, strip_finalizers=True)
        restart_with(tower)


@kueue_case(GO, SEQ + "Connection via ClusterProfile with plugins Should be able to use "
            "ClusterProfile as way to connect worker cluster")  # fmt: skip
def test_cluster_profile_with_plugins(seq: MultiKueueSetup, tower: Tower, tmp_path: Path) -> None:
    """Kueue mounts cluster-inventory-api's secretreader plugin into its manager; here the
    manager's Tower runs the played plugin (tests/e2e/kueue/secretreader_plugin.py), which
    reads the token Secrets in Tower's namespace. Kueue's kind workers' kubeconfigs carry
    tokens; these workers' are certificates, so each token is a ServiceAccount's."""
    mk = seq
    install_profile_crd(mk.manager)
    env = [{"name": "KUBECONFIG",
            "value": str(plugin_kubeconfig(KUBECONFIG or "", tmp_path / "plugin.kubeconfig"))}]  # fmt: skip
    provider = {"name": "secretreader", "execConfig": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
        "args": [str(PLUGIN)], "env": env, "provideClusterInfo": True,
        "interactiveMode": "Never"}}  # fmt: skip
    restart_with(tower, configuration({PROFILE_GATE: True},
                                      clusterProfile={"accessProviders": [provider]}))  # fmt: skip
    secrets = ("multikueue1-cp", "multikueue2-cp")
    core = mk.manager.core
    try:
        # creating secrets with tokens to read from
        for worker, secret in zip(mk.workers, secrets, strict=True):
            core.create_namespaced_secret(TOWER_NS, token_secret(secret, worker_token(worker)))
        # Update existing worker clusters to use ClusterProfiles
        for mkc in mk.cluster_names:
            mk.manager.custom.patch_cluster_custom_object(KUEUE, V, "multikueueclusters", mkc, {
                "spec": {"clusterSource": {"kubeConfig": None,
                                           "clusterProfileRef": {"name": mkc}}}})  # fmt: skip
        # Create ClusterProfiles for existing worker clusters
        for mkc in mk.cluster_names:
            mk.manager.custom.create_namespaced_custom_object(
                *PROFILES[:2], TOWER_NS, PROFILES[2], profile(mkc, "secretreader")
            )
        # Update ClusterProfiles with AccessProviders
        for mkc, worker, secret in zip(mk.cluster_names, mk.workers, secrets, strict=True):
            mk.manager.custom.patch_namespaced_custom_object_status(
                *PROFILES[:2], TOWER_NS, PROFILES[2], mkc,
                {"status": {"accessProviders": [access_provider(worker, secret)]}},
            )  # fmt: skip
        # Check MultiKueueCluster status
        for mkc in mk.cluster_names:
            expect_active(mk.manager, mkc, ("True", "Active", "Connected"), MEDIUM_TIMEOUT)
        # Check AdmissionChecks are active after switching to ClusterProfiles
        wait_active(mk.manager, "admissionchecks", mk.check)
    finally:
        for mkc in mk.cluster_names:
            _delete_profile(mk.manager, mkc)
        for secret in secrets:
            try:
                core.delete_namespaced_secret(secret, TOWER_NS)
            except client.ApiException as err:
                if err.status != 404:
                    raise
        for worker in mk.workers:
            drop_worker_token(worker)
        restart_with(tower)


@kueue_case(GO, SEQ + "MultiKueueOrchestratedPreemption is enabled should not trigger "
            "concurrent preemptions")  # fmt: skip
def test_orchestrated_preemption(seq: MultiKueueSetup, tower: Tower) -> None:
    """Kueue turns MultiKueueOrchestratedPreemption on in the manager and both workers."""
    mk = seq
    gated = configuration({"MultiKueueOrchestratedPreemption": True})
    for worker in mk.workers:
        worker.restart_controller(gated)
    restart_with(tower, gated)
    try:
        low1 = _job(mk, "low-job1", mk.low, "0.1G", "15G")  # fits only in worker1
        eventually(lambda: is_admitted(mk.manager.workload(low1, mk.ns)), TIMEOUT,
                   f"{low1} admitted")  # fmt: skip
        _only_on(mk, low1, 0)
        low2 = _job(mk, "low-job2", mk.low, "1.5G", "5G")  # fits only in worker2
        eventually(lambda: is_admitted(mk.manager.workload(low2, mk.ns)), TIMEOUT,
                   f"{low2} admitted")  # fmt: skip
        _only_on(mk, low2, 1)
        high = _job(mk, "high-job", mk.high, "0.1G", "5G")  # fits in both after preemption

        def admitted_on_one() -> int:
            copies = [w.workload(high, mk.ns) for w in mk.workers]
            assert sum(c is not None for c in copies) == 1, "on exactly one worker"
            index = next(i for i, c in enumerate(copies) if c is not None)
            assert condition(copies[index], "Admitted").get("status") == "True", copies[index]
            return index + 1

        where = eventually(admitted_on_one, MEDIUM_TIMEOUT, f"{high} admitted on one worker") - 1
        evicted, unaffected = (low1, low2) if where == 0 else (low2, low1)
        other = mk.workers[1 - where]

        def untouched() -> bool:
            for wl in (mk.manager.workload(unaffected, mk.ns), other.workload(unaffected, mk.ns)):
                assert is_admitted(wl), wl
                assert not is_evicted(wl), wl
            return True

        consistently(untouched, 5.0, f"{unaffected} stays admitted")

        def requeued() -> bool:
            wl = mk.manager.workload(evicted, mk.ns)
            assert has_quota(wl), wl
            assert not is_admitted(wl), wl
            for worker in mk.workers:
                copy = worker.workload(evicted, mk.ns)
                assert copy is not None, f"{evicted} not on {worker.name}"
                assert not has_quota(copy), copy
            return True

        eventually(requeued, TIMEOUT, f"{evicted} requeued")
    finally:
        for worker in mk.workers:
            worker.restart_controller()
        restart_with(tower)


def _job(mk: MultiKueueSetup, name: str, priority: str, memory: str, storage: str) -> str:
    body = make_job(name, mk.ns, queue=mk.lq, priority_class=priority, requests={
        "cpu": "100m", "memory": memory, "ephemeral-storage": storage})  # fmt: skip
    made = mk.manager.batch.create_namespaced_job(mk.ns, body)
    return mk.manager.workload_for_job(made, mk.ns)


def _only_on(mk: MultiKueueSetup, name: str, index: int) -> None:
    def there() -> bool:
        assert is_admitted(mk.workers[index].workload(name, mk.ns)), name
        assert mk.workers[1 - index].workload(name, mk.ns) is None, name
        return True

    eventually(there, TIMEOUT, f"{name} only on worker {index + 1}")
