"""UpdateKueueConfigurationAndRestart for the Configuration fields the webhook acts on too.

Kueue's manager is one process: its webhook restarts with the controller and reads the same
Configuration. Tower's webhook is its own process that reads the controller's file
(manageJobsWithoutQueueName, integrations), and its registrations are written from the file
(`python -m certs install --config`); a case that changes those fields restarts both, and
puts the suite's back after."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator

import yaml

from tests.e2e.conftest import KUBECONFIG, webhook_host_port
from tests.e2e.kueue.restarts import restart_with
from tests.e2e.kueue.util import CONFIGURATION, ROOT, Tower, _listening, eventually


def configuration_with(**fields: object) -> str:
    """The suite's Configuration with these top-level fields set (None: removed)."""
    document = yaml.safe_load(CONFIGURATION)
    for key, value in fields.items():
        if value is None:
            document.pop(key, None)
        else:
            document[key] = value
    return yaml.safe_dump(document)


def restart_webhook(tower: Tower, configuration: str) -> None:
    """The webhook stopped and started again on the same port with `configuration`, and its
    registrations written from it (which kinds, which namespaces, unlabelled jobs or not)."""
    webhook = tower.procs[0]
    webhook.send_signal(signal.SIGTERM)
    try:
        webhook.wait(timeout=20)
    except subprocess.TimeoutExpired:
        webhook.kill()
    config = tower.tmp / "webhook-config.yaml"
    config.write_text(configuration)
    host, port = webhook_host_port()
    eventually(lambda: not _listening(host, port), 20, "the old webhook to stop listening")
    log = open(tower.tmp / "webhook.log", "ab")  # noqa: SIM115 (the child keeps it)
    tower.procs[0] = subprocess.Popen(
        [str(a) for a in webhook.args], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT
    )
    eventually(lambda: _listening(host, port), 30, "the webhook to listen")
    subprocess.run(
        [sys.executable, "-m", "certs", "install", "--kubeconfig", KUBECONFIG or "",
         "--url", f"https://{host}:{port}", "--certs-dir", str(tower.tmp / "certs"),
         "--config", str(config)],
        cwd=ROOT, check=True, capture_output=True,
    )  # fmt: skip


def restarted(tower: Tower, configuration: str) -> Iterator[None]:
    """Kueue's BeforeAll UpdateKueueConfigurationAndRestart for the webhook and the
    controller; the suite's Configuration back for both afterwards (its AfterAll)."""
    restart_webhook(tower, configuration)
    try:
        restart_with(tower, configuration)
        yield
    finally:
        restart_webhook(tower, CONFIGURATION)
        tower.restart_controller()
