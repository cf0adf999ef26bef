"""docs/kueue.md's "Feature gates" section, written from the table in core/config/feature_gates.py.

`python -m extender.kube.generators.feature_gates docs/kueue.md` rewrites the section between
its two markers; tests/unit/kube/test_feature_gates_doc.py fails when the page and the table
differ.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Sequence

from extender.core.config.feature_gates import GATES, Stand

BEGIN = "<!-- feature-gates: generated from extender/core/config/feature_gates.py -->"
END = "<!-- feature-gates: end -->"
_WIDTH = 95  # the page's prose width

_MEANING = {
    Stand.IMPLEMENTED: "Tower follows the gate, on or off",
    Stand.ALWAYS: "Tower behaves as the default; the other value is refused",
    Stand.ABSENT: "Tower has no such behaviour; `true` is refused",
    Stand.INTERNAL: "inside Kueue's implementation; either value is accepted",
}


def section() -> str:
    """The section's text between the markers."""
    counts = {stand: sum(g.stand is stand for g in GATES) for stand in Stand}
    intro = (
        f"Every feature gate of Kueue v0.19.2 ({len(GATES)}), with its default and stage at "
        "v0.19.2 and Tower's stand on it. Set them as Kueue's manager takes them: the "
        "Configuration's `featureGates`, or `--feature-gates Name=true,Other=false` "
        "(`TOWER_FEATURE_GATES`); a gate named by the flag wins over the file's (Kueue "
        "refuses the two together). `python -m webhook --config` checks the file's gates the "
        "same way. An unknown name, or a locked gate asked the other way, is refused with "
        "Kueue's error; `AllAlpha` and `AllBeta` set every gate of their stage not named."
    )
    refusal = (
        "A refusal is one line and exit status 2, e.g. `error: --feature-gates: feature gate "
        "ElasticJobsViaWorkloadSlicesWithTAS=true is not supported: Tower places a scale-up "
        "slice's pods on topology domains afresh (the old slice's kept)`."
    )
    lines = [textwrap.fill(intro, _WIDTH), ""]
    lines += [f"- **{stand}** ({counts[stand]}): {_MEANING[stand]}." for stand in Stand]
    lines += [
        "",
        textwrap.fill(refusal, _WIDTH),
        "",
        "| gate | default | stage | Tower | what Tower does |",
        "|---|---|---|---|---|",
    ]
    for g in sorted(GATES, key=lambda g: g.name):
        stage = f"{g.stage}, locked" if g.locked else str(g.stage)
        default = "true" if g.default else "false"
        lines.append(f"| `{g.name}` | {default} | {stage} | {g.stand} | {g.tower} |")
    return "\n".join(lines) + "\n"


def rewrite(page: str) -> str:
    """The page with the section between its markers replaced by the table's."""
    head, begin, rest = page.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"the page has no {BEGIN!r} ... {END!r} markers")
    return f"{head}{BEGIN}\n{section()}{END}{tail}"


def main(argv: Sequence[str] | None = None) -> int:
    paths = list(sys.argv[1:] if argv is None else argv) or ["docs/kueue.md"]
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            page = handle.read()
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(rewrite(page))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
