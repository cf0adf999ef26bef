"""The cycle's arithmetic shortcut for a preemptor's fit agrees with taking victims out."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.core.cycle import _CycleQuota
from extender.core.models import Admission, ClusterQueue, Cohort, PodSetAssignment, Workload
from extender.core.preemption import AdmittedWorkload, fits
from extender.core.quota import QuotaTree, add_usage
from tests.builders import CQ

FR = ("default", "cpu")


@st.composite
def trees(draw: st.DrawFn) -> tuple[list[ClusterQueue], bool]:
    in_cohort = draw(st.booleans())
    queues = []
    for i in range(draw(st.integers(1, 4))):
        nominal = str(draw(st.integers(0, 8)))
        limit = draw(st.one_of(st.none(), st.integers(0, 6)))
        lend = draw(st.one_of(st.none(), st.integers(0, 4))) if draw(st.booleans()) else None
        spec = (nominal, None if limit is None else str(limit), None if lend is None else str(lend))
        builder = CQ(f"cq{i}")
        if in_cohort:
            builder = builder.cohort("all")
        queues.append(builder.group(("default", {"cpu": spec})).obj())
    return queues, in_cohort


def _admitted(name: str, node_name: str, tree: QuotaTree, cpu: int) -> AdmittedWorkload:
    workload = Workload("ns", name, name, "lq", ())
    admission = Admission(
        node_name, (PodSetAssignment("main", {"cpu": "default"}, {"cpu": cpu}, 1),)
    )
    holder = AdmittedWorkload(workload, admission, {FR: cpu}, tree.cluster_queues[node_name], 0.0)
    add_usage(holder.node, holder.usage)
    return holder


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(trees(), st.data())
def test_the_shortcut_never_says_fits_when_removing_the_victims_would_not(case, data) -> None:
    queues, in_cohort = case
    tree = QuotaTree.build(queues, [Cohort("all")] if in_cohort else [])
    names = [q.name for q in queues]
    admitted = [
        _admitted(
            f"w{i}", data.draw(st.sampled_from(names)), tree, data.draw(st.integers(1, 4)) * 1000
        )
        for i in range(data.draw(st.integers(0, 6)))
    ]
    quota = _CycleQuota(classical=True)
    split = data.draw(st.integers(0, len(admitted)))
    for victim in admitted[:split]:
        quota._defer(victim)
    victims = admitted[split:]
    node = tree.cluster_queues[data.draw(st.sampled_from(names))]
    request = {FR: data.draw(st.integers(0, 12)) * 1000}

    shortcut = quota._fits_flat(node, request, victims)
    for victim in admitted:
        add_usage(victim.node, victim.usage, -1)
    exact = fits(node, request, True)
    assert not shortcut or exact
    if not any(n.local for n in tree.cluster_queues.values()):
        assert shortcut == exact  # exact wherever it applies
