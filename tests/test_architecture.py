"""The rules that keep the admission core pure and its rooms small, checked on every module."""

import ast
import sys
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "extender" / "core"
MODULES = sorted(CORE.rglob("*.py"))
PACKAGES = sorted(p.parent for p in CORE.rglob("__init__.py"))


def _ids(paths):
    return [str(p.relative_to(CORE)) for p in paths]


@pytest.mark.parametrize("path", MODULES, ids=_ids(MODULES))
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


@pytest.mark.parametrize("path", MODULES, ids=_ids(MODULES))
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


def test_the_core_has_its_rooms_and_each_says_what_it_holds_and_may_import():
    rooms = {p.name for p in PACKAGES if p != CORE}
    assert {"api", "jobframework", "admission", "placement", "tas", "scheduling", "config"} <= rooms
    for package in PACKAGES:
        if package == CORE:
            continue
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
        assert "import" in doc.lower(), f"{package.name}/__init__.py: say what the room may import"


def _core_imports():
    """Module -> the core modules it imports, at any depth of the file (a late import in
    a function is an arrow too)."""
    names = {}
    for path in MODULES:
        parts = path.relative_to(CORE.parents[1]).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    edges = {name: set() for name in names}
    for name, path in names.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            edges[name].update(
                t for t in targets if t in names and t != name and names[t].name != "__init__.py"
            )
    return edges


def import_circles(edges):
    """The strongly connected sets of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            circle = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                circle.append(w)
                if w == v:
                    break
            if len(circle) > 1:
                circles.append(sorted(circle))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return circles


def test_the_circle_finder_finds_a_circle():
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_the_core_imports_itself_back_through_others():
    """Whatever two modules share lives in a module below both (#47)."""
    assert import_circles(_core_imports()) == []


MAX_MODULE_LINES = 800


def test_no_module_of_the_extender_is_over_800_lines_unless_it_is_one_table():
    too_long = []
    for path in sorted(EXTENDER.rglob("*.py")):
        text = path.read_text()
        doc = ast.get_docstring(ast.parse(text)) or ""
        if len(text.splitlines()) > MAX_MODULE_LINES and "table" not in doc.splitlines()[0]:
            too_long.append(str(path.relative_to(EXTENDER.parent)))
    assert too_long == [], f"split these modules by concern: {too_long}"


def test_no_folder_of_the_extender_holds_more_than_25_modules():
    crowded = [
        str(d.relative_to(EXTENDER.parent))
        for d in [EXTENDER, *EXTENDER.rglob("*")]
        if d.is_dir() and len([p for p in d.glob("*.py") if p.name != "__init__.py"]) > 25
    ]
    assert crowded == [], f"group these modules by concern, as sub-packages: {crowded}"
