"""Kueue's resources.excludeResourcePrefixes and resources.transformations, table-driven
(extender/core/config/resource_policy.py), and read from Kueue's Configuration."""

from __future__ import annotations

from fractions import Fraction

import pytest

from extender.core.api.models import PodSet, Workload
from extender.core.config.kueue_config import parse
from extender.core.config.resource_policy import ResourcePolicy, Transformation, apply, effective
from extender.core.config.schema import ConfigError

GI = 2**30
MIG = Transformation(
    "nvidia.com/mig-1g.5gb",
    retain=False,
    outputs=(
        ("example.com/accelerator-memory", Fraction(5 * GI)),
        ("example.com/credits", Fraction(10)),
    ),
)
CREDITS = Transformation("cpu", retain=True, outputs=(("example.com/credits", Fraction(3)),))
PER_CORE = Transformation(
    "example.com/nic",
    retain=True,
    multiply_by="cpu",
    outputs=(("example.com/bandwidth", Fraction(2)),),
)


@pytest.mark.parametrize(
    ("requests", "policy", "expected"),
    [
        ({"cpu": 1000}, ResourcePolicy(), {"cpu": 1000}),
        (
            {"cpu": 1000, "example.com/ignored": 1, "example.com/also": 2, "memory": 5},
            ResourcePolicy(exclude_prefixes=("example.com/",)),
            {"cpu": 1000, "memory": 5},
        ),
        (  # Kueue's documentation example: a MIG slice replaced by memory and credits
            {"cpu": 500, "nvidia.com/mig-1g.5gb": 2},
            ResourcePolicy(transformations={MIG.input: MIG}),
            {"cpu": 500, "example.com/accelerator-memory": 10 * GI, "example.com/credits": 20},
        ),
        (  # Retain keeps the input; outputs of several inputs are summed
            {"cpu": 500, "nvidia.com/mig-1g.5gb": 1},
            ResourcePolicy(transformations={MIG.input: MIG, "cpu": CREDITS}),
            {
                "cpu": 500,
                "example.com/accelerator-memory": 5 * GI,
                "example.com/credits": 12,  # 10 + ceil(0.5 * 3)
            },
        ),
        (  # multiplyBy: the outputs scale with the named resource's quantity too
            {"cpu": 4000, "example.com/nic": 1},
            ResourcePolicy(transformations={PER_CORE.input: PER_CORE}),
            {"cpu": 4000, "example.com/nic": 1, "example.com/bandwidth": 8},
        ),
        (  # excluded before transformed: an excluded input produces nothing
            {"cpu": 1000, "nvidia.com/mig-1g.5gb": 1},
            ResourcePolicy(exclude_prefixes=("nvidia.com/",), transformations={MIG.input: MIG}),
            {"cpu": 1000},
        ),
        (  # a negative factor is an allowance, never below zero
            {"cpu": 1000},
            ResourcePolicy(
                transformations={
                    "cpu": Transformation("cpu", outputs=(("example.com/credits", Fraction(-1)),))
                }
            ),
            {"cpu": 1000, "example.com/credits": 0},
        ),
    ],
)
def test_what_one_pod_asks_for_under_the_policy(requests, policy, expected):
    assert effective(requests, policy) == expected


def test_a_workload_is_measured_by_its_transformed_requests():
    workload = Workload(
        "default", "w", "u", "q", (PodSet("main", 3, {"cpu": 500, "nvidia.com/mig-1g.5gb": 1}),)
    )
    policy = ResourcePolicy(transformations={MIG.input: MIG})
    [ps] = apply(workload, policy).pod_sets
    assert ps.totals == {
        "cpu": 1500,
        "example.com/accelerator-memory": 15 * GI,
        "example.com/credits": 30,
    }
    assert apply(workload, ResourcePolicy()) is workload


def config(**resources):
    return parse(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "resources": resources,
        }
    )


def test_the_configuration_gives_the_policy():
    got = config(
        excludeResourcePrefixes=["example.com/"],
        transformations=[
            {
                "input": "nvidia.com/mig-1g.5gb",
                "strategy": "Replace",
                "outputs": {"example.com/accelerator-memory": "5Gi", "example.com/credits": 10},
            }
        ],
    )
    assert got.resource_policy == ResourcePolicy(("example.com/",), {MIG.input: MIG})
    assert not [w for w in got.warnings("f") if "resources" in w]


def test_an_output_that_is_no_quantity_names_the_field():
    with pytest.raises(ConfigError) as err:
        config(transformations=[{"input": "a", "outputs": {"b": "lots"}}])
    assert str(err.value).startswith("resources.transformations[0].outputs[b]: ")
