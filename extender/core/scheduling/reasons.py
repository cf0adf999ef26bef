"""Kueue's reasons a workload waits or is evicted, and the status that carries a wait's reason.

The cache (an inactive ClusterQueue), the queue manager (a workload with no queue to wait in)
and the scheduler (a head that did not fit) each say why a workload waits; the words are
Kueue's, so they live apart from all three.
"""

from __future__ import annotations

from typing import NamedTuple

from extender.core.scheduling.text import Text

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


class PendingStatus(NamedTuple):
    """Why a workload is not admitted: the QuotaReserved=False reason and message.

    A NamedTuple rather than a frozen dataclass: every head that waits gets one, every cycle.
    """

    reason: str
    text: Text  # the message, made when first read (a cycle's verdicts are read after it)

    @property
    def message(self) -> str:
        """The message, in words."""
        return str(self.text)
