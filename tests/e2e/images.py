"""Images for the test pods on a real node, made here from busybox: nothing is pulled.

The e2e suite and Kueue's examples name public images; a node here pulls none, so each is made
from Debian's busybox-static under the name the manifests use:

- `busybox:1.36` (and `busybox`): busybox itself;
- `registry.k8s.io/e2e-test-images/agnhost:2.53`: the agnhost verbs Kueue's examples and e2e
  suite use: `pause` and `netexec` (wait until stopped, then exit 0), `test-webserver` (no
  signal handler: ends only when killed, so in failure) and `entrypoint-tester` (prints its
  arguments and exits 0);
- `registry.k8s.io/nginx-slim:0.27`: busybox's httpd serving / on port 80.

`python -m tests.e2e.images DIR` writes one tarball per image into DIR, for
shared/realk8s/node/node-up.sh (which imports `DIR/extra-*.tar`) or `ctr images import`.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUSYBOX = Path("/bin/busybox")

AGNHOST = """#!/bin/sh
# A stand-in for agnhost: the verbs Kueue's examples run.
case "$1" in
  pause|netexec) trap 'exit 0' TERM INT; while :; do sleep 1; done ;;
  test-webserver) exec sleep 2147483647 ;;
  entrypoint-tester) shift; echo "$@"; exit 0 ;;
  *) echo "agnhost stand-in: $1 is not made here" >&2; exit 2 ;;
esac
"""

IMAGES = {
    "busybox": (
        ["docker.io/library/busybox:1.36", "docker.io/library/busybox:latest"],
        None,
        ["sh"],
    ),
    "agnhost": (["registry.k8s.io/e2e-test-images/agnhost:2.53"], ["/agnhost"], []),
    "nginx-slim": (
        ["registry.k8s.io/nginx-slim:0.27"],
        ["/bin/httpd", "-f", "-p", "80", "-h", "/www"],
        [],
    ),
}


def _pack():
    spec = importlib.util.spec_from_file_location("tower_image", ROOT / "scripts" / "image.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.pack


def busybox_root(where: Path) -> Path:
    root = where / "rootfs"
    for sub in ("bin", "etc", "tmp", "proc", "dev", "root", "www"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    shutil.copy2(BUSYBOX, root / "bin" / "busybox")
    applets = subprocess.run([str(BUSYBOX), "--list"], capture_output=True, text=True, check=True)
    for applet in applets.stdout.split():
        if applet != "busybox":
            (root / "bin" / applet).symlink_to("busybox")
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\n")
    (root / "www" / "index.html").write_text("Hello from a test pod\n")
    agnhost = root / "agnhost"
    agnhost.write_text(AGNHOST)
    agnhost.chmod(0o755)
    return root


def build(out: Path) -> list[Path]:
    """One tarball per image and tag into `out`; returns their paths."""
    if not BUSYBOX.exists():
        sys.exit("busybox-static is not installed: apt-get install -y busybox-static")
    pack = _pack()
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        root = busybox_root(Path(tmp))
        for name, (refs, entrypoint, cmd) in IMAGES.items():
            for i, ref in enumerate(refs):
                path = out / f"extra-{name}-{i}.tar"
                config = {
                    "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                    "Entrypoint": entrypoint,
                    "Cmd": cmd,
                    "WorkingDir": "/",
                }
                pack(root, ref, path, config)
                written.append(path)
    return written


if __name__ == "__main__":
    for path in build(Path(sys.argv[1])):
        print(path)
