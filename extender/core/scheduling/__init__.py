"""The scheduling cycle: cache, queues, quota, flavor assignment, preemption, fair sharing.

Kueue's cache (`cache`), queue manager (`queue_manager`, `queues`) and scheduler
(`scheduler`, `cycle_quota`, `flavors`, `preemption`, `fairsharing`, `partial`, `verdicts`),
kept in step by `cycle.ClusterState`, which `builder` fills from API objects. The top of the
core: it may import every other room but `config`.
"""
