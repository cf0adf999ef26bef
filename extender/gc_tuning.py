"""Garbage-collector settings for a long-lived scheduler process, applied by entry points."""

from __future__ import annotations

import gc

# Measured on the 50,000-workload benchmark: with automatic collection, a scheduling cycle
# that happens to trigger a young collection stalls 15-20 ms, a middle one over 100 ms,
# because tens of thousands of live workloads are walked. Reference counting frees almost
# everything the core allocates (about 5,000 objects in cycles over the whole run), so
# automatic collection is switched off and a collection runs only when the process is idle
# (the controller's loop: Controller._collect_if_due).


def tune_for_scheduling() -> None:
    """Collect once, freeze what is alive (configuration), and stop automatic collection."""
    gc.collect()
    gc.freeze()
    gc.disable()
