"""Every kind of job and its Workload: an adapter per kind, the registry, Workloads read back.

An adapter reads a kind's podSets and starts and stops it (`adapter`, one module per kind);
`registry` names them under Kueue's integration names; `jobs` makes a job's Workload and the
webhook's queueing mutation; `workloads` reads Workload objects back into models. Imports
`api` only.
"""
