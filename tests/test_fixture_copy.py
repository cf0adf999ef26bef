"""Every captured fixture a test names is in the repository's copy (tests/data/real-apiserver),
so a clone without ../shared beside it runs the same tests (tests/fixtures.py falls back there).
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
COPY = TESTS / "data" / "real-apiserver"
FIXTURE = re.compile(
    r"""(load|admission_review)\(\s*"([a-z0-9_-]+/[^"]+\.json|[0-9]{2}-[^"/]+)"\)"""
)


def named_fixtures() -> set[str]:
    found = set()
    for path in TESTS.rglob("*.py"):
        for call, name in FIXTURE.findall(path.read_text()):
            found.add(name if call == "load" else f"admission/{name}.json")
    return found


def test_every_fixture_a_test_names_is_in_the_copy():
    names = named_fixtures()
    assert len(names) > 20  # the pattern still finds the calls
    missing = sorted(n for n in names if not (COPY / n).is_file())
    assert missing == [], f"copy these from shared/fixtures/real-apiserver/: {missing}"
