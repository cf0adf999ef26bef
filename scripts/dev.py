"""`make dev-up` / `make dev-down`: Tower as local processes against a cluster.

up: applies the CRDs and deploy/rbac/ (the tower-system namespace), makes certificates,
starts the webhook allowing the identity the controller will run as (asked of the API server
with a SelfSubjectReview), registers the webhook by URL, starts the controller, and waits
until both are ready. The cluster is the one of --kubeconfig, else $KUBECONFIG, else none:
then the API double (tests/apidouble) is started to stand in for one. Run twice, it says
what already runs.

down: removes the webhook configurations first (so no Job create ever waits on a webhook that
is gone), then stops exactly what `up` started, by pid.

Everything lives in .dev/ (or $TOWER_DEV_DIR): state.json, logs, certificates, the double's
kubeconfig.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STATE_DIR = Path(os.environ.get("TOWER_DEV_DIR") or ROOT / ".dev").resolve()
STATE = STATE_DIR / "state.json"
PYTHON = sys.executable


def shown(path: Path | str) -> str:
    """A path as a user in the repository would type it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def say(text: str) -> None:
    print(text, flush=True)


def fail(text: str) -> int:
    print(f"error: {text}", file=sys.stderr, flush=True)
    return 2


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def load_state() -> dict[str, Any]:
    try:
        return dict(json.loads(STATE.read_text()))
    except (OSError, ValueError):
        return {}


def save_state(state: dict[str, Any]) -> None:
    STATE_DIR.mkdir(exist_ok=True)
    STATE.write_text(json.dumps(state, indent=2) + "\n")


def start(name: str, *args: str) -> int:
    """A background process with its output in .dev/NAME.log; its pid."""
    log = open(STATE_DIR / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it open
    proc = subprocess.Popen(
        [PYTHON, *args], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    return proc.pid


def wait_for(what: str, check: Any, pid: int, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        if not alive(pid):
            return False
        time.sleep(0.25)
    say(f"{what} is not ready after {timeout:.0f}s")
    return False


def http_status(url: str, context: ssl.SSLContext | None = None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=3, context=context) as answer:
            return answer.status, answer.read().decode().strip()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode().strip()
    except (OSError, ssl.SSLError):
        return 0, ""


def kubectl(kubeconfig: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def tail(name: str) -> str:
    try:
        lines = (STATE_DIR / f"{name}.log").read_text().strip().splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-5:])


def up(args: argparse.Namespace) -> int:
    state = load_state()
    running = [n for n in ("api", "webhook", "controller") if alive(state.get(f"{n}_pid"))]
    if running:
        say(f"already running: {', '.join(running)} (make dev-down stops them)")
        return status(state)
    STATE_DIR.mkdir(exist_ok=True)
    state = {}
    kubeconfig = args.kubeconfig or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    if not kubeconfig:
        kubeconfig = str(STATE_DIR / "admin.kubeconfig")
        Path(kubeconfig).unlink(missing_ok=True)
        state["api_pid"] = start("api", "-m", "tests.apidouble", "--kubeconfig", kubeconfig)
        if not wait_for("the API double", lambda: Path(kubeconfig).exists(), state["api_pid"]):
            return fail(f"the API double did not start:\n{tail('api')}")
        say(f"no cluster given: started the API double (kubeconfig {shown(kubeconfig)})")
    state["kubeconfig"] = kubeconfig
    save_state(state)

    for folder in ("deploy/crds/", "deploy/rbac/"):
        done = kubectl(kubeconfig, "apply", "-f", folder)
        if done.returncode != 0:
            return fail(f"kubectl apply -f {folder}: {done.stderr.strip()}")
    say("applied deploy/crds/ and deploy/rbac/")

    from extender.kube.api.client import (
        ConfigError,
        KubeError,
        RequestBudget,
        RestClient,
        load_api_client,
    )
    from extender.kube.api.preflight import whoami

    try:
        client = RestClient(load_api_client(kubeconfig), RequestBudget(5, 10), timeout=10)
        identity = whoami(client)
    except (ConfigError, KubeError) as err:
        return fail(f"cannot ask the API server who {kubeconfig} is: {err}")
    if identity is None:
        return fail("the API server does not answer SelfSubjectReview (Kubernetes 1.28+)")
    say(f"the controller runs as {identity}; the webhook lets it start Jobs")

    certs = STATE_DIR / "certs"
    if not (certs / "tls.crt").exists():
        subprocess.run(
            [
                PYTHON, "-m", "certs", "generate", "--out", str(certs),
                "--dns-name", "localhost", "--ip-address", args.webhook_host,
            ],
            cwd=ROOT, check=True, capture_output=True,
        )  # fmt: skip
    state["webhook_pid"] = start(
        "webhook",
        "-m", "webhook", "--port", str(args.webhook_port),
        "--tls-cert-file", str(certs / "tls.crt"),
        "--tls-private-key-file", str(certs / "tls.key"),
        "--controller-username", identity,
        "--workers", "1",
    )  # fmt: skip
    save_state(state)
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    webhook_url = f"https://{args.webhook_host}:{args.webhook_port}"
    if not wait_for(
        "the webhook",
        lambda: http_status(f"{webhook_url}/readyz", context)[0] == 200,
        state["webhook_pid"],
    ):
        return fail(f"the webhook did not start:\n{tail('webhook')}")
    registered = subprocess.run(
        [
            PYTHON, "-m", "certs", "install", "--kubeconfig", kubeconfig,
            "--url", webhook_url, "--certs-dir", str(certs),
        ],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if registered.returncode != 0:
        return fail(f"registering the webhook: {registered.stderr.strip()}")
    say(f"webhook serving {webhook_url}, registered with the API server")

    state["controller_pid"] = start(
        "controller",
        "-m", "extender", "run", "--kubeconfig", kubeconfig,
        "--health-address", f"127.0.0.1:{args.controller_port}",
        "--metrics-address", f"127.0.0.1:{args.metrics_port}",
    )  # fmt: skip
    save_state(state)
    ready = f"http://127.0.0.1:{args.controller_port}/readyz"
    if not wait_for(
        "the controller", lambda: http_status(ready)[0] == 200, state["controller_pid"]
    ):
        return fail(
            f"the controller is not ready ({http_status(ready)[1] or 'exited'}):\n"
            f"{tail('controller')}\n(make dev-down stops what was started)"
        )
    state.update(webhook_url=webhook_url, controller_port=args.controller_port)
    save_state(state)
    metrics = f"https://127.0.0.1:{args.metrics_port}/metrics"
    say(f"controller ready ({http_status(ready)[1]}); metrics on {metrics}")
    logs = shown(STATE_DIR)
    say(f"logs: {logs}/webhook.log, {logs}/controller.log; stop with make dev-down")
    if "api_pid" in state:
        say(f"the API double stands in for a cluster: export KUBECONFIG={shown(kubeconfig)}")
    return 0


def status(state: dict[str, Any]) -> int:
    for name in ("api", "webhook", "controller"):
        pid = state.get(f"{name}_pid")
        if pid:
            say(f"  {name}: pid {pid}, {'running' if alive(pid) else 'not running'}")
    if state.get("kubeconfig"):
        say(f"  kubeconfig: {state['kubeconfig']}")
    return 0


def down(_: argparse.Namespace) -> int:
    state = load_state()
    if not state:
        say("nothing to stop (no .dev/state.json)")
        return 0
    kubeconfig = state.get("kubeconfig")
    reachable = "api_pid" not in state or alive(state.get("api_pid"))  # a cluster, or our double
    if kubeconfig and reachable:
        for kind, name in (
            ("mutatingwebhookconfiguration", "tower-mutating-webhook"),
            ("validatingwebhookconfiguration", "tower-validating-webhook"),
        ):
            done = kubectl(kubeconfig, "delete", kind, name, "--ignore-not-found")
            if done.returncode != 0:
                say(f"could not remove {kind} {name}: {done.stderr.strip()}")
            elif done.stdout.strip():
                say(f"removed {kind} {name}")
    for name in ("controller", "webhook", "api"):
        pid = state.get(f"{name}_pid")
        if not alive(pid):
            continue
        os.kill(pid, signal.SIGTERM)
        for _ in range(60):
            if not alive(pid):
                break
            time.sleep(0.25)
        else:
            os.kill(pid, signal.SIGKILL)
        say(f"stopped the {name} (pid {pid})")
    STATE.unlink(missing_ok=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/dev.py", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    up_parser = commands.add_parser("up", help="start the webhook and the controller")
    up_parser.add_argument("--kubeconfig", help="(default: $KUBECONFIG, else the API double)")
    up_parser.add_argument("--webhook-port", type=int, default=9443)
    up_parser.add_argument(
        "--webhook-host",
        default="127.0.0.1",
        help="the address kube-apiserver reaches this machine at (kind: the docker network's "
        "gateway)",
    )
    up_parser.add_argument("--controller-port", type=int, default=8081)
    up_parser.add_argument(
        "--metrics-port", type=int, default=8443, help="the controller's /metrics, over HTTPS"
    )
    commands.add_parser("down", help="stop them, and remove the webhook configurations first")
    commands.add_parser("status", help="what runs")
    args = parser.parse_args(argv)
    if args.command == "up":
        return up(args)
    if args.command == "down":
        return down(args)
    return status(load_state())


if __name__ == "__main__":
    sys.exit(main())
