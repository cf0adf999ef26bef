"""WaitForPodsReady as Kueue decides it: the PodsReady condition, timeouts, requeue backoff."""

from __future__ import annotations

from dataclasses import dataclass

from extender.core.admission.checks import EVICTED_BY_CHECK


@dataclass(frozen=True, slots=True)
class RequeuingStrategy:
    """When an evicted workload is queued again: Kueue's waitForPodsReady.requeuingStrategy."""

    timestamp: str  # Eviction or Creation
    backoff_limit_count: int | None  # None: requeued forever
    backoff_base_seconds: int
    backoff_max_seconds: int


@dataclass(frozen=True, slots=True)
class WaitForPodsReady:
    """Kueue's waitForPodsReady, as its Configuration file sets it."""

    timeout: float  # seconds
    block_admission: bool
    recovery_timeout: float  # seconds; 0 turns the recovery check off
    requeuing: RequeuingStrategy


# PodsReady condition reasons (Kueue's WorkloadWaitForStart, ...).
WAIT_FOR_START = "WaitForStart"
WAIT_FOR_RECOVERY = "WaitForRecovery"
STARTED = "Started"
RECOVERED = "Recovered"
NOT_READY_MESSAGE = "Not all pods are ready or succeeded"
RECOVERY_MESSAGE = "At least one pod has failed, waiting for recovery"
READY_MESSAGE = "All pods reached readiness and the workload is running"

# Evicted, Requeued and DeactivationTarget reasons.
PODS_READY_TIMEOUT = "PodsReadyTimeout"
REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"
REQUEUING_LIMIT_MESSAGE = "exceeding the maximum number of re-queuing retries"
BACKOFF_FINISHED = "BackoffFinished"
BACKOFF_FINISHED_MESSAGE = "The workload backoff was finished"
DEACTIVATED = "Deactivated"
DEACTIVATED_MESSAGE = "The workload is deactivated"
REACTIVATED = "Reactivated"
REACTIVATED_MESSAGE = "The workload was reactivated"
BLOCKED_MESSAGE = "waiting for all admitted workloads to be in PodsReady condition"

# Kueue's backoff jitter factor (pkg/workload UpdateRequeueState).
JITTER = 0.0001


@dataclass(frozen=True, slots=True)
class ReadyCondition:
    """A PodsReady condition as written: status, reason, and when the status last changed."""

    status: bool
    reason: str
    since: float  # lastTransitionTime, seconds


@dataclass(frozen=True, slots=True)
class Wanted:
    """The PodsReady condition a workload should carry."""

    status: bool
    reason: str
    message: str


def wanted_condition(admitted: bool, ready: bool, current: ReadyCondition | None) -> Wanted:
    """Kueue's generatePodsReadyCondition: True once every pod is ready (Recovered after a
    recovery); False WaitForStart until then, and WaitForRecovery once a ready workload lost
    a pod."""
    if not admitted:
        return Wanted(False, WAIT_FOR_START, NOT_READY_MESSAGE)
    if ready:
        recovering = current is not None and current.reason in (WAIT_FOR_RECOVERY, RECOVERED)
        return Wanted(True, RECOVERED if recovering else STARTED, READY_MESSAGE)
    if current is not None and (current.status or current.reason == WAIT_FOR_RECOVERY):
        return Wanted(False, WAIT_FOR_RECOVERY, RECOVERY_MESSAGE)
    return Wanted(False, WAIT_FOR_START, NOT_READY_MESSAGE)


@dataclass(frozen=True, slots=True)
class Wait:
    """Not ready yet, and not timed out: look again after this many seconds."""

    after: float


@dataclass(frozen=True, slots=True)
class TimedOut:
    """The wait for ready pods ran out; `cause` is the PodsReady reason it waited in."""

    cause: str


def check(
    policy: WaitForPodsReady, admitted_at: float, current: ReadyCondition | None, now: float
) -> Wait | TimedOut | None:
    """What an admitted workload's readiness calls for at `now` (Kueue's
    admittedNotReadyWorkload): None when it is ready or nothing times it out. The first wait
    counts from admission, a recovery from when readiness was lost."""
    if current is not None and current.status:
        return None
    if current is None or current.reason != WAIT_FOR_RECOVERY:
        left = policy.timeout - (now - admitted_at)
        return Wait(left) if left > 0 else TimedOut(WAIT_FOR_START)
    if policy.recovery_timeout <= 0:  # recoveryTimeout: 0s turns the recovery check off
        return None
    left = policy.recovery_timeout - (now - current.since)
    return Wait(left) if left > 0 else TimedOut(WAIT_FOR_RECOVERY)


@dataclass(frozen=True, slots=True)
class RequeueState:
    """status.requeueState: how many times requeued, and not before when."""

    count: int
    requeue_at: float | None


@dataclass(frozen=True, slots=True)
class Requeue:
    """Evict with PodsReadyTimeout and requeue after the backoff."""

    state: RequeueState


@dataclass(frozen=True, slots=True)
class Deactivate:
    """Past backoffLimitCount: the DeactivationTarget reason and message."""

    reason: str
    message: str


def backoff_seconds(strategy: RequeuingStrategy, count: int, jitter: float) -> float:
    """The wait before requeue number `count` (from 1): base·2^(count-1), capped by
    backoffMaxSeconds (0: no cap) from the second on, as k8s wait.Backoff steps; `jitter`
    in [0, 1) adds up to Kueue's 0.01 %."""
    base, cap = strategy.backoff_base_seconds, strategy.backoff_max_seconds
    seconds = float(base) * 2.0 ** (count - 1)
    if count > 1 and cap > 0:
        seconds = min(seconds, float(cap))
    return seconds * (1.0 + JITTER * jitter)


def on_timeout(
    strategy: RequeuingStrategy, state: RequeueState | None, now: float, jitter: float
) -> Requeue | Deactivate:
    """A timed-out workload: deactivated once another requeue would pass backoffLimitCount
    (None: requeued forever), otherwise requeued after the backoff. A later requeueAt
    already set (by another part) is kept."""
    count = state.count if state is not None else 0
    limit = strategy.backoff_limit_count
    if limit is not None and count + 1 > limit:
        return Deactivate(REQUEUING_LIMIT_EXCEEDED, REQUEUING_LIMIT_MESSAGE)
    at = now + backoff_seconds(strategy, count + 1, jitter)
    earlier = state.requeue_at if state is not None else None
    if earlier is not None and earlier > at:
        at = earlier
    return Requeue(RequeueState(count + 1, at))


def timeout_message(key: str) -> str:
    """The Evicted message Kueue writes (its request's namespace/name)."""
    return f"Exceeded the PodsReady timeout {key}"


def deactivated(reason: str | None, message: str | None) -> tuple[str, str]:
    """The Evicted reason and message of a deactivation, with the DeactivationTarget's cause
    when one says why (Kueue's DeactivatedDueTo<cause>)."""
    if not reason:
        return DEACTIVATED, DEACTIVATED_MESSAGE
    return f"{DEACTIVATED}DueTo{reason}", f"{DEACTIVATED_MESSAGE} due to {message}"


def backoff_left(state: RequeueState | None, now: float) -> float:
    """Seconds until a requeued workload may be nominated again (0: it may now)."""
    if state is None or state.requeue_at is None:
        return 0.0
    return max(0.0, state.requeue_at - now)


def requeued_at_once(reason: str) -> bool:
    """Kueue's Requeued condition once a Workload evicted for `reason` gave its quota back:
    False while it waits for a backoff (PodsReadyTimeout, an AdmissionCheck in Retry) or for
    someone to set it active again (DeactivatedDueTo...), True otherwise."""
    waits = (PODS_READY_TIMEOUT, EVICTED_BY_CHECK)
    return reason not in waits and not reason.startswith(DEACTIVATED)
