"""Every command in README.md and docs/ is run: here, against the API double (`tested=run`),
by `make e2e` against a real cluster (`tested=e2e`, tests/e2e/test_docs.py), or by what
runs it (`tested=ci`: .ci/run; `tested=dev-up`: scripts/dev.py, run by tests/test_dev.py).
YAML blocks (`tested=file`) must parse. A fenced block without a `tested=` tag fails.

A console block's `$` lines are run in order; the lines shown under a command must appear in
its output, compared without the things that differ from run to run (generated names, ages,
ports, column widths), so the README can show a real cluster's output while this runs
against the double.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests import yamlc
from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
VENV_BIN = str(Path(sys.executable).parent)


@dataclass
class Block:
    doc: Path
    language: str
    tag: str
    text: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"

    def commands(self) -> list[tuple[str, list[str]]]:
        """(command, the output lines shown under it)."""
        if self.language == "console":
            out: list[tuple[str, list[str]]] = []
            for line in self.text.splitlines():
                if line.startswith("$ "):
                    out.append((line[2:], []))
                elif out and line.strip():
                    out[-1][1].append(line)
            return out
        return [
            (line.split("  #")[0].strip(), [])
            for line in self.text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        ]


def blocks() -> list[Block]:
    found = []
    for doc in DOCS:
        text = doc.read_text()
        for match in FENCE.finditer(text):
            language, info, body = match.groups()
            tag = re.search(r"tested=([\w-]+)", info)
            line = text[: match.start()].count("\n") + 1
            found.append(Block(doc, language, tag.group(1) if tag else "", body, line))
    return found


ALL = blocks()


def test_every_block_says_how_it_is_tested():
    untagged = [b.where for b in ALL if not b.tag and b.language != "text"]
    assert untagged == []
    assert {b.tag for b in ALL} <= {"", "ci", "run", "e2e", "dev-up", "file"}


def test_the_two_commands_are_what_ci_runs():
    (block,) = [b for b in ALL if b.tag == "ci"]
    assert block.doc.name == "README.md"
    assert [c for c, _ in block.commands()] == ["bash scripts/demo.sh", "bash scripts/test.sh"]
    assert "exec bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


@pytest.mark.parametrize("block", [b for b in ALL if b.tag == "file"], ids=lambda b: b.where)
def test_the_yaml_shown_parses(block):
    assert [d for d in yamlc.safe_load_all(block.text) if d]


def test_what_dev_up_is_said_to_run_is_what_it_runs():
    source = (ROOT / "scripts" / "dev.py").read_text()
    for block in (b for b in ALL if b.tag == "dev-up"):
        for command, _ in block.commands():
            words = shlex.split(command)
            program = words[2] if words[:2] == ["python", "-m"] else " ".join(words[:3])
            assert program in source, f"{block.where}: dev.py does not run {command}"
            for flag in (w for w in words if w.startswith("--")):
                assert flag in source, f"{block.where}: dev.py does not pass {flag}"


# ----- running the blocks against the double ---------------------------------------------

NAME = re.compile(r"\b(sample-job)-[bcdfghjklmnpqrstvwxz2456789]{5}\b")
HASH = re.compile(r"\b(job-[a-z0-9*-]+?)-[0-9a-f]{5}\b")
TIME = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\b")
AGE = re.compile(r"\b\d+(ms|s|m|h)\b")
PORT = re.compile(r"127\.0\.0\.1:\d+")


@dataclass
class Shell:
    """Commands run as a user would, in the repository, against a dev-up's API double."""

    env: dict[str, str]
    dev_dir: Path
    ports: list[str] = field(default_factory=list)

    def translate(self, command: str) -> str:
        command = command.replace(".venv/bin/python", sys.executable)
        makefile = (ROOT / "Makefile").read_text()
        for target, script in (("dev-up", "up"), ("dev-down", "down")):
            if command == f"make {target}":
                assert f"scripts/dev.py {script}" in makefile  # make X runs exactly this
                return f"{sys.executable} scripts/dev.py {script}" + (
                    f" {' '.join(self.ports)}" if script == "up" else ""
                )
        return command

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            self.translate(command),
            shell=True,
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        double = self.dev_dir / "admin.kubeconfig"  # made only when dev-up starts the double
        if "scripts/dev.py up" in self.translate(command) and double.exists():
            self.env["KUBECONFIG"] = str(double)
        return done

    def normal(self, text: str) -> list[str]:
        text = text.replace(str(self.dev_dir), ".dev").replace(str(ROOT) + "/", "")
        lines = []
        for line in text.splitlines():
            line = HASH.sub(r"\1-*", NAME.sub(r"\1-*", line))
            line = PORT.sub("127.0.0.1:PORT", AGE.sub("N", TIME.sub("TIME", line)))
            lines.append(" ".join(line.split()))
        return [line for line in lines if line]


@pytest.fixture
def shell(tmp_path):
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    dev_dir = tmp_path / "dev"
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(TOWER_DEV_DIR=str(dev_dir), PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}")
    sh = Shell(env, dev_dir, ["--webhook-port", str(free_port()), "--controller-port",
                              str(free_port()), "--metrics-port", str(free_port())])  # fmt: skip
    yield sh
    subprocess.run(
        [sys.executable, "scripts/dev.py", "down"], cwd=ROOT, env=env, capture_output=True
    )


def run_block(shell: Shell, block: Block, timeout: float = 60) -> None:
    for command, shown in block.commands():
        deadline = time.monotonic() + timeout
        while True:  # outputs that settle (a pending reason, a status) are asked again
            done = shell.run(command)
            have = set(shell.normal(done.stdout + done.stderr))
            missing = [line for line in shell.normal("\n".join(shown)) if line not in have]
            if done.returncode == 0 and not missing:
                break
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{block.where}: `{command}` exited {done.returncode}; not in its output: "
                    f"{missing}\n--- output ---\n{done.stdout}{done.stderr}"
                )
            time.sleep(1)


def test_the_readme_quick_start(shell):
    for block in (b for b in ALL if b.doc.name == "README.md" and b.tag == "run"):
        run_block(shell, block)


def test_every_run_block_is_in_a_document_a_test_runs():
    run_here = {
        "README.md",
        "simulator.md",
        "placement.md",
        "operations.md",
        "why-pending.md",
        "kueue.md",
    }
    assert {b.doc.name for b in ALL if b.tag == "run"} <= run_here


def test_the_simulator_commands(shell):
    docs = ("simulator.md", "placement.md")
    for block in (b for b in ALL if b.doc.name in docs and b.tag == "run"):
        run_block(shell, block)


def test_the_conformance_suite_command(shell):
    for block in (b for b in ALL if b.doc.name == "kueue.md" and b.tag == "run"):
        run_block(shell, block)


def test_why_is_my_job_pending(shell):
    for block in (b for b in ALL if b.doc.name == "why-pending.md" and b.tag == "run"):
        run_block(shell, block)


def test_uninstalling_and_releasing_a_job_by_hand(shell):
    """As docs/operations.md says: the webhook configurations go first, then the rest; a
    queued Job stays suspended, and is released by hand."""
    blocks_here = [b for b in ALL if b.doc.name == "operations.md" and b.tag == "run"]
    assert len(blocks_here) == 3
    run_block(shell, Block(ROOT / "README.md", "sh", "run", "make dev-up\n", 0))
    for command in (
        "kubectl apply -f deploy/default/controller.yaml -f deploy/default/webhook.yaml",
        "kubectl apply -f examples/quickstart/01-queues.yaml",
    ):
        assert shell.run(command).returncode == 0
    job = (ROOT / "examples" / "quickstart" / "02-jobs.yaml").read_text().split("---")[0]
    job = job.replace("generateName: sample-job-", "name: sample-job-8rxc4")
    job = job.replace('cpu: "3"', 'cpu: "30"')  # more than the queue has: it stays queued
    created = subprocess.run(
        ["kubectl", "create", "-f", "-"], input=job, env=shell.env, capture_output=True,
        text=True, cwd=ROOT,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    run_block(shell, blocks_here[0])  # uninstall
    # The Deployments were deleted: here, the processes dev-up started stop likewise.
    state = json.loads((shell.dev_dir / "state.json").read_text())
    for name in ("controller", "webhook"):
        os.kill(state[f"{name}_pid"], signal.SIGTERM)
    time.sleep(2)
    suspended = shell.run("kubectl get job sample-job-8rxc4 -o jsonpath={.spec.suspend}")
    assert suspended.stdout == "true"  # queued Jobs stay suspended while Tower is gone
    crd = "clusterqueues.kueue.x-k8s.io"
    strategy = shell.run(f"kubectl get crd {crd} -o jsonpath={{.spec.conversion.strategy}}")
    assert strategy.stdout == "Webhook"
    run_block(shell, blocks_here[1])  # the CRDs convert no more through the Service gone
    strategy = shell.run(f"kubectl get crd {crd} -o jsonpath={{.spec.conversion.strategy}}")
    assert strategy.stdout == "None"
    run_block(shell, blocks_here[2])  # released by hand
    released = shell.run("kubectl get job sample-job-8rxc4 -o jsonpath={.spec.suspend}")
    assert released.stdout == "false"
