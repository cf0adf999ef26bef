"""YAML read with PyYAML's C loader: the upstream CRDs in tests/data are up to 1.3 MB each, and
the pure-Python loader spends seconds on each (the C one a tenth of that)."""

from __future__ import annotations

from typing import Any

import yaml

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(stream: Any) -> Any:
    return yaml.load(stream, Loader=_LOADER)


def safe_load_all(stream: Any) -> list[Any]:
    return list(yaml.load_all(stream, Loader=_LOADER))
