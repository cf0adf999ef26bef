"""`make dev-up` and `make dev-down` as a new user runs them, with no cluster (the API double
stands in): everything starts and is ready, the seed's first Job runs and the second waits,
a second dev-up reports what runs, and dev-down removes the webhook configurations and stops
exactly what it started."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

JOB = """apiVersion: batch/v1
kind: Job
metadata:
  generateName: sample-job-
  labels:
    kueue.x-k8s.io/queue-name: user-queue
  annotations:
    tower.dev/sim-duration: {duration}
spec:
  template:
    spec:
      containers:
      - name: worker
        image: busybox:1.36
        resources:
          requests:
            cpu: "3"
            memory: "4Gi"
      restartPolicy: Never
"""


def dev(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "scripts/dev.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def kubectl(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["kubectl", *args], env=env, input=stdin, capture_output=True, text=True, check=True
    )
    return done.stdout


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def test_dev_up_then_the_seed_then_dev_down(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["TOWER_DEV_DIR"] = str(tmp_path / "dev")
    ports = ["--webhook-port", str(free_port()), "--controller-port", str(free_port()),
             "--metrics-port", str(free_port())]  # fmt: skip
    started = dev(env, "up", *ports)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        lines = started.stdout.splitlines()
        assert lines[0].startswith("no cluster given: started the API double")
        assert "applied deploy/crds/ and deploy/rbac/" in lines
        assert "the controller runs as kubernetes-admin; the webhook lets it start Jobs" in lines
        assert any(line.startswith("controller ready (ok: leading)") for line in lines)
        state = json.loads((tmp_path / "dev" / "state.json").read_text())
        again = dev(env, "up", *ports)
        assert again.returncode == 0
        assert again.stdout.startswith("already running: api, webhook, controller")

        user = {**env, "KUBECONFIG": state["kubeconfig"]}
        kubectl(user, "apply", "-f", str(ROOT / "examples" / "quickstart" / "01-queues.yaml"))
        first = kubectl(user, "create", "-f", "-", "-o", "name", stdin=JOB.format(duration="4s"))
        second = kubectl(user, "create", "-f", "-", "-o", "name", stdin=JOB.format(duration="1s"))

        def suspended(name: str) -> bool:
            out = kubectl(user, "get", name, "-o", "jsonpath={.spec.suspend}")
            return out == "true"

        deadline = time.monotonic() + 20
        while suspended(first.strip()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not suspended(first.strip()), "the first Job never started"
        assert suspended(second.strip()), "the second Job must wait for the first"
        deadline = time.monotonic() + 30
        while suspended(second.strip()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not suspended(second.strip()), "the second Job never started"
    finally:
        stopped = dev(env, "down")
    assert stopped.returncode == 0
    assert "removed mutatingwebhookconfiguration tower-mutating-webhook" in stopped.stdout
    assert stopped.stdout.index("removed") < stopped.stdout.index("stopped the controller")
    for name in ("api", "webhook", "controller"):
        assert not alive(state[f"{name}_pid"]), name
    assert not (tmp_path / "dev" / "state.json").exists()
