"""Topology-aware scheduling: a Topology's domains, the placement on them, node replacement.

`cache` is Kueue's TAS cache (nodes, other pods, what admitted workloads hold) and
`scheduling` the cycle's check on it; `domains` and `placement` place podSets on a flavor's
domains, `replacement` places a failed host's pods again, `ungate` says which domain each
gated pod goes to. Imports `api`, `placement` (its Node) and `admission` (which checks
delay a placement).
"""
