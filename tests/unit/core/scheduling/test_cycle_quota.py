"""The cycle's shortcut for a preemptor's fit never says it fits when taking the victims out
of the quota tree would say it does not, and its one net change leaves the tree as they would."""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from extender.core.api.models import Admission, ClusterQueue, Cohort, PodSetAssignment, Workload
from extender.core.scheduling.cycle_quota import net_within_own
from extender.core.scheduling.preemption import AdmittedWorkload, fits
from extender.core.scheduling.quota import QuotaTree, add_usage
from tests.builders import CQ

FR = ("default", "cpu")


@st.composite
def trees(draw: st.DrawFn) -> tuple[list[ClusterQueue], list[Cohort]]:
    """A root cohort, maybe a child cohort under it, and ClusterQueues in either or alone,
    with nominal quota, borrowing and lending limits."""
    cohorts = [Cohort("root"), Cohort("child", "root")] if draw(st.booleans()) else [Cohort("root")]
    places = [None, *(c.name for c in cohorts)]
    queues = []
    for i in range(draw(st.integers(1, 4))):
        nominal = str(draw(st.integers(0, 8)))
        limit = draw(st.one_of(st.none(), st.integers(0, 6)))
        lend = draw(st.one_of(st.none(), st.integers(0, 4)))
        spec = (nominal, None if limit is None else str(limit), None if lend is None else str(lend))
        builder = CQ(f"cq{i}")
        place = draw(st.sampled_from(places))
        if place is not None:
            builder = builder.cohort(place)
        queues.append(builder.group(("default", {"cpu": spec})).obj())
    return queues, cohorts


def _admitted(name: str, node_name: str, tree: QuotaTree, cpu: int) -> AdmittedWorkload:
    workload = Workload("ns", name, name, "lq", ())
    admission = Admission(
        node_name, (PodSetAssignment("main", {"cpu": "default"}, {"cpu": cpu}, 1),)
    )
    holder = AdmittedWorkload(workload, admission, {FR: cpu}, tree.cluster_queues[node_name], 0.0)
    add_usage(holder.node, holder.usage)
    return holder


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(trees(), st.data())
def test_the_shortcut_never_says_fits_when_removing_the_victims_would_not(case, data) -> None:
    queues, cohorts = case
    tree = QuotaTree.build(queues, cohorts)
    names = [q.name for q in queues]
    admitted = [
        _admitted(
            f"w{i}", data.draw(st.sampled_from(names)), tree, data.draw(st.integers(1, 4)) * 1000
        )
        for i in range(data.draw(st.integers(0, 6)))
    ]
    node = tree.cluster_queues[data.draw(st.sampled_from(names))]
    victims = [a for a in admitted if a.node is node and data.draw(st.booleans())]
    request = {FR: data.draw(st.integers(0, 12)) * 1000}

    net = net_within_own(node, request, victims)
    event(f"shortcut says fits: {net is not None}")
    for victim in victims:
        add_usage(victim.node, victim.usage, -1)
    assert net is None or fits(node, request, True)
    if net is None:
        return
    # The one net change leaves the tree exactly as taking the victims out and the request in.
    add_usage(node, request)
    stepwise = _state(tree)
    add_usage(node, request, -1)
    for victim in victims:
        add_usage(victim.node, victim.usage)
    add_usage(node, net)
    assert _state(tree) == stepwise


def _state(tree: QuotaTree) -> tuple[object, ...]:
    nodes = [*tree.cluster_queues.values(), *tree.cohorts.values()]
    usage = {n.name: {fr: v for fr, v in n.usage.items() if v} for n in nodes}
    borrowers = {
        n.name: {fr: sorted(b.name for b in found) for fr, found in n.borrowers.items() if found}
        for n in nodes
    }
    return usage, borrowers
