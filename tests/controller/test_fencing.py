"""A leader cut off from the API server stops writing before another replica takes over.

Two replicas run as processes with the same identity but their own connections (tokens).
The leader's network is cut (the double holds its requests and watches unanswered); the
standby takes the lease once it expires; the network heals at that moment, so every request
the old leader then makes reaches the server. From the moment its lease expired, the old
leader writes nothing, and its process stands by instead of exiting.
"""

from __future__ import annotations

import time

from tests.controller.conftest import CONTROLLER_USER, controller_process, eventually
from tests.controller.test_faults import running, stop
from tests.controller.test_network_faults import Invariants
from tests.controller.test_seed import CQ, FLAVOR, LQ

LEASE = ("--lease-duration", "2", "--renew-deadline", "1.5", "--retry-period", "0.2")


def lease_holder(cluster):
    lease = cluster.get("leases", "tower-controller", "tower-system") or {}
    return (lease.get("spec") or {}).get("holderIdentity")


def test_a_cut_off_leader_makes_no_write_once_its_lease_expired(cluster):
    cluster.apply(FLAVOR, CQ, LQ)
    invariants = Invariants(cluster)
    cluster.api.hooks.append(invariants)
    configs = {
        token: cluster.api.kubeconfig(
            str(cluster.tmp / f"{token}.kubeconfig"), token=token, username=CONTROLLER_USER
        )
        for token in ("replica-a", "replica-b")
    }
    procs = {
        token: controller_process(cluster, *LEASE, "--kube-api-timeout", "1", kubeconfig=path)
        for token, path in configs.items()
    }
    try:
        holder = eventually(lambda: lease_holder(cluster), what="a leader")
        old = next(t for t, p in procs.items() if holder.endswith(f"_{p.pid}"))
        new = next(t for t in procs if t != old)
        cluster.job("before", "1", duration="600s")
        eventually(lambda: running(cluster, "before"), what="the leader to admit")

        cluster.api.hung.add(old)  # the leader's network is cut
        last_renewal = max(
            at
            for at, token, method, path, _ in cluster.api.writes
            if token == old and "/leases" in path
        )
        cluster.job("during", "1", duration="600s")
        eventually(
            lambda: lease_holder(cluster).endswith(f"_{procs[new].pid}"),
            timeout=15,
            what="the standby to take the lease",
        )
        cluster.api.hung.discard(old)  # healed: whatever the old leader sends now lands
        expired = last_renewal + 2.0
        eventually(lambda: running(cluster, "during"), what="the new leader to admit")
        cluster.job("after", "1", duration="600s")
        eventually(lambda: running(cluster, "after"), what="the new leader to keep admitting")
        time.sleep(2.0)  # time for a deposed leader that still believed in itself to write

        late = [
            (round(at - expired, 2), method, path)
            for at, token, method, path, _ in cluster.api.writes
            if token == old and at >= expired
        ]
        assert late == []
        assert procs[old].poll() is None, "the old leader exited instead of standing by"
        assert lease_holder(cluster).endswith(f"_{procs[new].pid}")
    finally:
        logs = {token: stop(proc) for token, proc in procs.items()}
    assert invariants.broken == []
    assert "writes stopped" in logs[old], logs[old]
    assert all("Traceback" not in log for log in logs.values()), logs
