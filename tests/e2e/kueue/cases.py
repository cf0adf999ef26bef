"""Kueue's e2e cases as data, and the decorator that ties a ported test to its case.

cases.json lists every `It` and `Entry` of Kueue v0.19.2's e2e suite (scripts/kueue_e2e_cases.py).
A ported test names its case by Go file and full title; a name that is not in the list is an
error at import, so a typo cannot leave a case uncounted. A case that differs on purpose is a
strict xfail whose reason names the docs/kueue.md section that argues it; one that cannot run
here is a skip that says why, and neither counts as passing. Only the assertion that states
the difference raises `DifferenceError`: any other failure of such a case is a failure.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import pytest

CASES_FILE = Path(__file__).with_name("cases.json")
DOCS = "docs/kueue.md"

F = TypeVar("F", bound=Callable[..., Any])


class DifferenceError(AssertionError):
    """Kueue's behaviour, asserted where Tower differs on purpose (a `differs=` case's xfail)."""


@dataclass(frozen=True)
class Case:
    file: str
    title: str

    @property
    def key(self) -> str:
        return f"{self.file}::{self.title}"


@cache
def all_cases() -> dict[str, Case]:
    document = json.loads(CASES_FILE.read_text())
    return {f"{c['file']}::{c['title']}": Case(c["file"], c["title"]) for c in document["cases"]}


def _case(file: str, title: str) -> Case:
    go_file = file if file.startswith("test/e2e/") else f"test/e2e/{file}"
    case = Case(go_file, title)
    if case.key not in all_cases():
        near = [k for k in all_cases() if k.startswith(go_file)]
        raise LookupError(
            f"no Kueue e2e case {title!r} in {go_file} ({len(near)} cases in that file; "
            "see tests/e2e/kueue/cases.json)"
        )
    return case


def kueue_case(
    file: str,
    title: str,
    *,
    differs: str | None = None,
    not_expressible: str | None = None,
) -> Callable[[F], F]:
    """Mark a test as the port of one Kueue e2e case.

    `differs` names the docs/kueue.md section that explains why Tower does otherwise (the test
    then asserts Kueue's behaviour and is a strict xfail); `not_expressible` says why the case
    cannot run on this machine (a skip)."""
    case = _case(file, title)
    if differs is not None and not differs.startswith("#"):
        raise ValueError(f"differs= must name a {DOCS} section ('#anchor'), not {differs!r}")

    def mark(test: F) -> F:
        marked: Any = pytest.mark.kueue_case(case.key)(test)
        if differs is not None:
            marked = pytest.mark.xfail(
                strict=True, raises=DifferenceError, reason=f"differs on purpose: {DOCS}{differs}"
            )(marked)
        if not_expressible is not None:
            marked = pytest.mark.skip(reason=f"not expressible here: {not_expressible}")(marked)
        return marked  # type: ignore[no-any-return]

    return mark


def not_expressible_cases(file_prefix: str, why: str) -> dict[str, str]:
    """Every case of a folder (or file) of the suite that cannot run here, with the reason."""
    return {k: why for k, c in all_cases().items() if c.file.startswith(f"test/e2e/{file_prefix}")}
