"""The import rule that keeps the admission core pure, checked on every module."""

import ast
import sys
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "extender" / "core"
MODULES = sorted(CORE.glob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[p.name for p in MODULES])
def test_core_imports_only_the_standard_library_and_itself(path):
    tree = ast.parse(path.read_text())
    outside = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if (
                name.startswith("extender.core")
                or top in sys.stdlib_module_names
                or top == "__future__"
            ):
                continue
            outside.append(name)
    assert outside == [], f"{path.name} imports {outside}"


@pytest.mark.parametrize("path", MODULES, ids=[p.name for p in MODULES])
def test_every_core_module_says_its_job_in_one_docstring_line(path):
    doc = ast.get_docstring(ast.parse(path.read_text()))
    assert doc, f"{path.name} has no module docstring"
    assert doc.splitlines()[0].endswith("."), f"{path.name}: first line should be one sentence"


def test_the_core_reads_no_clock():
    for path in MODULES:
        text = path.read_text()
        for forbidden in ("time.time(", "datetime.now(", "time.monotonic(", "open("):
            assert forbidden not in text, f"{path.name} calls {forbidden}"
