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


EXTENDER = CORE.parent
MAX_CLASS_LINES = 400


def test_no_class_in_the_extender_is_over_400_lines():
    """A class that does five jobs grows past a page; this keeps each room small (#23)."""
    too_long = []
    for path in sorted(EXTENDER.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    too_long.append(f"{path.relative_to(EXTENDER.parent)}:{node.name} ({lines})")
    assert too_long == [], f"split these classes by responsibility: {too_long}"


def test_the_job_framework_modules_are_checked_like_the_rest_of_the_core():
    modules = sorted((CORE / "jobframework").glob("*.py"))
    assert modules, "extender/core/jobframework/ has no modules"
    for path in modules:
        test_core_imports_only_the_standard_library_and_itself(path)
        test_every_core_module_says_its_job_in_one_docstring_line(path)
