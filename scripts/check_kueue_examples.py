"""Apply Kueue's documentation examples, unchanged, through Tower's CRDs and webhook.

Usage: python scripts/check_kueue_examples.py FILE.yaml [FILE.yaml ...]
Each file goes to a fresh API double (tests/apidouble) that serves Tower's CRDs and calls the
real webhook over TLS, with the real `kubectl apply --validate=strict` (`kubectl create` for a
file that uses generateName). Prints one line per file: applied, with the warnings kubectl
printed, or refused, with kubectl's error. Exit status 1 when any file was refused.

The examples are Kueue's (site/static/examples/ at a release tag); they are not kept here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from kubernetes import config as k8s_config

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from certs import kube as certs_kube  # noqa: E402
from extender.kube.api import resources as r  # noqa: E402
from extender.kube.api.client import RequestBudget, RestClient  # noqa: E402
from extender.kube.generators.crds import custom_resource_definitions  # noqa: E402
from tests.apidouble import ApiDouble  # noqa: E402
from tests.controller.test_jobset import JOBSET_CRD  # noqa: E402
from tests.servers import generate, start_webhook  # noqa: E402

CRDS = r.Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)


def check(path: Path, webhook_url: str, ca: bytes, tmp: Path) -> tuple[bool, str]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    api = ApiDouble()
    api.start()
    try:
        config = api.kubeconfig(str(tmp / f"{path.stem}.kubeconfig"))
        admin = RestClient(
            k8s_config.new_client_from_config(config_file=config), RequestBudget(1e3, 1e3)
        )
        for crd in custom_resource_definitions():
            admin.create(CRDS, crd)
        if any(d.get("kind") == "JobSet" for d in docs):
            admin.create(CRDS, JOBSET_CRD)
        namespaces = {"tower-system"} | {
            str(d["metadata"]["namespace"])
            for d in docs
            if (d.get("metadata") or {}).get("namespace")
        }
        for namespace in sorted(namespaces - {"default"}):
            admin.create(r.NAMESPACES, {"metadata": {"name": namespace}})
        certs_kube.install(admin.api_client, webhook_url, ca)
        verb = (
            "create" if any("generateName" in (d.get("metadata") or {}) for d in docs) else "apply"
        )
        args = ["kubectl", verb, "-f", str(path)] + (
            ["--validate=strict"] if verb == "apply" else []
        )
        done = subprocess.run(
            args,
            env=dict(os.environ, KUBECONFIG=config),
            capture_output=True,
            text=True,
            timeout=60,
        )
        said = " | ".join(line for line in done.stderr.splitlines() if line.strip())
        return done.returncode == 0, said
    finally:
        api.stop()


def main(files: list[str]) -> int:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        generate(tmp / "certs")
        webhook = start_webhook(tmp / "certs", tmp, workers=1)
        refused = 0
        try:
            ca = (tmp / "certs" / "ca.crt").read_bytes()
            for file in files:
                ok, said = check(Path(file), webhook.url, ca, tmp)
                refused += not ok
                print(f"{'applied' if ok else 'REFUSED'}  {Path(file).name}  {said}")
        finally:
            webhook.proc.send_signal(signal.SIGTERM)
            webhook.proc.wait(timeout=20)
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
