"""The ungater's choice of a domain per gated pod: by rank, else greedily."""

from __future__ import annotations

import pytest

from extender.core.api.topology import (
    HOSTNAME,
    DomainAssignment,
    TopologyAssignment,
    TopologyRequest,
)
from extender.core.tas.ungate import PodOnDomains, domains_for_gated, rank_offsets

INDEX = "batch.kubernetes.io/job-completion-index"
JOB = "jobset.sigs.k8s.io/job-index"
ASSIGNMENT = TopologyAssignment(
    (HOSTNAME,), (DomainAssignment(("n1",), 2), DomainAssignment(("n2",), 1))
)


def pod(name: str, gated: bool = True, node: str | None = None, **labels: str) -> PodOnDomains:
    return PodOnDomains(name, gated, labels, {HOSTNAME: node} if node else {})


def hosts(out: dict[str, dict[str, str]]) -> dict[str, str]:
    return {k: v[HOSTNAME] for k, v in out.items()}


@pytest.mark.parametrize(
    ("pods", "request_", "want"),
    [
        (  # by completion index: ranks 0, 1 on n1, rank 2 on n2
            [pod("c", **{INDEX: "2"}), pod("a", **{INDEX: "0"}), pod("b", **{INDEX: "1"})],
            TopologyRequest(pod_index_label=INDEX),
            {"c": "n2", "a": "n1", "b": "n1"},
        ),
        (  # a JobSet: 3 jobs of 1 pod, ranked by job index
            [pod("j2", **{INDEX: "0", JOB: "2"}), pod("j0", **{INDEX: "0", JOB: "0"})],
            TopologyRequest(pod_index_label=INDEX, sub_group_index_label=JOB, sub_group_count=3),
            {"j2": "n2", "j0": "n1"},
        ),
        (  # no index label: each domain gets what it lacks, in order
            [pod("x"), pod("y"), pod("z")],
            TopologyRequest(),
            {"x": "n1", "y": "n1", "z": "n2"},
        ),
        (  # an index out of range: greedy for the whole podSet
            [pod("a", **{INDEX: "7"}), pod("b", **{INDEX: "0"})],
            TopologyRequest(pod_index_label=INDEX),
            {"a": "n1", "b": "n1"},
        ),
        (  # one already let through on n1: the greedy fill counts it
            [pod("done", gated=False, node="n1"), pod("p"), pod("q")],
            None,
            {"p": "n1", "q": "n2"},
        ),
        (  # a let-through pod whose rank says another domain: greedy
            [pod("r0", gated=False, node="n2", **{INDEX: "0"}), pod("r1", **{INDEX: "1"})],
            TopologyRequest(pod_index_label=INDEX),
            {"r1": "n1"},
        ),
    ],
)
def test_gated_pods_get_their_domain(pods, request_, want):
    assert hosts(domains_for_gated(ASSIGNMENT, pods, request_, 3)) == want


WORKER = "leaderworkerset.sigs.k8s.io/worker-index"


def test_a_leaderworkersets_workers_are_ranked_from_index_one() -> None:
    """Workers are numbered 1..n (the leader is 0): with the leader's podSet of one pod in
    their group, worker-index 1 is rank 0."""
    workers = [pod("w3", **{WORKER: "3"}), pod("w1", **{WORKER: "1"}), pod("w2", **{WORKER: "2"})]
    request = TopologyRequest(pod_index_label=WORKER, group="g")
    assert hosts(domains_for_gated(ASSIGNMENT, workers, request, 3, 1)) == {
        "w1": "n1",
        "w2": "n1",
        "w3": "n2",
    }


@pytest.mark.parametrize(
    ("pod_sets", "want"),
    [
        ([("main", 4, None)], {"main": 0}),
        ([("leader", 1, "g"), ("worker", 3, "g")], {"leader": 0, "worker": 1}),
        ([("worker", 3, "g"), ("leader", 1, "g")], {"leader": 0, "worker": 1}),
        ([("a", 2, None), ("b", 5, None)], {"a": 0, "b": 0}),
        (
            [("l1", 1, "g1"), ("w1", 2, "g1"), ("l2", 1, "g2"), ("w2", 4, "g2")],
            {"l1": 0, "w1": 1, "l2": 0, "w2": 1},
        ),
    ],
)
def test_rank_offsets(pod_sets, want) -> None:
    assert rank_offsets(pod_sets) == want
