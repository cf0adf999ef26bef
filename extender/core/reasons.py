"""Kueue's reasons a workload waits or is evicted, and the status that carries a wait's reason.

The cache (an inactive ClusterQueue), the queue manager (a workload with no queue to wait in)
and the scheduler (a head that did not fit) each say why a workload waits; the words are
Kueue's, so they live apart from all three.
"""

from __future__ import annotations

from dataclasses import dataclass

INADMISSIBLE = "Inadmissible"
# Kueue's reason when the workload's namespace may not use the ClusterQueue.
MISCONFIGURED = "Misconfigured"
PENDING = "Pending"
WAITING_FOR_PREEMPTED = "WaitingForPreemptedWorkloads"
# WaitForPodsReady's blockAdmission: an admitted workload's pods are not all ready yet.
WAITING_FOR_PODS_READY = "WaitingForPodsReady"
PODS_READY_BLOCK_MESSAGE = "waiting for all admitted workloads to be in PodsReady condition"

# Evicted condition reasons.
PREEMPTED = "Preempted"
CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
LOCAL_QUEUE_STOPPED = "LocalQueueStopped"


@dataclass(frozen=True, slots=True)
class PendingStatus:
    """Why a workload is not admitted: the QuotaReserved=False reason and message."""

    reason: str
    message: str
