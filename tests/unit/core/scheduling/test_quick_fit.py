"""The quick path of flavor assignment answers exactly as the full search, or not at all."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.core.api.labels import Taint, Toleration
from extender.core.api.models import (
    ClusterQueue,
    FlavorFungibility,
    FlavorQuotas,
    FungibilityPolicy,
    PodSet,
    Preemption,
    ReclaimWithinCohort,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    WithinClusterQueue,
    Workload,
)
from extender.core.scheduling.flavors import (
    Mode,
    assign_flavors,
    judge_by_plan,
    quick_fit,
    quick_plan,
    search_flavors,
)
from extender.core.scheduling.preemption import fits
from extender.core.scheduling.quota import QuotaTree, add_usage

FLAVOR_NAMES = ("a", "b", "c")
RESOURCES = ("cpu", "memory", "gpu")


def flavor_objects(draw, plain=False):
    out = {}
    for name in FLAVOR_NAMES:
        if not plain and draw(st.integers(0, 5)) == 0:
            continue  # named by the ClusterQueue, but missing
        labels = {"pool": name} if draw(st.booleans()) else {}
        taints = (Taint("dedicated", name),) if not plain and draw(st.integers(0, 3)) == 0 else ()
        out[name] = ResourceFlavor(name, labels, taints)
    return out


@st.composite
def cases(draw, sole=False):
    """(workload, ClusterQueue, flavors, its node); `sole`: each resource group offers one
    flavor, which exists and takes the pod set (what judge_by_plan answers for)."""
    flavors = flavor_objects(draw, plain=sole)
    # One or two resource groups; each covers some resources and lists some flavors.
    resources = list(RESOURCES)
    split = draw(st.integers(1, 2))
    covered = [tuple(resources[:split]), tuple(resources[split:])]
    if draw(st.booleans()):
        covered = covered[:1]
    groups = []
    quota = st.integers(0, 12)
    for group_resources in covered:
        most = 1 if sole else 3
        names = draw(
            st.lists(st.sampled_from(FLAVOR_NAMES), min_size=1, max_size=most, unique=True)
        )
        groups.append(
            ResourceGroup(
                group_resources,
                tuple(
                    FlavorQuotas(
                        name,
                        tuple(
                            ResourceQuota(
                                r,
                                draw(quota),
                                borrowing_limit=draw(st.one_of(st.none(), quota)),
                            )
                            for r in group_resources
                        ),
                    )
                    for name in names
                ),
            )
        )
    policy = st.sampled_from(list(FungibilityPolicy))
    cq = ClusterQueue(
        "cq",
        tuple(groups),
        cohort="team",
        flavor_fungibility=FlavorFungibility(
            draw(policy),
            draw(policy),
            draw(st.sampled_from([None, "BorrowingOverPreemption", "PreemptionOverBorrowing"])),
        ),
        preemption=Preemption(
            draw(st.sampled_from(list(WithinClusterQueue))),
            draw(st.sampled_from(list(ReclaimWithinCohort))),
        ),
    )
    lender = ClusterQueue(
        "lender",
        tuple(
            ResourceGroup(
                g.covered_resources,
                tuple(
                    FlavorQuotas(
                        f.name, tuple(ResourceQuota(q.name, draw(quota)) for q in f.resources)
                    )
                    for f in g.flavors
                ),
            )
            for g in groups
        ),
        cohort="team",
    )
    tree = QuotaTree.build([cq, lender], [])
    node = tree.cluster_queues["cq"]
    for who in ("cq", "lender"):
        used = {
            (f.name, q.name): draw(st.integers(0, 10))
            for g in groups
            for f in g.flavors
            for q in f.resources
        }
        add_usage(tree.cluster_queues[who], used)
    requests = {
        r: draw(st.integers(0, 6)) for r in draw(st.sets(st.sampled_from(RESOURCES), max_size=3))
    }
    tolerations = (Toleration("dedicated", "Exists"),) if draw(st.booleans()) else ()
    selector = {"pool": draw(st.sampled_from(FLAVOR_NAMES))} if draw(st.booleans()) else {}
    if sole:
        selector = {}
        requests = {r: amount or 1 for r, amount in requests.items()} or {"cpu": 1}
    pod_set = PodSet("main", draw(st.integers(1, 2)), requests, selector, (), tolerations)
    workload = Workload("ns", "wl", "uid", "lq", (pod_set,))
    return workload, cq, flavors, node


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_the_quick_path_answers_as_the_search_or_defers_to_it(case):
    workload, cq, flavors, node = case
    quick = quick_fit(workload.pod_sets[0], cq, flavors, node)
    full = search_flavors(workload, cq, flavors, node, oracle=lambda fr, amount: (Mode.PREEMPT, 0))
    if quick is not None:
        assert quick.mode == Mode.FIT
        assert quick._replace(slack=-1) == full
    chosen = assign_flavors(workload, cq, flavors, node, lambda fr, amount: (Mode.PREEMPT, 0))
    assert chosen._replace(slack=-1) == full


ORACLES = {
    "none": None,
    "no candidates": lambda fr, amount: None,
    "preempt within": lambda fr, amount: (Mode.PREEMPT, 0),
    "reclaim, borrowing": lambda fr, amount: (Mode.RECLAIM, 1),
    "by amount": lambda fr, amount: None if amount % 2 else (Mode.PREEMPT, amount % 3),
}


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(cases(sole=True), cases()), st.sampled_from(sorted(ORACLES)), st.booleans(), st.data()
)
def test_judging_by_the_plan_answers_as_the_search_or_defers_to_it(
    case, oracle, fair_sharing, data
):
    workload, cq, flavors, node = case
    plan = quick_plan(workload.pod_sets[0], cq, flavors)
    if plan is None:
        return
    # Crowd the tree, so that most heads do not fit (the case the plan's judgement is for).
    for who in (node, *node.parent.children):
        add_usage(who, {fr: data.draw(st.integers(0, 16)) for fr in plan.usage})
    judged = judge_by_plan(
        plan, workload, cq, flavors, node, ORACLES[oracle], fair_sharing=fair_sharing
    )
    full = search_flavors(workload, cq, flavors, node, ORACLES[oracle], fair_sharing=fair_sharing)
    if judged is None:
        assert not plan.sole_flavors
    else:
        assert judged == full


def test_a_head_with_one_flavor_that_does_not_fit_is_judged_by_its_plan():
    cpu = ResourceQuota("cpu", 4_000)
    cq = ClusterQueue(
        "cq",
        (ResourceGroup(("cpu",), (FlavorQuotas("default", (cpu,)),)),),
        cohort="team",
        preemption=Preemption(WithinClusterQueue.LOWER_PRIORITY, ReclaimWithinCohort.ANY),
    )
    tree = QuotaTree.build([cq], [])
    node = tree.cluster_queues["cq"]
    flavors = {"default": ResourceFlavor("default")}
    workload = Workload("ns", "wl", "uid", "lq", (PodSet("main", 3, {"cpu": 1_000}),))
    add_usage(node, {("default", "cpu"): 2_000})
    plan = quick_plan(workload.pod_sets[0], cq, flavors)
    assert plan is not None
    assert plan.sole_flavors
    judged = judge_by_plan(plan, workload, cq, flavors, node, lambda fr, amount: None)
    assert judged is not None
    assert judged.mode == Mode.NO_CANDIDATES
    assert judged.message == (
        "needs 3 cpu in flavor default; 2 free to cq (it uses 2 of its 4 nominal; cohort "
        "team has 2 unused); no admitted workload may be preempted to make room"
    )


def test_the_common_head_takes_the_quick_path():
    cpu = ResourceQuota("cpu", 4_000)
    cq = ClusterQueue("cq", (ResourceGroup(("cpu",), (FlavorQuotas("default", (cpu,)),)),))
    flavors = {"default": ResourceFlavor("default")}
    node = QuotaTree.build([cq], []).cluster_queues["cq"]
    pod_set = PodSet("main", 3, {"cpu": 1_000})
    quick = quick_fit(pod_set, cq, flavors, node)
    assert quick is not None
    assert quick.usage == {("default", "cpu"): 3_000}
    assert quick.pod_set_flavors == ({"cpu": "default"},)
    assert quick.slack == 1_000  # 4 cpu, 3 requested: the fit holds while 1 more is taken
    add_usage(node, {("default", "cpu"): 2_000})
    assert quick_fit(pod_set, cq, flavors, node) is None  # 3 of 2 free: the search explains


def test_borrowing_in_the_first_flavor_leaves_the_choice_to_the_search():
    # whenCanBorrow TryNextFlavor: a later flavor that fits without borrowing wins.
    def group(*names):
        return ResourceGroup(
            ("cpu",), tuple(FlavorQuotas(n, (ResourceQuota("cpu", 2_000),)) for n in names)
        )

    cq = ClusterQueue(
        "cq",
        (group("a", "b"),),
        cohort="team",
        flavor_fungibility=FlavorFungibility(FungibilityPolicy.TRY_NEXT_FLAVOR),
    )
    lender = ClusterQueue("lender", (group("a"),), cohort="team")
    tree = QuotaTree.build([cq, lender], [])
    node = tree.cluster_queues["cq"]
    flavors = {"a": ResourceFlavor("a"), "b": ResourceFlavor("b")}
    add_usage(node, {("a", "cpu"): 1_000})
    workload = Workload("ns", "wl", "uid", "lq", (PodSet("main", 2, {"cpu": 1_000}),))
    assert quick_fit(workload.pod_sets[0], cq, flavors, node) is None
    chosen = assign_flavors(workload, cq, flavors, node)
    assert chosen.pod_set_flavors == ({"cpu": "b"},)
    assert chosen.borrowing_level == 0


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.data())
def test_a_quick_fit_holds_while_the_tree_lost_no_more_than_its_slack(case, data):
    workload, cq, flavors, node = case
    quick = quick_fit(workload.pod_sets[0], cq, flavors, node)
    if quick is None:
        return
    assert quick.slack >= 0 or not quick.usage
    # Other admissions of the same cycle, anywhere in the tree, each one fitting.
    taken = 0
    for member in node.root().cluster_queues():
        for fr in quick.usage:
            amount = data.draw(st.integers(0, 4))
            if amount and fits(member, {fr: amount}, True):
                add_usage(member, {fr: amount})
                taken += amount
    if taken <= quick.slack:
        assert fits(node, quick.usage, True)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.data())
def test_a_fit_in_own_quota_holds_while_nobody_in_the_tree_borrows(case, data):
    workload, cq, flavors, node = case
    quick = quick_fit(workload.pod_sets[0], cq, flavors, node)
    if quick is None or quick.borrowing_level:
        return
    # Admissions of the same cycle in the other ClusterQueues (one head per queue per cycle).
    for member in node.root().cluster_queues():
        if member is node:
            continue
        for fr in quick.usage:
            amount = data.draw(st.integers(0, 12))
            if amount and fits(member, {fr: amount}, True):
                add_usage(member, {fr: amount})
    if not any(node.root().borrowers.get(fr) for fr in quick.usage):
        assert fits(node, quick.usage, True)
