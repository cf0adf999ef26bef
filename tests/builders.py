"""Fluent builders for test objects, in the spirit of Kueue's testing wrappers."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from extender.core.api.labels import LabelSelector, Taint, Toleration
from extender.core.api.models import (
    ClusterQueue,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    FungibilityPolicy,
    LocalQueue,
    PodSet,
    Preemption,
    QueueingStrategy,
    ReclaimWithinCohort,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    StopPolicy,
    WithinClusterQueue,
    Workload,
)
from extender.core.api.quantity import to_amount
from extender.core.scheduling.cycle import ClusterState


class CQ:
    """make_cq("team-a").cohort("all").group(["cpu"], ("default", {"cpu": "4"})).obj()"""

    def __init__(self, name: str) -> None:
        self.kw: dict[str, Any] = {"name": name, "namespace_selector": LabelSelector()}
        self.groups: list[ResourceGroup] = []

    def cohort(self, name: str) -> CQ:
        self.kw["cohort"] = name
        return self

    def group(self, *flavors: tuple[str, dict[str, Any]]) -> CQ:
        """Each flavor: (name, {resource: nominal | (nominal, borrowingLimit[, lendingLimit])})."""
        covered = tuple(flavors[0][1])
        fqs = []
        for fname, quotas in flavors:
            rqs = []
            for resource in covered:
                spec = quotas[resource]
                nominal, borrow, lend = (
                    (*spec, None, None)[:3] if isinstance(spec, tuple) else (spec, None, None)
                )
                rqs.append(
                    ResourceQuota(
                        resource,
                        to_amount(resource, nominal),
                        None if borrow is None else to_amount(resource, borrow),
                        None if lend is None else to_amount(resource, lend),
                    )
                )
            fqs.append(FlavorQuotas(fname, tuple(rqs)))
        self.groups.append(ResourceGroup(covered, tuple(fqs)))
        return self

    def strict(self) -> CQ:
        self.kw["queueing_strategy"] = QueueingStrategy.STRICT_FIFO
        return self

    def preemption(
        self,
        within: str = "Never",
        reclaim: str = "Never",
        borrow: str = "Never",
        threshold: int | None = None,
    ) -> CQ:
        self.kw["preemption"] = Preemption(
            WithinClusterQueue(within), ReclaimWithinCohort(reclaim), borrow, threshold
        )
        return self

    def fungibility(
        self, borrow: str = "MayStopSearch", preempt: str = "TryNextFlavor", pref: str | None = None
    ) -> CQ:
        self.kw["flavor_fungibility"] = FlavorFungibility(
            FungibilityPolicy(borrow), FungibilityPolicy(preempt), pref
        )
        return self

    def selector(self, selector: LabelSelector | None) -> CQ:
        self.kw["namespace_selector"] = selector
        return self

    def stop(self, policy: str) -> CQ:
        self.kw["stop_policy"] = StopPolicy(policy)
        return self

    def weight(self, weight: str) -> CQ:
        self.kw["fair_weight"] = Fraction(weight)
        return self

    def obj(self) -> ClusterQueue:
        return ClusterQueue(resource_groups=tuple(self.groups), **self.kw)


class WL:
    """make_wl("a").queue("lq").request("cpu", "3").priority(5).created(1).obj()"""

    _uid = 0

    def __init__(self, name: str, namespace: str = "default") -> None:
        WL._uid += 1
        self.kw: dict[str, Any] = {
            "namespace": namespace,
            "name": name,
            "uid": f"uid-{WL._uid:06d}",
            "queue_name": "lq",
        }
        self.sets: list[dict[str, Any]] = []

    def queue(self, name: str) -> WL:
        self.kw["queue_name"] = name
        return self

    def priority(self, value: int) -> WL:
        self.kw["priority"] = value
        return self

    def created(self, when: float) -> WL:
        self.kw["creation_time"] = when
        return self

    def unacted(self, *paths: str) -> WL:
        self.kw["unacted"] = paths
        return self

    def uid(self, uid: str) -> WL:
        self.kw["uid"] = uid
        return self

    def pod_set(
        self, name: str = "main", count: int = 1, min_count: int | None = None, **requests: str
    ) -> WL:
        self.sets.append(
            {
                "name": name,
                "count": count,
                "min_count": min_count,
                "requests": {
                    r.replace("_", "/"): to_amount(r.replace("_", "/"), v)
                    for r, v in requests.items()
                },
            }
        )
        return self

    def request(self, resource: str, value: str) -> WL:
        if not self.sets:
            self.pod_set()
        self.sets[-1]["requests"][resource] = to_amount(resource, value)
        return self

    def node_selector(self, **labels: str) -> WL:
        self.sets[-1]["node_selector"] = labels
        return self

    def toleration(self, key: str, value: str = "", effect: str = "NoSchedule") -> WL:
        tol = Toleration(key=key, value=value, effect=effect)
        self.sets[-1]["tolerations"] = (*self.sets[-1].get("tolerations", ()), tol)
        return self

    def obj(self) -> Workload:
        sets = self.sets or [{"name": "main", "count": 1, "requests": {}}]
        return Workload(pod_sets=tuple(PodSet(**s) for s in sets), **self.kw)


def flavor(
    name: str, labels: dict[str, str] | None = None, taints: tuple[Taint, ...] = ()
) -> ResourceFlavor:
    return ResourceFlavor(name, labels or {}, taints)


def cohort(name: str, parent: str | None = None) -> Cohort:
    return Cohort(name, parent)


def state_with(
    *cqs: ClusterQueue,
    flavors: tuple[str, ...] | list[ResourceFlavor] = ("default",),
    cohorts: tuple[Cohort, ...] = (),
    fair_sharing: bool = False,
    **kw: Any,
) -> ClusterState:
    """A ClusterState with the ClusterQueues, one LocalQueue `lq-<cq>` per queue in `default`,
    and `lq` pointing at the first ClusterQueue."""
    state = ClusterState(fair_sharing=fair_sharing, **kw)
    flavor_objs = [f if isinstance(f, ResourceFlavor) else flavor(f) for f in flavors]
    lqs = [LocalQueue("default", f"lq-{cq.name}", cq.name) for cq in cqs]
    if cqs:
        lqs.append(LocalQueue("default", "lq", cqs[0].name))
    state.configure(flavors=flavor_objs, cluster_queues=cqs, cohorts=cohorts, local_queues=lqs)
    return state


def admit(state: ClusterState, workload: Workload, now: float = 0.0) -> None:
    """Add a workload and run cycles until it is admitted (fails the test otherwise)."""
    state.add_workload(workload)
    for _ in range(10):
        result = state.schedule(now)
        if state.is_admitted(workload.key):
            return
        if not result.progressed:
            break
    raise AssertionError(f"{workload.key} was not admitted: {state.pending_status(workload.key)}")


def run_until_quiet(
    state: ClusterState, now: float = 0.0, release_evicted: bool = True
) -> list[Any]:
    """Run cycles until nothing moves; returns every decision. Evictions are confirmed."""
    decisions: list[Any] = []
    for _ in range(1000):
        result = state.schedule(now)
        decisions.extend(result.admitted)
        decisions.extend(result.evicted)
        if release_evicted:
            for ev in result.evicted:
                state.release(ev.workload.key)
        if not result.progressed:
            return decisions
    raise AssertionError("the cycle never settled")


def ready_node(name: str, labels: dict[str, str], allocatable: dict[str, str]) -> dict[str, Any]:
    """A v1 Node as a kubelet reports one that is Ready (the double and the real cluster here
    have no kubelet: tests create Nodes so)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def provisioning_check(name: str, config: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ProvisioningRequest AdmissionCheck and the ProvisioningRequestConfig it names (class
    check-capacity), as Kueue's documentation writes them."""
    check = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {
                "apiGroup": "kueue.x-k8s.io",
                "kind": "ProvisioningRequestConfig",
                "name": config,
            },
        },
    }
    settings = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": config},
        "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io"},
    }
    return check, settings
