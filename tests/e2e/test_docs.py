"""What the README says, on a real cluster: the quick-start through `make dev-up`, and the
install (`tested=e2e` blocks) with kustomize — or the Helm chart, where helm exists.

The quick-start runs in the namespace `default` as the README does: the quick-start's own
objects (its queues, and Jobs in `user-queue`) are deleted there before and after.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import yamlc
from tests.deploy.helm import template
from tests.deploy.test_helm import key
from tests.deploy.test_manifests import render
from tests.e2e.conftest import KUBECONFIG, kubectl, webhook_host_port
from tests.e2e.kubelet import has_no_kubelets
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
    assert commands == {"kubectl apply -k deploy/default"}  # what this test and the next run
    out = kubectl("apply", "-k", str(ROOT / "deploy" / "default"), "--dry-run=server")
    for obj in render("deploy/default"):
        assert f"/{obj['metadata']['name']} " in out, obj["metadata"]["name"]


def image_builder() -> str | None:
    return shutil.which("docker") or shutil.which("podman")


def test_installed_with_kustomize_the_quick_start_runs(api_client, kubelet_namespaces):
    """`make image`, `kubectl apply -k deploy/default`, both Deployments ready, then the
    quick-start's two Jobs: one runs, the other waits, then runs."""
    if has_no_kubelets(api_client):
        pytest.skip("this cluster's Nodes have no kubelet: Tower's pods cannot run here")
    builder = image_builder()
    if builder is None:
        pytest.skip("no docker or podman here to build the image (`make image`)")
    subprocess.run(["make", "image"], cwd=ROOT, check=True, timeout=1800)
    if shutil.which("kind") and "kind-" in kubectl("config", "current-context"):
        cluster = kubectl("config", "current-context").strip().removeprefix("kind-")
        subprocess.run(["kind", "load", "docker-image", "tower:0.1.0", "--name", cluster],
                       check=True, timeout=600)  # fmt: skip
    clean_quick_start()
    kubectl("apply", "-k", str(ROOT / "deploy" / "default"))
    try:
        for name in ("tower-webhook", "tower-controller"):
            kubectl("rollout", "status", f"deployment/{name}", "-n", "tower-system",
                    "--timeout=300s")  # fmt: skip
        kubectl("apply", "-f", str(ROOT / QUEUES))
        kubectl("create", "-f", str(ROOT / "examples" / "quickstart" / "02-jobs.yaml"))
        kubectl("wait", "--for=jsonpath={.spec.suspend}=false", "job", "-n", "default",
                "-l", "kueue.x-k8s.io/queue-name=user-queue", "--timeout=300s")  # fmt: skip
    finally:
        kubectl("delete", "-f", str(ROOT / "deploy" / "default" / "webhooks.yaml"), check=False)
        kubectl("delete", "-f", str(ROOT / "deploy" / "default" / "controller.yaml"),
                "-f", str(ROOT / "deploy" / "default" / "webhook.yaml"), check=False)  # fmt: skip
        clean_quick_start()


def test_helm_template_renders_the_kustomize_base():
    helm = shutil.which("helm")
    if helm is None:
        pytest.skip("helm is not installed here (tests/deploy compares the chart by its own "
                    "renderer)")  # fmt: skip
    out = subprocess.run(
        [helm, "template", "tower", str(ROOT / "deploy" / "helm" / "tower"),
         "-n", "tower-system", "--include-crds"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    by_helm = {key(o): o for o in yamlc.safe_load_all(out) if o}
    by_kustomize = {key(o): o for o in render("deploy/default") if o["kind"] != "Namespace"}
    assert by_helm == by_kustomize
    assert by_helm == {key(o): o for o in template(ROOT / "deploy" / "helm" / "tower")}
