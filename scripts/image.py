"""Builds Tower's image where no Docker runs: a Debian root with Python, packed as an image tarball.

`make image` uses docker (or podman) and the Dockerfile where one is installed; on a machine
without either this does the Dockerfile's recipe by hand, as root:

  1. a Debian bookworm root with Python 3.11 (debootstrap --variant=minbase), kept in
     ~/.cache/tower-image between builds;
  2. Tower and its dependencies as wheels, built here, installed into /opt/tower in that root;
  3. the non-root user 65532, and the root packed as one layer of a docker-archive tarball
     whose config says what the Dockerfile says (user, environment, `python -m`).

The tarball loads with `ctr -n k8s.io images import` (containerd) or `docker load`. Prints the
tarball's path and how long each step took.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("TOWER_IMAGE_CACHE", Path.home() / ".cache" / "tower-image"))
MIRROR = os.environ.get("TOWER_IMAGE_MIRROR", "http://deb.debian.org/debian")
USER = "65532:65532"
# What the Dockerfile's final stage sets.
CONFIG = {
    "User": USER,
    "Env": [
        "PATH=/opt/tower/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "PYTHONDONTWRITEBYTECODE=1",
        "PYTHONUNBUFFERED=1",
    ],
    "Entrypoint": ["python", "-m"],
    "Cmd": ["extender", "run"],
    "WorkingDir": "/",
}


def pack(rootfs: Path, ref: str, out: Path, config: dict[str, object]) -> str:
    """A docker-archive tarball of `rootfs` as one layer, tagged `ref`; returns its layer's
    digest. Owners are kept as in the root (files of the image belong to root, as a
    Dockerfile's COPY leaves them), times are zeroed so the same root packs the same."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as tar:

        def same_every_time(info: tarfile.TarInfo) -> tarfile.TarInfo:
            info.mtime = 0
            info.uname = info.gname = ""
            return info

        for name in sorted(os.listdir(rootfs)):
            tar.add(rootfs / name, arcname=name, filter=same_every_time)
    data = layer.getvalue()
    diff_id = "sha256:" + hashlib.sha256(data).hexdigest()
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "scripts/image.py"}],
    }
    config_bytes = json.dumps(image_config, sort_keys=True).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    manifest = [{"Config": config_name, "RepoTags": [ref], "Layers": ["layer.tar"]}]
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w") as archive:
        for name, blob in (
            ("layer.tar", data),
            (config_name, config_bytes),
            ("manifest.json", json.dumps(manifest).encode()),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            archive.addfile(info, io.BytesIO(blob))
    return diff_id


def _run(*command: str | Path) -> None:
    env = None
    if command[0] == "chroot":
        # This machine's pip settings (PIP_FIND_LINKS, ...) name its paths, not the root's.
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    subprocess.run([str(c) for c in command], check=True, env=env)


def base_root(work: Path) -> Path:
    """Debian bookworm (minbase) with python3 and python3-venv, from the cache or made now."""
    cached = CACHE / "bookworm-python3.tar"
    root = work / "rootfs"
    root.mkdir()
    if not cached.exists():
        if shutil.which("debootstrap") is None:
            sys.exit("debootstrap is not installed: apt-get install -y debootstrap")
        fresh = work / "fresh"
        _run(
            "debootstrap",
            "--variant=minbase",
            "--include=python3,python3-venv,ca-certificates",
            "bookworm",
            fresh,
            MIRROR,
        )
        for junk in (
            "var/cache/apt/archives",
            "var/lib/apt/lists",
            "usr/share/doc",
            "usr/share/man",
        ):
            shutil.rmtree(fresh / junk, ignore_errors=True)
        CACHE.mkdir(parents=True, exist_ok=True)
        _run("tar", "-C", fresh, "-cf", cached, ".")
        shutil.rmtree(fresh)
    _run("tar", "-C", root, "-xf", cached)
    return root


def install_tower(root: Path) -> None:
    """Tower's wheels built here, installed into /opt/tower inside the root."""
    wheels = root / "tmp" / "wheels"
    _run(sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", wheels, ROOT)
    _run("chroot", root, "/usr/bin/python3", "-m", "venv", "/opt/tower")
    _run(
        "chroot", root, "/opt/tower/bin/pip", "install", "--quiet", "--no-index",
        "--no-cache-dir", "--find-links", "/tmp/wheels", "kueue-tower",
    )  # fmt: skip
    shutil.rmtree(wheels)
    for cache in (root / "opt" / "tower").rglob("__pycache__"):
        shutil.rmtree(cache)
    with open(root / "etc" / "passwd", "a") as passwd:
        passwd.write("tower:x:65532:65532::/nonexistent:/usr/sbin/nologin\n")
    with open(root / "etc" / "group", "a") as group:
        group.write("tower:x:65532:\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", default="tower:0.1.0")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "tower-image.tar")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("scripts/image.py runs as root (debootstrap and chroot)")
    steps: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="tower-image-") as tmp:
        work = Path(tmp)
        start = time.monotonic()
        root = base_root(work)
        steps["debian root"] = round(time.monotonic() - start, 1)
        start = time.monotonic()
        install_tower(root)
        steps["tower installed"] = round(time.monotonic() - start, 1)
        start = time.monotonic()
        pack(root, args.tag, args.out, CONFIG)
        steps["packed"] = round(time.monotonic() - start, 1)
    print(json.dumps({"image": args.tag, "tarball": str(args.out), "seconds": steps}))


if __name__ == "__main__":
    main()
