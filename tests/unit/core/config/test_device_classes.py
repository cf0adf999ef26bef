"""resources.deviceClassMappings: read into the resource policy, refused with Kueue's errors."""

from __future__ import annotations

from typing import Any

import pytest

from extender.core.config.kueue_config import parse
from extender.core.config.schema import ConfigError


def config(*mappings: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "resources": {"deviceClassMappings": list(mappings)},
        **extra,
    }


def test_the_setup_pages_mapping_is_acted_on_and_not_warned():
    # tasks/manage/setup_dra.md, both of its examples.
    parsed = parse(
        config(
            {"name": "example.com/gpu", "deviceClassNames": ["gpu.example.com"]},
            {
                "name": "example.com/fast-gpu",
                "deviceClassNames": ["gpu-a100.example.com", "gpu-h100.example.com"],
            },
        )
    )
    assert parsed.resource_policy.device_classes == {
        "gpu.example.com": "example.com/gpu",
        "gpu-a100.example.com": "example.com/fast-gpu",
        "gpu-h100.example.com": "example.com/fast-gpu",
    }
    assert not any("deviceClassMappings" in w for w in parsed.warnings("kueue.yaml"))
    assert not parsed.resource_policy  # nothing for `apply` to change in a pod's requests


PATH = "resources.deviceClassMappings"


@pytest.mark.parametrize(
    ("mappings", "want"),
    [
        (
            [{"name": "gpu", "deviceClassNames": []}],
            f"{PATH}[0].deviceClassNames: Required value: at least one device class name is "
            "required",
        ),
        (
            [
                {"name": "gpu", "deviceClassNames": ["a.example.com"]},
                {"name": "gpu", "deviceClassNames": ["b.example.com"]},
            ],
            f'{PATH}[1].name: Duplicate value: "gpu"',
        ),
        (
            [
                {"name": "gpu", "deviceClassNames": ["a.example.com"]},
                {"name": "other", "deviceClassNames": ["a.example.com"]},
            ],
            f'{PATH}[1].deviceClassNames[0]: Invalid value: "a.example.com": device class '
            "already mapped to resource gpu",
        ),
        (
            [{"name": "gpu", "deviceClassNames": ["a.example.com", "a.example.com"]}],
            f'{PATH}[0].deviceClassNames[1]: Duplicate value: "a.example.com"',
        ),
        (
            [{"name": "gpu", "deviceClassNames": [f"c{i}.example.com" for i in range(9)]}],
            f"{PATH}[0].deviceClassNames: Too many: 9: must have at most 8 items",
        ),
        (
            [{"name": f"r{i}", "deviceClassNames": [f"c{i}"]} for i in range(17)],
            f"{PATH}: Too many: 17: must have at most 16 items",
        ),
        (
            [{"name": "-gpu", "deviceClassNames": ["a"]}],
            f'{PATH}[0].name: Invalid value: "-gpu": name part must consist of alphanumeric '
            "characters, '-', '_' or '.', and must start and end with an alphanumeric "
            "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation "
            "is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
        (
            [{"name": "Example.com/gpu", "deviceClassNames": ["a"]}],
            f'{PATH}[0].name: Invalid value: "Example.com/gpu": prefix part a lowercase RFC '
            "1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character (e.g. 'example.com', regex "
            "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*"
            "[a-z0-9])?)*')",
        ),
    ],
    ids=[
        "no device class",
        "a resource name twice",
        "a device class in two mappings",
        "a device class twice in one mapping",
        "more than 8 device classes",
        "more than 16 mappings",
        "a name that is no qualified name",
        "a prefix that is no DNS subdomain",
    ],
)
def test_kueues_refusals(mappings, want):
    with pytest.raises(ConfigError) as err:
        parse(config(*mappings))
    assert str(err.value) == want


def test_counter_sources_are_refused_naming_what_tower_does_instead():
    mapping = {
        "name": "gpu.memory",
        "deviceClassNames": ["gpu.example.com"],
        "sources": [
            {
                "counter": {
                    "name": "memory",
                    "driver": "gpu.example.com",
                    "deviceSelector": {"cel": {"expression": "device.driver == 'x'"}},
                }
            }
        ],
    }
    with pytest.raises(ConfigError) as err:
        parse(config(mapping))
    assert str(err.value).startswith(
        f"{PATH}[0].sources[0].counter: counter sources need "
        "KueueDRAIntegrationPartitionableDevices, which Tower does not implement"
    )


@pytest.mark.parametrize(
    ("gates", "want"),
    [
        ({"KueueDRAIntegration": False}, None),
        (
            {
                "KueueDRAIntegration": False,
                "KueueDRAIntegrationExtendedResource": False,
                "KueueDRAIntegrationPartitionableDevices": False,
                "KueueDRARejectWorkloadsWhenDRADisabled": False,
            },
            "ok",
        ),
    ],
    ids=[
        "off alone: its dependants are on (Kueue's error)",
        "off with its dependants: accepted",
    ],
)
def test_the_integration_is_turned_off_as_kueue_takes_it(gates, want):
    doc = config({"name": "gpu", "deviceClassNames": ["gpu.example.com"]}, featureGates=gates)
    if want is None:
        with pytest.raises(ConfigError) as err:
            parse(doc)
        assert str(err.value) == (
            "featureGates: KueueDRAIntegrationExtendedResource requires KueueDRAIntegration "
            "to be enabled"
        )
    else:
        assert parse(doc).feature_gates["KueueDRAIntegration"] is False
