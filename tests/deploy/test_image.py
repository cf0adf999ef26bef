"""scripts/image.py packs a root as an image tarball that containerd and docker load: one
layer, its digest in the config, the Dockerfile's user and entrypoint. (The Debian root and the
install need root and debootstrap: `make image` on a session's machine, `make e2e` loads it.)"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("tower_image", ROOT / "scripts" / "image.py")
assert spec is not None
assert spec.loader is not None
image = importlib.util.module_from_spec(spec)
spec.loader.exec_module(image)


def tiny_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "hello").write_text("#!/bin/sh\necho hello\n")
    (root / "etc").mkdir()
    (root / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    return root


def test_the_tarball_is_a_docker_archive_of_one_layer_with_the_dockerfiles_config(tmp_path):
    out = tmp_path / "image.tar"
    diff_id = image.pack(tiny_root(tmp_path), "tower:0.1.0", out, image.CONFIG)
    with tarfile.open(out) as archive:
        manifest = json.load(archive.extractfile("manifest.json"))
        assert manifest == [
            {"Config": manifest[0]["Config"], "RepoTags": ["tower:0.1.0"], "Layers": ["layer.tar"]}
        ]
        layer = archive.extractfile("layer.tar").read()
        config = json.load(archive.extractfile(manifest[0]["Config"]))
    assert diff_id == "sha256:" + hashlib.sha256(layer).hexdigest()
    assert config["rootfs"] == {"type": "layers", "diff_ids": [diff_id]}
    assert config["config"]["User"] == "65532:65532"  # the Dockerfile's USER
    assert config["config"]["Entrypoint"] == ["python", "-m"]
    assert config["config"]["Cmd"] == ["extender", "run"]
    assert any(e.startswith("PATH=/opt/tower/bin:") for e in config["config"]["Env"])
    with tarfile.open(fileobj=io.BytesIO(layer)) as files:
        assert sorted(files.getnames()) == ["bin", "bin/hello", "etc", "etc/passwd"]
        assert files.getmember("bin/hello").mtime == 0


def test_the_same_root_packs_to_the_same_image(tmp_path):
    root = tiny_root(tmp_path)
    first = image.pack(root, "tower:0.1.0", tmp_path / "a.tar", image.CONFIG)
    (root / "bin" / "hello").touch()  # a newer time changes nothing
    assert image.pack(root, "tower:0.1.0", tmp_path / "b.tar", image.CONFIG) == first
