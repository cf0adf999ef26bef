"""Counts the Kueue conformance cases as they run and prints the tally after the session."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

_HERE = Path(__file__).parent
_TALLY: Counter[str] = Counter()
_NOT_PORTED: dict[str, str] = {}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and Path(module.__file__).resolve().is_relative_to(_HERE):
            _NOT_PORTED.update(getattr(module, "NOT_PORTED", {}))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not Path(report.fspath).resolve().is_relative_to(_HERE):
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        if hasattr(report, "wasxfail"):
            if report.outcome != "skipped":
                _TALLY["xpass"] += 1
            elif str(report.wasxfail).startswith("not built"):
                _TALLY["not built"] += 1
            else:
                _TALLY["xfail"] += 1
        else:
            _TALLY[report.outcome] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    ran = sum(_TALLY.values()) - _TALLY["skipped"]
    if not ran:
        return
    terminalreporter.write_line(
        f"Kueue v0.19.2 conformance: {_TALLY['passed']} of {ran} ported cases pass, "
        f"{_TALLY['xfail']} decided differently on purpose (xfail, docs/kueue.md#conformance), "
        f"{_TALLY['not built']} need a part not built yet (xfail), {_TALLY['failed']} fail; {len(_NOT_PORTED)} rows not expressible in Tower's models "
        f"(NOT_PORTED in each module says why); {_TALLY['skipped']} skipped, each with its "
        "reason (a feature gate off by default in Kueue, or a part not built yet)"
    )
