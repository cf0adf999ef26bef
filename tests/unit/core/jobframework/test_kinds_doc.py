"""docs/kueue.md's "Kinds of job" table has one row per registered kind (and per kind whose pods
are queued one by one), under its integration name, saying whether it is on by default as the
registry says."""

from __future__ import annotations

import re
from pathlib import Path

from extender.core.jobframework import registry

DOC = Path(__file__).resolve().parents[4] / "docs" / "kueue.md"


def rows() -> dict[str, tuple[str, str]]:
    """integration -> (kind and apiVersion, on by default) of each row of the table."""
    text = DOC.read_text().split("## Kinds of job", 1)[1].split("\n## ", 1)[0]
    out = {}
    for line in text.splitlines():
        found = re.match(r"\| (\w+) `([^`]+)` \(`([^`]+)`\) \| (yes|no)", line)
        if found:
            kind, version, integration, default = found.groups()
            out[integration] = (f"{kind} {version}", default)
    return out


def test_every_registered_kind_has_its_row():
    table = rows()
    defaults = {a.framework for a in registry.enabled()}
    for framework, adapter in registry.ADAPTERS.items():
        assert framework in table, f"docs/kueue.md has no row for {framework}"
        assert table[framework][0] == f"{adapter.kind} {adapter.api_version}"
        assert table[framework][1] == ("yes" if framework in defaults else "no"), framework
    parents = {p.framework for p in registry.enabled_parents()}
    for framework, parent in registry.PARENTS.items():
        assert table[framework] == (
            f"{parent.kind} {parent.group}/{parent.version}",
            "yes" if framework in parents else "no",
        )
    assert set(table) == {*registry.ADAPTERS, *registry.PARENTS}
