"""What the README says, on a real cluster: the quick-start through `make dev-up`, the
install command (`tested=e2e` blocks) as the API server takes it, and the chart as helm
renders it. The install itself, on a real node: test_install_cluster.py.

The quick-start runs in the namespace `default` as the README does: the quick-start's own
objects (its queues, and Jobs in `user-queue`) are deleted there before and after.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import yamlc
from tests.deploy.helm import template
from tests.deploy.test_helm import hook, key
from tests.deploy.test_manifests import render
from tests.e2e.conftest import KUBECONFIG, helm_binary, kubectl, webhook_host_port
from tests.servers import free_port
from tests.test_docs import ALL, VENV_BIN, Shell, run_block

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
QUEUES = "examples/quickstart/01-queues.yaml"


def clean_quick_start() -> None:
    kubectl("delete", "jobs", "-n", "default", "-l", "kueue.x-k8s.io/queue-name=user-queue",
            "--ignore-not-found", "--wait=true")  # fmt: skip
    kubectl("delete", "-f", str(ROOT / QUEUES), "--ignore-not-found", "--wait=true")


@pytest.fixture
def shell(tmp_path, kubelet_namespaces):
    host, port = webhook_host_port()
    kubelet_namespaces.add("default")
    dev_dir = tmp_path / "dev"
    env = dict(os.environ, KUBECONFIG=KUBECONFIG or "", TOWER_DEV_DIR=str(dev_dir))
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    ports = ["--webhook-host", host, "--webhook-port", str(port)]
    sh = Shell(env, dev_dir, [*ports, "--controller-port", str(free_port())])
    clean_quick_start()
    yield sh
    subprocess.run([sys.executable, "scripts/dev.py", "down"], cwd=ROOT, env=env, check=False)
    clean_quick_start()


def test_the_readme_quick_start_on_a_cluster(shell):
    blocks = [b for b in ALL if b.doc.name == "README.md" and b.tag == "run"]
    assert blocks
    for block in blocks:
        run_block(shell, block, timeout=150)


def test_the_install_command_is_accepted_by_the_api_server():
    """Every object of `kubectl apply -k deploy/default`, as the API server would store it
    (server-side dry run: nothing is changed)."""
    commands = {c for b in ALL if b.tag == "e2e" for c, _ in b.commands()}
    # This test runs the first; test_install_cluster.py installs with it, and after
    # `helm uninstall` runs the other two.
    assert commands == {
        "kubectl apply -k deploy/default",
        "kubectl delete namespace tower-system",
        "kubectl delete -f deploy/crds/",
    }
    out = kubectl("apply", "-k", str(ROOT / "deploy" / "default"), "--dry-run=server")
    for obj in render("deploy/default"):
        assert f"/{obj['metadata']['name']} " in out, obj["metadata"]["name"]


def test_helm_template_renders_the_kustomize_base():
    helm = helm_binary()
    out = subprocess.run(
        [helm, "template", "tower", str(ROOT / "deploy" / "helm" / "tower"),
         "-n", "tower-system", "--include-crds"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    by_helm = {key(o): o for o in yamlc.safe_load_all(out) if o and not hook(o)}
    by_kustomize = {key(o): o for o in render("deploy/default") if o["kind"] != "Namespace"}
    assert by_helm == by_kustomize
    assert by_helm == {
        key(o): o for o in template(ROOT / "deploy" / "helm" / "tower") if not hook(o)
    }
