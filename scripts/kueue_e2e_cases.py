"""List every case of Kueue's e2e suite (each `It`, each `Entry`) into tests/e2e/kueue/cases.json.

The port of Kueue's e2e suite (tests/e2e/kueue/) counts itself against this list, so a case
that nobody ported is counted as not passing rather than forgotten. The list is read from a
mirror of Kueue's repository at a tag, by gofmt's indentation: a case's title is its
Describe/Context/When path and its own text, as ginkgo prints it.

    python scripts/kueue_e2e_cases.py /path/to/kueue.git v0.19.2
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

# The suites the port covers; dra/ needs resource.k8s.io/v1 (not served by v1.32), upgrade/ an
# older Kueue release, kueueviz/ Kueue's own dashboard: listed, and counted as not expressible.
SUITES = (
    "test/e2e/singlecluster/",
    "test/e2e/sequential/",
    "test/e2e/tas/",
    "test/e2e/multikueue/",
    "test/e2e/certmanager/",
    "test/e2e/dra/",
)
NODE = re.compile(
    r"^(?P<indent>\t*)(?:var _ = )?(?:ginkgo\.)?"
    r"(?P<kind>Describe|DescribeTable|Context|When|It|Entry|FDescribe|FIt|FEntry)\((?P<rest>.*)$"
)
STRING = re.compile(r'^"((?:[^"\\]|\\.)*)"|^`([^`]*)`')


def _title(rest: str) -> str:
    match = STRING.match(rest.strip())
    if match:
        return (match.group(1) if match.group(1) is not None else match.group(2)).replace(
            '\\"', '"'
        )
    return rest.split(",")[0].strip()


def cases_of(source: str, path: str) -> list[dict[str, object]]:
    """The cases of one Go test file, each with its full title and line."""
    found: list[dict[str, object]] = []
    stack: list[tuple[int, str]] = []
    for number, line in enumerate(source.splitlines(), start=1):
        match = NODE.match(line)
        if not match:
            continue
        depth = len(match.group("indent"))
        kind = match.group("kind").lstrip("F")
        title = _title(match.group("rest"))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if kind in ("It", "Entry"):
            path_titles = [t for _, t in stack] + [title]
            found.append(
                {"file": path, "line": number, "kind": kind, "title": " ".join(path_titles)}
            )
        else:
            stack.append((depth, title))
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    repo, tag = argv[1], argv[2]
    names = subprocess.run(
        ["git", "-C", repo, "ls-tree", "-r", tag, "--name-only", "test/e2e"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    cases: list[dict[str, object]] = []
    for name in sorted(names):
        if not name.endswith("_test.go") or not name.startswith(SUITES):
            continue
        source = subprocess.run(
            ["git", "-C", repo, "show", f"{tag}:{name}"], check=True, capture_output=True, text=True
        ).stdout
        cases.extend(cases_of(source, name))
    out = Path(__file__).resolve().parent.parent / "tests/e2e/kueue/cases.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "source": f"kubernetes-sigs/kueue {tag}, test/e2e (Apache-2.0), "
        "listed by scripts/kueue_e2e_cases.py",
        "cases": cases,
    }
    out.write_text(json.dumps(document, indent=1) + "\n")
    print(f"{len(cases)} cases in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
