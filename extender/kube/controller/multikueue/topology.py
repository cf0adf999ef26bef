"""The manager's delayed topology requests, made Ready by the worker whose TAS placed them."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from extender.core.api.topology import DELAYED_PENDING, DELAYED_READY
from extender.core.jobframework.adapter import as_mapping

Obj = dict[str, Any]


def placed_on_worker(local: Mapping[str, Any], remote: Mapping[str, Any] | None) -> Obj | None:
    """The manager's status.admission with `delayedTopologyRequest: Ready` on each podSet
    that the worker's admission placed (it carries a topologyAssignment), or None when none
    is still Pending.

    A MultiKueue ClusterQueue's topology podSets are reserved without a placement: the pods
    run on the worker, whose own TAS places them. Kueue then marks the manager's requests
    Ready in the same write that makes its check Ready, and copies no assignment back (the
    manager's nodes are not where the pods are). The rest of the admission is kept as it is,
    byte for byte: the status patch replaces the whole podSetAssignments list."""
    admission = as_mapping(as_mapping(local.get("status")).get("admission"))
    theirs = as_mapping(as_mapping((remote or {}).get("status")).get("admission"))
    if not admission or not theirs:
        return None
    placed = {
        psa.get("name")
        for psa in theirs.get("podSetAssignments") or ()
        if isinstance(psa, Mapping) and psa.get("topologyAssignment") is not None
    }
    out = copy.deepcopy(dict(admission))
    changed = False
    for psa in out.get("podSetAssignments") or ():
        if (
            isinstance(psa, dict)
            and psa.get("name") in placed
            and psa.get("delayedTopologyRequest") == DELAYED_PENDING
        ):
            psa["delayedTopologyRequest"] = DELAYED_READY
            changed = True
    return out if changed else None
