"""The Configuration's resources.deviceClassMappings, checked as Kueue v0.19.2 checks them.

Kueue's validateDeviceClassMappings (pkg/config/validation.go), in its words: at most 16
mappings; each `name` and each of at most 8 `deviceClassNames` a qualified name (a label key)
of at most 253 characters; no name twice; a DeviceClass in one mapping only. The first error
is the one line said. Counter and capacity `sources` (quota by a device's counters or
capacity, KueueDRAIntegrationPartitionableDevices and ...ConsumableCapacity) need devices'
ResourceSlices, which Tower does not read: a mapping with sources is refused, naming them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from extender.core.config.schema import ConfigError

PATH = "resources.deviceClassMappings"

_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME = re.compile(f"^{_NAME_FMT}$")
_SUBDOMAIN_FMT = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_SUBDOMAIN = re.compile(f"^{_SUBDOMAIN_FMT}$")
_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    f"validation is '{_NAME_FMT}')"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    f"regex used for validation is '{_SUBDOMAIN_FMT}')"
)


def label_key_errors(value: str) -> list[str]:
    """Kubernetes' IsLabelKey (IsQualifiedName) in apimachinery's words."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) > 2:
        return [
            f"a valid label key {_NAME_MSG} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errors.append("prefix part must be no more than 253 bytes")
            if not _SUBDOMAIN.match(prefix):
                errors.append(f"prefix part {_SUBDOMAIN_MSG}")
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 bytes")
    if not _NAME.match(name):
        errors.append(f"name part {_NAME_MSG}")
    return errors


def _invalid(path: str, value: str, detail: str) -> ConfigError:
    return ConfigError(f'{path}: Invalid value: "{value}": {detail}')


def _check_name(path: str, value: str) -> None:
    errors = label_key_errors(value)
    if errors:
        raise _invalid(path, value, "; ".join(errors))
    if len(value) > 253:
        raise _invalid(path, value, "must not exceed 253 characters")


def check(mappings: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """DeviceClass -> quota resource, or ConfigError (Kueue's first error) naming the field."""
    if len(mappings) > 16:
        raise ConfigError(f"{PATH}: Too many: {len(mappings)}: must have at most 16 items")
    names: set[str] = set()
    classes: dict[str, str] = {}
    for i, mapping in enumerate(mappings):
        here = f"{PATH}[{i}]"
        name = str(mapping.get("name") or "")
        _check_name(f"{here}.name", name)
        if name in names:
            raise ConfigError(f'{here}.name: Duplicate value: "{name}"')
        names.add(name)
        device_classes = [str(c) for c in mapping.get("deviceClassNames") or []]
        if not device_classes:
            raise ConfigError(
                f"{here}.deviceClassNames: Required value: at least one device class name "
                "is required"
            )
        if len(device_classes) > 8:
            raise ConfigError(
                f"{here}.deviceClassNames: Too many: {len(device_classes)}: must have at most "
                "8 items"
            )
        seen: set[str] = set()
        for j, device_class in enumerate(device_classes):
            at = f"{here}.deviceClassNames[{j}]"
            _check_name(at, device_class)
            if device_class in seen:
                raise ConfigError(f'{at}: Duplicate value: "{device_class}"')
            seen.add(device_class)
            if device_class in classes and classes[device_class] != name:
                raise _invalid(
                    at,
                    device_class,
                    f"device class already mapped to resource {classes[device_class]}",
                )
            classes[device_class] = name
        for k, source in enumerate(mapping.get("sources") or []):
            kinds = [s for s in ("counter", "capacity") if (source or {}).get(s) is not None]
            if len(kinds) != 1:
                raise ConfigError(
                    f"{here}.sources[{k}]: exactly one source type must be set per entry"
                )
            gate = {
                "counter": "KueueDRAIntegrationPartitionableDevices",
                "capacity": "KueueDRAIntegrationConsumableCapacity",
            }[kinds[0]]
            raise ConfigError(
                f"{here}.sources[{k}].{kinds[0]}: {kinds[0]} sources need {gate}, which Tower "
                "does not implement (it reads no ResourceSlices): quota by device count only"
            )
    return classes
