"""Webhook benchmark: Tower vs. a bare WSGI function on the same gunicorn vs. nginx, over TLS.

Every server answers POST /mutate-batch-v1-job carrying the AdmissionReview a real
kube-apiserver sent for the seed Job (shared/fixtures). wrk measures closed-loop throughput
with keep-alive; hey measures latency at a fixed rate. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fixtures import admission_review  # noqa: E402
from tests.servers import free_port, generate  # noqa: E402
from webhook.app import create_app  # noqa: E402
from webhook.settings import Settings  # noqa: E402

PATH = "/mutate-batch-v1-job"


def wait_ready(port: int, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"server on {port} exited with {proc.returncode}") from None
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


def gunicorn_env(port: int, certs: Path, workers: int, threads: int) -> dict[str, str]:
    return dict(
        os.environ,
        TOWER_WEBHOOK_PORT=str(port),
        TOWER_WEBHOOK_BIND_ADDRESS="127.0.0.1",
        TOWER_WEBHOOK_WORKERS=str(workers),
        TOWER_WEBHOOK_THREADS=str(threads),
        TOWER_WEBHOOK_TLS_CERT_FILE=str(certs / "tls.crt"),
        TOWER_WEBHOOK_TLS_PRIVATE_KEY_FILE=str(certs / "tls.key"),
        TOWER_WEBHOOK_LOG_LEVEL="warning",
    )


def start_tower(
    port: int, certs: Path, workers: int, threads: int, tmp: Path
) -> subprocess.Popen[bytes]:
    env = gunicorn_env(port, certs, workers, threads)
    env["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(dir=tmp)
    return subprocess.Popen(
        [sys.executable, "-m", "webhook"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def start_bare(
    port: int, certs: Path, workers: int, threads: int, response: Path
) -> subprocess.Popen[bytes]:
    env = gunicorn_env(port, certs, workers, threads)
    env["TOWER_BENCH_RESPONSE"] = str(response)
    env["PYTHONPATH"] = str(ROOT / "bench")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            str(ROOT / "webhook" / "gunicorn.conf.py"),
            "bare_wsgi:app",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def start_nginx(port: int, certs: Path, response: Path, tmp: Path) -> subprocess.Popen[bytes]:
    conf = tmp / "nginx.conf"
    body = response.read_text().replace("\\", "\\\\").replace("'", "\\'")
    conf.write_text(f"""
worker_processes 2;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log;
daemon off;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {tmp};
  proxy_temp_path {tmp}; fastcgi_temp_path {tmp}; uwsgi_temp_path {tmp}; scgi_temp_path {tmp};
  keepalive_requests 100000;
  server {{
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {certs}/tls.crt;
    ssl_certificate_key {certs}/tls.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    location = {PATH} {{
      default_type application/json;
      return 200 '{body}';
    }}
  }}
}}
""")
    return subprocess.Popen(
        ["nginx", "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def cpu_seconds(master: int) -> float:
    """User+system CPU of a server: its master process and every worker."""
    pids = [master]
    children = Path(f"/proc/{master}/task/{master}/children")
    if children.exists():
        pids += [int(p) for p in children.read_text().split()]
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def wrk(
    port: int, body: Path, seconds: int, connections: int, server_pid: int | None = None
) -> dict[str, float]:
    script = body.with_suffix(".lua")
    script.write_text(
        'wrk.method = "POST"\n'
        f"wrk.body = io.open({json.dumps(str(body))}):read('*a')\n"
        'wrk.headers["Content-Type"] = "application/json"\n'
    )
    cpu_before = cpu_seconds(server_pid) if server_pid else 0.0
    out = subprocess.run(
        [
            "wrk",
            "-t2",
            f"-c{connections}",
            f"-d{seconds}s",
            "--latency",
            "-s",
            str(script),
            f"https://127.0.0.1:{port}{PATH}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cpu = cpu_seconds(server_pid) - cpu_before if server_pid else 0.0
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: (.*)", out)

    def pct(label: str) -> float:
        m = re.search(rf"\s{label}%\s+([\d.]+)(us|ms|s)", out)
        assert m is not None, out
        value, unit = float(m.group(1)), m.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value

    return {
        "rps": rps,
        "p50_ms": pct("50"),
        "p99_ms": pct("99"),
        "server_cpu_us_per_request": round(cpu / max(1, requests) * 1e6, 1),
        "non_2xx": int(errors.group(1)) if errors else 0,
        "socket_errors": socket_errors.group(1) if socket_errors else "",
    }


def hey(port: int, body: Path, rate: int, seconds: int) -> dict[str, float]:
    workers = 10
    out = subprocess.run(
        [
            "hey",
            "-z",
            f"{seconds}s",
            "-q",
            str(rate // workers),
            "-c",
            str(workers),
            "-m",
            "POST",
            "-T",
            "application/json",
            "-D",
            str(body),
            f"https://127.0.0.1:{port}{PATH}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    def pct(label: str) -> float:
        m = re.search(rf"{label}% in ([\d.]+) secs", out)
        assert m is not None, out
        return float(m.group(1)) * 1000

    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    codes = dict(re.findall(r"\[(\d+)\]\s+(\d+) responses", out))
    return {
        "rps": rps,
        "p50_ms": pct("50"),
        "p99_ms": pct("99"),
        "non_200": sum(int(n) for c, n in codes.items() if c != "200"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rate", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--configs",
        default="2x16,3x8,3x16",
        help="gunicorn workers x threads to try for Tower and bare WSGI",
    )
    args = parser.parse_args()
    for tool in ("wrk", "hey", "nginx"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is missing: run bench/run.sh, which installs it")
    tmp = Path(tempfile.mkdtemp(prefix="tower-webhook-bench-"))
    certs = tmp / "certs"
    generate(certs)
    review = admission_review("01-mutate.job-CREATE-generateName.seed-job")
    body = tmp / "review.json"
    body.write_text(json.dumps(review))
    response = tmp / "response.json"
    response.write_bytes(create_app(Settings()).test_client().post(PATH, json=review).data)

    results: dict[str, object] = {
        "connections": args.connections,
        "seconds": args.seconds,
        "rounds": args.rounds,
    }
    runs = []
    for config in args.configs.split(","):
        workers, threads = (int(x) for x in config.split("x"))
        ports = {"tower": free_port(), "bare_wsgi": free_port()}
        procs = {
            "tower": start_tower(ports["tower"], certs, workers, threads, tmp),
            "bare_wsgi": start_bare(ports["bare_wsgi"], certs, workers, threads, response),
        }
        try:
            for name, port in ports.items():
                wait_ready(port, procs[name])
                wrk(port, body, 2, args.connections)  # warm up
            # Interleave the two servers round by round, so drifts of this shared machine
            # hit both alike; compare medians.
            closed: dict[str, list[dict[str, float]]] = {"tower": [], "bare_wsgi": []}
            for _ in range(args.rounds):
                for name, port in ports.items():
                    closed[name].append(
                        wrk(port, body, args.seconds, args.connections, procs[name].pid)
                    )
            for name, port in ports.items():
                samples = sorted(closed[name], key=lambda r: r["rps"])
                median = samples[len(samples) // 2]
                cpu = sorted(r["server_cpu_us_per_request"] for r in closed[name])
                runs.append(
                    {
                        "server": name,
                        "workers": workers,
                        "threads": threads,
                        "wrk": median,
                        "server_cpu_us_per_request": cpu[len(cpu) // 2],
                        "wrk_rps_all": [r["rps"] for r in closed[name]],
                        f"hey_{args.rate}rps": hey(port, body, args.rate, args.seconds),
                    }
                )
                print(json.dumps(runs[-1]), file=sys.stderr)
        finally:
            for proc in procs.values():
                proc.terminate()
                proc.wait(timeout=20)
    port = free_port()
    proc = start_nginx(port, certs, response, tmp)
    try:
        wait_ready(port, proc)
        wrk(port, body, 2, args.connections)
        runs.append(
            {
                "server": "nginx",
                "wrk": wrk(port, body, args.seconds, args.connections),
                f"hey_{args.rate}rps": hey(port, body, args.rate, args.seconds),
            }
        )
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    results["runs"] = runs
    best = max((r for r in runs if r["server"] == "tower"), key=lambda r: r["wrk"]["rps"])
    bare = next(
        r
        for r in runs
        if r["server"] == "bare_wsgi"
        and r["workers"] == best["workers"]
        and r["threads"] == best["threads"]
    )
    nginx = runs[-1]
    results["best"] = {
        "workers": best["workers"],
        "threads": best["threads"],
        "tower_rps": best["wrk"]["rps"],
        "bare_wsgi_rps": bare["wrk"]["rps"],
        "nginx_rps": nginx["wrk"]["rps"],
        "tower_over_bare_wsgi": round(best["wrk"]["rps"] / bare["wrk"]["rps"], 3),
        "tower_cpu_us_per_request": best["server_cpu_us_per_request"],
        "bare_wsgi_cpu_us_per_request": bare["server_cpu_us_per_request"],
        "tower_over_bare_wsgi_by_cpu": round(
            bare["server_cpu_us_per_request"] / best["server_cpu_us_per_request"], 3
        ),
        "tower_over_nginx": round(best["wrk"]["rps"] / nginx["wrk"]["rps"], 3),
        f"tower_p99_ms_at_{args.rate}rps": best[f"hey_{args.rate}rps"]["p99_ms"],
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
