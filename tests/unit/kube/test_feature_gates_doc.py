"""docs/kueue.md's Feature gates section is the table of core/config/feature_gates.py, rendered."""

from __future__ import annotations

from pathlib import Path

import pytest

from extender.core.config.feature_gates import GATES
from extender.kube.generators.feature_gates import BEGIN, END, rewrite, section

PAGE = Path(__file__).resolve().parents[3] / "docs" / "kueue.md"


def test_the_page_lists_the_table_as_generated():
    page = PAGE.read_text()
    assert rewrite(page) == page, (
        "docs/kueue.md's Feature gates section differs from the table: run "
        "`python -m extender.kube.generators.feature_gates docs/kueue.md`"
    )


def test_every_gate_is_one_row_with_its_default_stage_and_stand():
    rows = [line for line in section().splitlines() if line.startswith("| `")]
    assert len(rows) == len(GATES)
    row = {r.split("`")[1]: r for r in rows}
    assert row["HierarchicalCohorts"].startswith(
        "| `HierarchicalCohorts` | true | GA, locked | always |"
    )
    assert row["ElasticJobsViaWorkloadSlices"].startswith(
        "| `ElasticJobsViaWorkloadSlices` | true | Beta | implemented |"
    )
    assert row["ElasticJobsViaWorkloadSlicesWithTAS"].startswith(
        "| `ElasticJobsViaWorkloadSlicesWithTAS` | false | Alpha | absent |"
    )


def test_a_page_without_the_markers_is_refused():
    with pytest.raises(ValueError, match="markers"):
        rewrite(f"# page\n{BEGIN}\nno end\n")
    assert END in rewrite(f"{BEGIN}\nold\n{END}\n")
