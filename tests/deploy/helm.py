"""A renderer for the few Go-template constructs Tower's chart uses (test code: Helm cannot be
installed on these machines). It fails on any other construct, which keeps the chart thin:
values (`{{ .Values.a.b }}`, `| quote`), `{{- toYaml .Values.x | nindent N }}`, `if` on a
value (with `not`), the release-namespace guard (`ne .Release.Namespace "..."` and `fail`),
and `end`. `make e2e` compares it with `helm template` where Helm exists."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from tests import yamlc

ACTION = re.compile(r"(\s*)\{\{(-?)\s*(.*?)\s*(-?)\}\}")


class TemplateError(Exception):
    pass


def _value(path: str, values: dict[str, Any], release: dict[str, Any]) -> Any:
    root, *keys = path.lstrip(".").split(".")
    node: Any = {"Values": values, "Release": release}[root]
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def render(text: str, values: dict[str, Any], release: dict[str, Any]) -> str:
    out: list[str] = []
    stack: list[bool] = []  # whether each open `if` renders
    pos = 0
    for match in ACTION.finditer(text):
        leading, trim_left, body, _trim_right = match.groups()
        literal = text[pos : match.start()] + ("" if trim_left else leading)
        if all(stack):
            out.append(literal)
        pos = match.end()
        if body.startswith("if "):
            condition = body[3:].strip()
            negate = condition.startswith("not ")
            if negate:
                condition = condition[4:]
            guard = re.fullmatch(r'ne (\.Release\.\w+) "([^"]*)"', condition)
            if guard:
                result = _value(guard.group(1), values, release) != guard.group(2)
            elif re.fullmatch(r"\.Values(\.\w+)+", condition):
                result = bool(_value(condition, values, release))
            else:
                raise TemplateError(f"unsupported condition: {condition}")
            stack.append(result != negate)
        elif body == "end":
            if not stack:
                raise TemplateError("end without if")
            stack.pop()
        elif not all(stack):
            continue
        elif body.startswith("fail "):
            raise TemplateError(json.loads(body[5:]))
        elif re.fullmatch(r"\.(Values|Release)(\.\w+)+", body):
            out.append(_text(_value(body, values, release)))
        elif m := re.fullmatch(r"(\.Values(?:\.\w+)+) \| quote", body):
            out.append(json.dumps(_text(_value(m.group(1), values, release))))
        elif m := re.fullmatch(r"toYaml (\.Values(?:\.\w+)+) \| nindent (\d+)", body):
            dumped = yaml.safe_dump(_value(m.group(1), values, release), sort_keys=False)
            pad = " " * int(m.group(2))
            out.append("\n" + "\n".join(pad + line for line in dumped.rstrip().split("\n")))
        else:
            raise TemplateError(f"unsupported template action: {body}")
    if stack:
        raise TemplateError("if without end")
    out.append(text[pos:])
    return "".join(out)


def merge(base: Any, override: Any) -> Any:
    """Values over defaults, as Helm merges them (maps deeply, everything else replaced)."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for k, v in override.items():
            out[k] = merge(base[k], v) if k in base else v
        return out
    return override


def template(
    chart: Path, overrides: dict[str, Any] | None = None, namespace: str = "tower-system"
) -> list[dict[str, Any]]:
    """What `helm template` renders: the chart's CRDs, then its templates, as objects."""
    values = merge(yamlc.safe_load((chart / "values.yaml").read_text()), overrides or {})
    release = {"Namespace": namespace, "Name": "tower"}
    docs: list[dict[str, Any]] = []
    for path in sorted((chart / "crds").glob("*.yaml")):
        docs += [d for d in yamlc.safe_load_all(path.read_text()) if d]
    for path in sorted((chart / "templates").glob("*.yaml")):
        rendered = render(path.read_text(), values, release)
        docs += [d for d in yamlc.safe_load_all(rendered) if d]
    return docs
