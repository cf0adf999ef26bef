"""Waiting for an outcome that lands on its own time (test code).

A controller writes some outcomes after others, and some in the background: an Event is
sent by the recorder's own thread, a pending reason or a queue's counts with spare budget,
a metric when a step is done. A test that reads such an outcome right after another one
appeared reads it too early on a loaded machine. `wait_until` polls what the test looks at
until it is what the test wants, within a bounded time; on a timeout the failure says what
was awaited and what was last seen. The test then asserts on what was returned, as strictly
as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT = 10.0
_SHOWN = 2000  # characters of what was last seen in a failure's message


def wait_until(
    observe: Callable[[], T],
    done: Callable[[T], Any] = bool,
    *,
    what: str,
    timeout: float = DEFAULT_TIMEOUT,
    interval: float = 0.02,
) -> T:
    """Call `observe()` until `done(observation)` is truthy and return that observation;
    at `timeout` seconds, fail naming `what` and the last observation."""
    deadline = time.monotonic() + timeout
    while True:
        seen = observe()
        if done(seen):
            return seen
        if time.monotonic() >= deadline:
            shown = repr(seen)
            if len(shown) > _SHOWN:
                shown = shown[:_SHOWN] + f"... ({len(shown)} characters)"
            raise AssertionError(f"waited {timeout:g}s for {what}; last seen: {shown}")
        time.sleep(interval)


def event_reasons(api: Any, namespace: str = "default") -> set[tuple[str, str, str]]:
    """(involved kind, involved name, reason) of every Event in a namespace of the double."""
    return {
        (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"])
        for e in api.list("events", namespace)
    }


def admitted_or_why(workload: Any) -> str | None:
    """ "admitted" for an Admitted Workload, its QuotaReserved=False message for a waiting
    one, None while neither is said yet."""
    conditions = {
        c.get("type"): c for c in ((workload or {}).get("status") or {}).get("conditions") or []
    }
    if (conditions.get("Admitted") or {}).get("status") == "True":
        return "admitted"
    reserved = conditions.get("QuotaReserved") or {}
    if reserved.get("status") == "False" and reserved.get("message"):
        return str(reserved["message"])
    return None


def until_one_waits(
    make: Callable[[int], T],
    workload_of: Callable[[T], Any],
    *,
    most: int = 9,
    timeout: float = DEFAULT_TIMEOUT,
) -> tuple[T, str]:
    """Make copies (1, 2, ...) until one is not admitted: that copy and the reason its
    Workload gives. Fails if `most` copies were all admitted."""
    for i in range(1, most + 1):
        made = make(i)
        outcome = wait_until(
            lambda made=made: admitted_or_why(workload_of(made)),
            what=f"copy {i} admitted or told why not",
            timeout=timeout,
        )
        if outcome != "admitted":
            return made, outcome
    raise AssertionError(f"{most} copies were all admitted: the quota never ran out")
