"""YAML that kubectl reads back as written: strings that look like numbers are quoted.

PyYAML writes YAML 1.1, where `1e3`, `036e0`, `09`, `0o17` and `y` are strings and go out
bare. kubectl (Go's YAML) reads them as numbers and booleans, so a ClusterQueue or namespace
named `1e3` (a valid DNS label) would come back as 1000. Such strings are single-quoted;
every other value is written exactly as PyYAML writes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import yaml

# Plain scalars that Go's YAML (kubectl) resolves to a number once it has dropped every
# underscore: decimal with leading zeros, 0o/0x/0b, floats with an exponent but no dot, .inf
# and .nan. And the one-letter booleans y and n, which PyYAML does not know.
_NUMBER_TO_GO = re.compile(
    r"""[-+]?(?:
        [0-9]+
        | 0[oO][0-7]+ | 0[xX][0-9a-fA-F]+ | 0[bB][01]+
        | (?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?
        | \.(?:inf|Inf|INF)
    )
    | \.(?:nan|NaN|NAN)""",
    re.VERBOSE,
)
_BOOLEAN_TO_GO = frozenset({"y", "Y", "n", "N"})


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper, quoting the strings kubectl would take for numbers or booleans."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    digits = value.replace("_", "")
    if value in _BOOLEAN_TO_GO or (digits and _NUMBER_TO_GO.fullmatch(digits)):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="'")
    return dumper.represent_str(value)


_Dumper.add_representer(str, _represent_str)


def dump(data: Any, **options: Any) -> str:
    """One YAML document (PyYAML's options: sort_keys, width, ...)."""
    text: str = yaml.dump(data, Dumper=_Dumper, **options)
    return text


def dump_all(documents: Iterable[Any], **options: Any) -> str:
    """Several YAML documents separated by ---."""
    text: str = yaml.dump_all(documents, Dumper=_Dumper, **options)
    return text
