"""The seed quick-start, live: kubectl, the real webhook and the controller against the API
double (tests/apidouble/, which stands in for kube-apiserver where no cluster can run).

Each Job "runs" for the time in its tower.dev/sim-duration annotation, shortened here from the
seed's 30 s to 6 s so the demo takes about half a minute.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.apidouble import ApiDouble, JobRunner  # noqa: E402
from tests.servers import generate, start_webhook  # noqa: E402

CONTROLLER = "system:serviceaccount:tower-system:tower-controller"


FAILED: list[str] = []  # kubectl commands that failed: every step of the quick-start must work


def show(env: dict[str, str], *args: str) -> str:
    print(f"$ kubectl {' '.join(args)}", flush=True)
    done = subprocess.run(["kubectl", *args], env=env, capture_output=True, text=True)
    print((done.stdout + done.stderr).rstrip() + "\n", flush=True)
    if done.returncode != 0:
        FAILED.append(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def main() -> int:
    if shutil.which("kubectl") is None:
        print("the live demo needs kubectl on PATH; skipped", file=sys.stderr)
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="tower-demo-"))
    api = ApiDouble()
    api.start()
    runner = JobRunner(api)
    admin = api.kubeconfig(str(tmp / "admin.kubeconfig"))
    tower = api.kubeconfig(str(tmp / "tower.kubeconfig"), token="tower", username=CONTROLLER)
    env = dict(os.environ, KUBECONFIG=admin)
    generate(tmp / "certs")
    webhook = start_webhook(tmp / "certs", tmp / "metrics", workers=1)
    controller = None
    try:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "certs",
                "install",
                "--kubeconfig",
                admin,
                "--url",
                webhook.url,
                "--certs-dir",
                str(tmp / "certs"),
            ],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        print(
            "# The API double stands in for kube-apiserver; the webhook, the controller and "
            "kubectl are the real ones.\n",
            flush=True,
        )
        show(env, "create", "--validate=false", "-f", str(ROOT / "deploy" / "crds"))
        controller = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "extender",
                "run",
                "--kubeconfig",
                tower,
                "--no-leader-elect",
                "--health-address",
                "127.0.0.1:0",
                "--metrics-address",
                "127.0.0.1:0",
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        show(
            env,
            "create",
            "--validate=false",
            "-f",
            str(ROOT / "examples" / "quickstart" / "01-queues.yaml"),
        )
        jobs = (ROOT / "examples" / "quickstart" / "02-jobs.yaml").read_text()
        (tmp / "jobs.yaml").write_text(jobs.replace("sim-duration: 30s", "sim-duration: 6s"))
        show(env, "create", "--validate=false", "-f", str(tmp / "jobs.yaml"))
        columns = (
            "custom-columns=NAME:.metadata.name,SUSPENDED:.spec.suspend,SUCCEEDED:.status.succeeded"
        )
        for pause, title in (
            (2, "one Job runs, the other waits"),
            (7, "the first finished, the second runs"),
            (7, "both finished"),
        ):
            time.sleep(pause)
            print(f"# after {pause} s more: {title}\n", flush=True)
            show(env, "get", "clusterqueue", "cluster-queue", "-o", "wide")
            show(env, "get", "workloads", "-n", "default")
            show(env, "get", "jobs", "-n", "default", "-o", columns)
            for wl in api.list("workloads", "default"):
                if not (wl.get("status") or {}).get("admission"):
                    print("# why it waits:", flush=True)
                    show(
                        env,
                        "get",
                        "workload",
                        "-n",
                        "default",
                        wl["metadata"]["name"],
                        "-o",
                        "jsonpath={.status.conditions[?(@.type=='QuotaReserved')].message}",
                    )
        unfinished = sorted(
            job["metadata"]["name"]
            for job in api.list("jobs", "default")
            if (job.get("status") or {}).get("succeeded") != 1
        )
        if unfinished:
            FAILED.append(f"Jobs that did not succeed: {', '.join(unfinished)}")
    finally:
        if controller is not None:
            controller.terminate()
            controller.wait(timeout=20)
        webhook.proc.terminate()
        webhook.proc.wait(timeout=20)
        runner.stop()
        api.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILED:
        print(f"the live demo went wrong: {FAILED[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
