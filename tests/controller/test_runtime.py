"""`python -m extender run` as an admin runs it: health, readiness, metrics (over HTTPS, to
whom the API server authenticates and allows), JSON logs, SIGTERM."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.controller.conftest import CONTROLLER_USER, controller_process, eventually
from tests.controller.test_rbac import BASIC_USER
from tests.controller.test_seed import CQ, FLAVOR, LQ
from tests.scrape import get as get_https
from tests.scrape import metrics_port, scrape


def get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_health_metrics_json_logs_and_a_clean_stop(cluster):
    cluster.apply(FLAVOR, CQ, LQ)
    proc = controller_process(cluster, "--no-leader-elect", "--log-format", "json")
    try:
        port = int(proc.stdout.readline().decode().split()[-1])
        assert get(port, "/healthz") == (200, "ok\n")
        secure = metrics_port(proc)
        eventually(lambda: get(port, "/readyz")[0] == 200, what="caches synced")
        assert get(port, "/metrics")[0] == 404  # the health port is open: no metrics there
        job = cluster.job("metered", "1", duration="600s")
        eventually(
            lambda: cluster.get("jobs", "metered", "default")["spec"]["suspend"] is False,
            what="the job to start",
        )
        metrics = scrape(secure)
        assert (
            'kueue_admitted_workloads_total{cluster_queue="cluster-queue",priority_class="",'
            'replica_role="standalone"} 1.0' in metrics
        )
        assert "kueue_admission_attempt_duration_seconds_bucket" in metrics
        reserving = (
            'kueue_reserving_active_workloads{cluster_queue="cluster-queue",'
            'replica_role="standalone"} 1.0'
        )
        eventually(lambda: reserving in scrape(secure), what="the reserving gauge")
        assert (
            'kueue_cluster_queue_status{cluster_queue="cluster-queue",replica_role="standalone",'
            'status="active"} 1.0' in scrape(secure)
        )
        assert (
            'tower_kube_api_writes_total{resource="workloads",verb="status-admit"} 1.0' in metrics
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = [json.loads(line) for line in proc.stdout.read().decode().splitlines() if line]
    assert all({"ts", "level", "logger", "msg"} <= set(line) for line in lines)
    workload = cluster.workload_of(job)["metadata"]["name"]
    assert any(f"default/{workload}" in line["msg"] for line in lines)
    assert any("shutting down" in line["msg"] for line in lines)


def test_a_taken_health_port_is_one_line_and_exit_2(cluster):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    address = f"127.0.0.1:{taken.getsockname()[1]}"
    proc = controller_process(cluster, "--no-leader-elect", "--health-address", address)
    try:
        assert proc.wait(timeout=30) == 2
    finally:
        taken.close()
        if proc.poll() is None:
            proc.kill()
    assert proc.stdout.read().decode() == (
        f"error: cannot serve /healthz and /readyz on {address}: Address already in use\n"
    )


def test_a_health_address_without_a_port_is_refused_by_name():
    proc = subprocess.run(
        [sys.executable, "-m", "extender", "run", "--health-address", "localhost"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=30,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        "python -m extender run: error: argument --health-address: 'localhost' is not "
        "host:port (port 0 picks a free one)"
    )
    assert "Traceback" not in proc.stderr


def run_controller(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "extender", "run", *args],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (["--kube-api-qps", "0"], "argument --kube-api-qps: '0' is not a number above 0"),
        (["--kube-api-qps", "nan"], "argument --kube-api-qps: 'nan' is not a number above 0"),
        (
            ["--kube-api-burst", "0"],
            "argument --kube-api-burst: '0' is not a whole number of at least 1",
        ),
        (["--event-qps", "-1"], "argument --event-qps: '-1' is not a number above 0"),
        (["--status-interval", "0"], "argument --status-interval: '0' is not a number above 0"),
        (
            ["--pending-status-qps", "x"],
            "argument --pending-status-qps: 'x' is not a number above 0",
        ),
        (["--lease-duration", "-5"], "argument --lease-duration: '-5' is not a number above 0"),
        (
            ["--log-level", "loud"],
            "argument --log-level: invalid choice: 'loud' (choose from 'debug', 'info', "
            "'warning', 'error')",
        ),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_a_bad_flag_is_refused_by_name_without_a_traceback(args, want):
    proc = run_controller(*args)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == f"python -m extender run: error: {want}"
    assert "Traceback" not in proc.stderr


def test_leader_election_timings_must_nest():
    proc = run_controller("--lease-duration", "5")  # shorter than the renew deadline (10)
    assert proc.returncode == 2
    assert proc.stderr == (
        "error: --lease-duration must be longer than --renew-deadline, and that longer than "
        "--retry-period (got 5, 10, 2)\n"
    )


@pytest.mark.parametrize(
    ("content", "want"),
    [
        (
            "just text\n",
            "{path} is not a kubeconfig (a YAML mapping of clusters, users and contexts)",
        ),
        ("a: [1,\n", "while parsing a flow node"),
    ],
    ids=["not a mapping", "not YAML"],
)
def test_a_file_that_is_not_a_kubeconfig_is_one_line_and_exit_2(tmp_path, content, want):
    path = tmp_path / "kubeconfig"
    path.write_text(content)
    proc = run_controller("--kubeconfig", str(path))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(
        "error: cannot load the Kubernetes configuration: " + want.format(path=path)
    )


def test_metrics_are_served_to_whom_the_api_server_allows_and_refused_to_others(cluster):
    """As Kueue's: an anonymous scrape is 401, a token without `get` on /metrics is 403
    naming its user, a token with it is served; kube-apiserver decides (TokenReview,
    SubjectAccessReview), asked with the controller's own identity."""
    reader = "system:serviceaccount:monitoring:prometheus-k8s"
    nobody = "system:serviceaccount:monitoring:nobody"
    cluster.api.users["prometheus-token"] = {"username": reader, "groups": []}
    cluster.api.users["nobody-token"] = {"username": nobody, "groups": []}
    cluster.api.rbac[reader] = [*BASIC_USER, {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    cluster.api.rbac[nobody] = list(BASIC_USER)
    proc = controller_process(cluster, "--no-leader-elect")
    try:
        port = metrics_port(proc)
        assert get_https(port, token=None) == (
            401,
            '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
            '"message":"Unauthorized","reason":"Unauthorized","code":401}\n',
        )
        status, body = get_https(port, token="nobody-token")
        assert (status, json.loads(body)["message"]) == (
            403,
            f'forbidden: User "{nobody}" cannot get path "/metrics"',
        )
        assert "tower_kube_api_writes_total" in scrape(port, token="prometheus-token")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
    reviews = [
        (path.rsplit("/", 1)[-1], user)
        for method, path, user in cluster.api.requests
        if method == "POST" and path.endswith(("/tokenreviews", "/subjectaccessreviews"))
    ]
    assert sorted(set(reviews)) == [
        ("subjectaccessreviews", CONTROLLER_USER),
        ("tokenreviews", CONTROLLER_USER),
    ]


def test_a_taken_metrics_port_is_one_line_and_exit_2(cluster):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    address = f"127.0.0.1:{taken.getsockname()[1]}"
    proc = controller_process(cluster, "--no-leader-elect", "--metrics-address", address)
    try:
        assert proc.wait(timeout=30) == 2
    finally:
        taken.close()
        if proc.poll() is None:
            proc.kill()
    assert proc.stdout.read().decode().splitlines()[-1] == (
        f"error: cannot serve /metrics on {address}: Address already in use"
    )
