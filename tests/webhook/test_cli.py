"""`python -m webhook`: flags, environment variables, and clear refusals."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import free_port, generate
from webhook.settings import from_args

ROOT = Path(__file__).resolve().parents[2]


def run_webhook(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    """`python -m webhook ARGS` to its end, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "webhook", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=30,  # a server that starts instead of refusing fails the test, not CI
        **kwargs,
    )


@pytest.fixture(scope="module")
def tls_flags(tmp_path_factory):
    certs = tmp_path_factory.mktemp("certs")
    generate(certs)
    return [
        "--tls-cert-file",
        str(certs / "tls.crt"),
        "--tls-private-key-file",
        str(certs / "tls.key"),
    ]


def test_help_documents_every_flag():
    proc = run_webhook("--help")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for flag in (
        "--port",
        "--bind-address",
        "--tls-cert-file",
        "--tls-private-key-file",
        "--workers",
        "--threads",
        "--controller-username",
        "--manage-jobs-without-queue-name",
        "--unmanaged-namespaces",
        "--max-body-bytes",
    ):
        assert flag in out
    assert "TOWER_WEBHOOK_TLS_CERT_FILE" in out


def test_environment_variables_set_the_defaults(monkeypatch):
    monkeypatch.setenv("TOWER_WEBHOOK_PORT", "10443")
    monkeypatch.setenv("TOWER_WEBHOOK_MANAGE_JOBS_WITHOUT_QUEUE_NAME", "team-a, team-b")
    monkeypatch.setenv("TOWER_WEBHOOK_CONTROLLER_USERNAME", "system:serviceaccount:x:tower")
    settings = from_args([])
    assert settings.port == 10443
    assert settings.manage_jobs_without_queue_name == {"team-a", "team-b"}
    assert settings.controller_usernames == {"system:serviceaccount:x:tower"}
    assert from_args(["--port", "9443"]).port == 9443  # a flag wins over the environment


def test_a_missing_certificate_is_one_line_and_exit_2(tmp_path):
    proc = run_webhook(
        "--tls-cert-file",
        str(tmp_path / "none.crt"),
        "--tls-private-key-file",
        str(tmp_path / "none.key"),
    )
    assert proc.returncode == 2
    assert proc.stderr == f"error: --tls-cert-file {tmp_path / 'none.crt'}: no such file\n"


def test_a_malformed_environment_variable_is_one_clear_line():
    proc = run_webhook(env=dict(os.environ, TOWER_WEBHOOK_PORT="abc"))
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        "python -m webhook: error: argument --port: 'abc' is not a whole number "
        "(from --port or TOWER_WEBHOOK_PORT)"
    )
    assert "Traceback" not in proc.stderr


def test_an_address_in_use_is_one_line_and_exit_2_not_a_hang(tls_flags):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        # gunicorn alone would respawn workers that cannot bind, forever: run_webhook's
        # timeout would end the test.
        proc = run_webhook(
            "--bind-address",
            "127.0.0.1",
            "--port",
            str(port),
            *tls_flags,
        )
    finally:
        taken.close()
    assert proc.returncode == 2
    assert proc.stderr == f"error: cannot listen on 127.0.0.1:{port}: Address already in use\n"


def test_a_metrics_directory_that_cannot_be_made_is_one_line_and_exit_2(tmp_path, tls_flags):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = run_webhook(
        *tls_flags,
        "--port",
        str(free_port()),
        env=dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(blocker / "metrics")),
    )
    assert proc.returncode == 2
    assert (
        proc.stderr == f"error: PROMETHEUS_MULTIPROC_DIR {blocker / 'metrics'}: Not a directory\n"
    )


def test_a_port_above_65535_is_refused_by_name(tls_flags):
    proc = run_webhook(*tls_flags, "--port", "70000")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        "python -m webhook: error: argument --port: must be at most 65535, got 70000 "
        "(--port or TOWER_WEBHOOK_PORT)"
    )


def test_a_certificate_and_key_that_do_not_load_are_one_line_not_a_failing_server(
    tmp_path, tls_flags
):
    other = tmp_path / "other"
    generate(other)  # a second pair: its key does not match the first certificate
    cert = tls_flags[1]
    proc = run_webhook(
        "--tls-cert-file", cert, "--tls-private-key-file", str(other / "tls.key"), "--port", "1"
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(
        f"error: --tls-cert-file {cert} and --tls-private-key-file {other / 'tls.key'} are not "
        "a PEM certificate and its key: [X509: KEY_VALUES_MISMATCH] key values mismatch"
    )


CONFIG = (
    "apiVersion: config.kueue.x-k8s.io/v1beta2\n"
    "kind: Configuration\n"
    "manageJobsWithoutQueueName: true\n"
    "integrations:\n"
    "  frameworks: [batch/job]\n"
)


def test_the_config_file_sets_what_no_flag_gave(tmp_path, monkeypatch):
    """Kueue's Configuration, the controller's file: manageJobsWithoutQueueName manages
    every namespace the API server sends (the hooks' namespaceSelector picks them) and
    integrations.frameworks the kinds; a flag or its variable still wins."""
    monkeypatch.delenv("TOWER_INTEGRATIONS", raising=False)
    monkeypatch.delenv("TOWER_WEBHOOK_MANAGE_JOBS_WITHOUT_QUEUE_NAME", raising=False)
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    settings = from_args(["--config", str(config)])
    assert settings.manage_jobs_without_queue_name == {"*"}
    assert settings.integrations == ("batch/job",)
    assert settings.manages_unlabelled("team-a")
    assert not settings.manages_unlabelled("kube-system")  # --unmanaged-namespaces still hold
    assert not settings.manages("jobset.x-k8s.io/jobset")
    flagged = from_args(["--config", str(config), "--manage-jobs-without-queue-name", "team-b"])
    assert flagged.manage_jobs_without_queue_name == {"team-b"}
    monkeypatch.setenv("TOWER_CONFIG", str(config))
    assert from_args([]).manage_jobs_without_queue_name == {"*"}  # the controller's variable


def test_a_bad_config_file_is_one_line_and_exit_2(tmp_path, tls_flags):
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.replace("batch/job", "batch/jobs"))
    proc = run_webhook(*tls_flags, "--config", str(config))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: --config {config}: integrations.frameworks[0]: ")
    assert proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr
