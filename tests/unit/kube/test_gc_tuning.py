"""Automatic collection is off while leading; the controller's loop collects when idle."""

import gc

from extender.gc_tuning import tune_for_scheduling
from tests.fakes import FakeKube, controller_over


def test_tuning_stops_automatic_collection_and_a_collection_still_frees_cycles():
    was_enabled = gc.isenabled()
    try:
        tune_for_scheduling()
        assert not gc.isenabled()
        a, b = [], []
        a.append(b)
        b.append(a)
        del a, b
        assert gc.collect(1) >= 2
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()


def test_the_idle_loop_collects_the_young_generations_and_now_and_then_everything():
    ctl, clock = controller_over(FakeKube(), status_interval=0.01)
    collected: list[int] = []
    ctl.collect = collected.append
    for _ in range(3):  # within the first 5 s: nothing yet
        ctl.step()
        clock.advance(1)
    assert collected == []
    for _ in range(125):
        clock.advance(5)
        ctl.step()
    assert collected.count(2) == 2  # every 60th idle collection is a full one
    assert collected.count(1) == 123


def test_a_busy_loop_does_not_collect():
    ctl, clock = controller_over(FakeKube(), status_interval=0.01)
    collected: list[int] = []
    ctl.collect = collected.append
    turn = ctl.turn

    def busy_turn() -> None:
        turn()
        ctl.ctx.queues.workloads.add("default/busy")  # a watch event arrived meanwhile

    ctl.turn = busy_turn  # type: ignore[method-assign]
    for _ in range(5):
        clock.advance(10)
        ctl.step()
    assert collected == []
