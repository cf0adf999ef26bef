"""A head's "does not fit" verdict, kept with the state it was found in and reused while unchanged.

A head that fits nowhere is judged in full: every flavor, the numbers for its message, whether
anything could be preempted. Kueue sets such a head aside until quota is given back in its
cohort; but quota given back is often taken again at once (a finished workload's successor is
admitted in the same instant), and then every set-aside head of the cohort is judged again in
exactly the state it was judged in before. The verdict is a function of:

* the equivalence class of the workload (same namespace, queue, priority and pod sets: the
  search reads nothing else of it), so the verdict is kept on the class;
* the configuration (the ClusterQueue, its cohort tree, quotas and limits, the flavors):
  ``Cache.generation`` counts rebuilds;
* the usage of each flavor-resource the search may read, on the ClusterQueue's node and every
  ancestor up to the root (``available``, ``borrowing_level`` and the message read no other
  node's usage);
* for the preemption question, only as far as the cheap pre-check answers it: whether the
  ClusterQueue's own admitted workloads could hold a candidate (by the lowest priority among
  them) and whether another ClusterQueue of the tree borrows each flavor-resource.

A verdict is kept only when the search ended in NO_FIT or NO_CANDIDATES without looking for
preemption targets (the pre-check said there could be none); whatever looked at admitted
workloads one by one is judged anew each time. `state_of` builds the tuple the verdict is
keyed on; equal tuples mean the search would read equal inputs and return an equal answer.
"""

from __future__ import annotations

from typing import NamedTuple

from extender.core.api.models import ClusterQueue
from extender.core.scheduling.flavors import Assignment
from extender.core.scheduling.preemption import may_preempt_within
from extender.core.scheduling.quota import QuotaNode

State = tuple[object, ...]


class Verdict(NamedTuple):
    """A head's assignment that admits nothing, and the state it was found in."""

    state: State
    assignment: Assignment


def state_of(
    cq: ClusterQueue,
    node: QuotaNode,
    priority: int,
    lowest_priority: int | None,
    generation: int,
    fair_sharing: bool,
) -> State:
    """What a flavor search for a head of this priority in this ClusterQueue reads that can
    change between cycles without changing the workload: see the module docstring."""
    values: list[object] = [
        generation,
        fair_sharing,
        may_preempt_within(cq, priority, lowest_priority),
    ]
    append = values.append
    parent = node.parent
    if parent is None:
        for fr in cq.flavor_resources:
            append(node.usage.get(fr, 0))
        return tuple(values)
    root = node.root()
    borrowers = root.borrowers
    for fr in cq.flavor_resources:
        append(node.usage.get(fr, 0))
        current: QuotaNode | None = parent
        while current is not None:
            append(current.usage.get(fr, 0))
            current = current.parent
        others = borrowers.get(fr)
        append(others is not None and (len(others) > 1 or (bool(others) and node not in others)))
    return tuple(values)
