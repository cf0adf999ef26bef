"""`python -m tests.apidouble`: the API double as a process, for `make dev-up` where no
cluster runs. It writes an admin kubeconfig (kubernetes-admin, as kubectl's user) and serves
until SIGTERM; its Job controller stand-in runs each Job for its tower.dev/sim-duration."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from tests.apidouble import ApiDouble, JobRunner


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.apidouble", description=__doc__)
    parser.add_argument("--kubeconfig", required=True, help="where to write the admin kubeconfig")
    args = parser.parse_args()
    api = ApiDouble(bookmark_interval=30.0)
    api.start()
    runner = JobRunner(api)
    api.kubeconfig(args.kubeconfig)
    print(f"serving {api.url}; kubeconfig {Path(args.kubeconfig).resolve()}", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    runner.stop()
    api.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
