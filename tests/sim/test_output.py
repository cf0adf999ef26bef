"""The simulator's JSON is what `json.dumps(indent=2)` writes, byte for byte, however fast."""

import json
from typing import Any

import pytest

from extender.sim.engine import Simulation
from extender.sim.output import to_json


def simulation(events: list[dict[str, Any]]) -> Simulation:
    return Simulation(events, None, 0.0, {})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "events",
    [
        [{"time": 0.0, "event": "Created", "name": "a", "flavors": {}, "placement": []}],
        [{"time": 12.5, "event": "Admitted", "name": "b", "flavors": {"main": {"cpu": "x"}}}],
        [{"time": 1e-06, "event": "Created", "name": "tiny"}],  # json: 1e-06, orjson: 1e-6
        [{"time": 1.0, "event": "Pending", "message": "needs 3 cpu — 1 free"}],  # non-ASCII
        [{"time": 2e16, "event": "Finished", "name": "late"}],
        [],
    ],
    ids=["empty-containers", "nested", "exponent", "non-ascii", "huge", "no-events"],
)
def test_json_output_is_json_dumps_exactly(events: list[dict[str, Any]]) -> None:
    pending = [{"namespace": "default", "name": "x", "reason": "Pending", "message": "m"}]
    expected = json.dumps({"events": events, "pending": pending}, indent=2, sort_keys=False)
    assert to_json(simulation(events), pending) == expected
