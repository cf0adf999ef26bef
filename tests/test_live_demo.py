"""The README's first command, live half: the quick-start with kubectl, the webhook and the controller."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="the live demo drives kubectl")
def test_the_live_demo_runs_the_quick_start_to_the_end():
    done = subprocess.run(
        [sys.executable, "scripts/live_demo.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "Error from server" not in done.stdout
    final = done.stdout.rsplit("# after 7 s more: both finished", 1)[1]
    jobs = final.split("SUSPENDED   SUCCEEDED", 1)[1].split("\n\n", 1)[0].split()
    assert jobs[1::3] == ["false", "false"]  # started by Tower
    assert jobs[2::3] == ["1", "1"]
