import gc

from extender.gc_tuning import collect_when_idle, tune_for_scheduling


def test_tuning_stops_automatic_collection_and_idle_collection_still_frees_cycles():
    was_enabled = gc.isenabled()
    try:
        tune_for_scheduling()
        assert not gc.isenabled()
        a, b = [], []
        a.append(b)
        b.append(a)
        del a, b
        assert collect_when_idle() >= 2
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()
