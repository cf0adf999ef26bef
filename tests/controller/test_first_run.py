"""A new user's first run, against the API double: whatever is missing (the CRDs, the lease's
namespace, a permission, the controller's identity in the webhook) is one line that says
what to do, never a silent loop or a stuck Job."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.apidouble import ApiDouble
from tests.controller.conftest import (
    CONTROLLER_USER,
    CRDS,
    ROOT,
    controller_process,
    eventually,
)
from tests.controller.test_faults import ready, running, stop
from tests.controller.test_rbac import BASIC_USER, documents
from tests.controller.test_seed import CQ, FLAVOR, LQ
from tests.scrape import metrics_port, scrape
from tests.waiting import event_reasons, wait_until


def controller_exit(kubeconfig: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "extender",
            "run",
            "--kubeconfig",
            kubeconfig,
            "--health-address",
            "127.0.0.1:0",
            "--metrics-address",
            "127.0.0.1:0",
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def rules_of_deploy_rbac(*, but: tuple[str, str] | None = None) -> list[dict]:
    """The controller's rules from deploy/rbac/controller.yaml (the Role's bound to its
    namespace), with every authenticated user's, less one (resource, verb) if asked."""
    docs = documents()
    cluster_rules = next(d for d in docs if d["kind"] == "ClusterRole")["rules"]
    lease_rules = [
        {**rule, "namespaces": ["tower-system"]}
        for rule in next(d for d in docs if d["kind"] == "Role")["rules"]
    ]
    rules = []
    for rule in cluster_rules + lease_rules + BASIC_USER:
        if but is not None and but[0] in rule["resources"] and but[1] in rule["verbs"]:
            rule = {**rule, "verbs": [v for v in rule["verbs"] if v != but[1]]}
        rules.append(rule)
    return rules


def test_without_kueues_crds_the_controller_says_to_apply_them(tmp_path):
    api = ApiDouble()
    api.start()
    try:
        config = api.kubeconfig(str(tmp_path / "k"), token="tower", username=CONTROLLER_USER)
        result = controller_exit(config)
    finally:
        api.stop()
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "error: Kueue's CRDs are not installed: the API server does not serve "
        "kueue.x-k8s.io/v1beta2; apply them with kubectl apply -f deploy/crds/"
    )
    assert "Traceback" not in result.stderr


def test_a_missing_kueue_crd_among_the_others_is_named(tmp_path):
    """Some of Kueue's CRDs applied, not all (an older or partial install): the controller
    must not wait forever on the watch of the missing kind."""
    from kubernetes import config as k8s_config

    from extender.kube.api.client import RequestBudget, RestClient
    from extender.kube.generators.crds import custom_resource_definitions

    api = ApiDouble()
    api.start()
    try:
        admin = RestClient(
            k8s_config.new_client_from_config(config_file=api.kubeconfig(str(tmp_path / "a"))),
            RequestBudget(1000, 1000),
        )
        for crd in custom_resource_definitions():
            if crd["metadata"]["name"] != "workloads.kueue.x-k8s.io":
                admin.create(CRDS, crd)
        config = api.kubeconfig(str(tmp_path / "k"), token="tower", username=CONTROLLER_USER)
        result = controller_exit(config)
    finally:
        api.stop()
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "error: Kueue's CRDs are only partly installed: the API server does not serve "
        "workloads.kueue.x-k8s.io; apply them with kubectl apply -f deploy/crds/"
    )


@pytest.fixture
def bare(tmp_path):
    """A double with Tower's CRDs and nothing else: no tower-system namespace, no webhook."""
    from extender.kube.api.client import RequestBudget, RestClient
    from extender.kube.generators.crds import custom_resource_definitions

    api = ApiDouble()
    api.start()
    from kubernetes import config as k8s_config

    admin = RestClient(
        k8s_config.new_client_from_config(config_file=api.kubeconfig(str(tmp_path / "admin"))),
        RequestBudget(1000, 1000),
    )
    for crd in custom_resource_definitions():
        admin.create(CRDS, crd)
    yield api, api.kubeconfig(str(tmp_path / "tower"), token="tower", username=CONTROLLER_USER)
    api.stop()


def test_a_missing_lease_namespace_is_created_when_allowed(bare):
    api, config = bare
    proc = controller_process_for(config)
    try:
        eventually(lambda: api.get("namespaces", "tower-system"), what="the namespace")
        lease = eventually(
            lambda: api.get("leases", "tower-controller", "tower-system"), what="the lease"
        )
        assert lease["spec"]["holderIdentity"].endswith(f"_{proc.pid}")
    finally:
        log = stop(proc)
    assert "created namespace tower-system for the leader-election lease" in log


def test_a_missing_lease_namespace_that_may_not_be_created_is_one_line_and_exit_2(bare):
    api, config = bare
    api.rbac[CONTROLLER_USER] = rules_of_deploy_rbac()  # may not create namespaces
    result = controller_exit(config)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "error: the leader-election namespace tower-system does not exist and this identity "
        "may not create it: create it (kubectl create namespace tower-system), or apply "
        "deploy/rbac/ which creates it with the controller's permissions"
    )
    assert "Traceback" not in result.stderr


def test_a_missing_permission_is_named_with_the_fix(bare):
    api, config = bare
    api.rbac[CONTROLLER_USER] = rules_of_deploy_rbac(but=("workloads/status", "patch"))
    result = controller_exit(config)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"error: {CONTROLLER_USER} may not patch workloads.kueue.x-k8s.io/status: apply "
        "deploy/rbac/controller.yaml (or bind the ClusterRole tower-controller to it)"
    )


def test_rbac_from_before_placement_is_named_with_both_fixes(bare):
    api, config = bare
    api.rbac[CONTROLLER_USER] = rules_of_deploy_rbac(but=("pods", "watch"))
    result = controller_exit(config)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"error: {CONTROLLER_USER} may not watch nodes, watch pods: apply "
        "deploy/rbac/controller.yaml (or bind the ClusterRole tower-controller to it), or run "
        "without accelerator placement: --physical-resources=none and without Kueue's pod "
        "integration (--integrations)"
    )
    # ... and without placement nor plain pods, the same identity runs.
    api._create_now("namespaces", {"metadata": {"name": "tower-system"}})
    proc = controller_process_for(
        config, "--physical-resources=none", "--integrations=batch/job,jobset.x-k8s.io/jobset"
    )
    try:
        port = int(proc.stdout.readline().decode().split()[-1])
        eventually(lambda: ready(port)[0] == 200, what="ready without placement")
    finally:
        stop(proc)


def test_deploy_rbac_is_enough_to_run(bare):
    api, config = bare
    api.rbac[CONTROLLER_USER] = rules_of_deploy_rbac()
    api._create_now("namespaces", {"metadata": {"name": "tower-system"}})
    proc = controller_process_for(config)
    try:
        port = int(proc.stdout.readline().decode().split()[-1])
        eventually(lambda: ready(port)[0] == 200, what="ready")
        assert ready(port) == (200, "ok: leading\n")
    finally:
        log = stop(proc)
    assert "error" not in log.lower(), log


def controller_process_for(config: str, *extra: str):
    class Cluster:
        controller_config = config

    return controller_process(
        Cluster,
        "--lease-duration",
        "2",
        "--renew-deadline",
        "1.5",
        "--retry-period",
        "0.2",
        *extra,
    )  # type: ignore[arg-type]


def test_the_controller_running_as_another_identity_than_the_webhook_allows(cluster):
    """The README's first path, with the controller started on the admin's kubeconfig: the
    webhook (allowing only Tower's service account) keeps its start suspended. Said once,
    with the fix; the Workload says why its Job does not run."""
    cluster.apply(FLAVOR, CQ, LQ)
    proc = controller_process(cluster, "--no-leader-elect", kubeconfig=cluster.admin_config)
    try:
        port = metrics_port(proc)
        job = cluster.job("first", "3", duration="600s")
        workload = wait_until(
            lambda: _pods_ready(cluster.workload_of(job)), what="the Workload to say why"
        )
        assert workload["status"] == "False"
        assert workload["reason"] == "WaitForStart"
        assert not running(cluster, "first")
        # The Events are sent by the recorder's own thread: they may land after the condition.
        wait_until(
            lambda: {(kind, reason) for kind, _, reason in event_reasons(cluster.api)},
            lambda events: {("Job", "JobStartRefused"), ("Workload", "JobStartRefused")} <= events,
            what="the JobStartRefused Events on the Job and on its Workload",
        )
        wait_until(
            lambda: metric_lines(port, "tower_job_start_refused_total"),
            lambda lines: "tower_job_start_refused_total 1.0" in lines,
            what="tower_job_start_refused_total 1.0",
        )
    finally:
        log = stop(proc)
    errors = [line for line in log.splitlines() if " ERROR " in line]
    want = (
        "the admission webhook kept Job default/first suspended although its Workload is "
        "admitted: start the webhook with --controller-username kubernetes-admin (the identity "
        "this controller runs as); Tower tries again in 30s"
    )
    assert len(errors) == 1, errors
    assert errors[0].endswith(want)
    assert workload["message"] == want


def metric_lines(port: int, name: str) -> list[str]:
    """The samples of one metric, as the controller's /metrics serves them now."""
    return [line for line in scrape(port).splitlines() if line.startswith(name)]


def _pods_ready(workload):
    for condition in ((workload or {}).get("status") or {}).get("conditions") or []:
        if condition["type"] == "PodsReady":
            return condition
    return None
