"""The sizes Kueue's webhooks refuse to change on a queued StatefulSet or LeaderWorkerSet are
refused with Kueue's words (`field is immutable`) and the way to scale instead."""

from __future__ import annotations

import pytest

from extender.core.api.parse import ManifestError
from tests.unit.core.jobframework.test_pod_groups import LWS, STS, lws, sts


@pytest.mark.parametrize(
    ("parent", "old", "new", "said"),
    [
        (STS, sts(3), sts(5), "spec.replicas: cannot change from 3 to 5: field is immutable "
         "(Kueue's rule: a queued StatefulSet is admitted as one group); scale it to 0 first, "
         "then to the new size"),
        (LWS, lws(size=3), lws(size=4), "spec.leaderWorkerTemplate.size: cannot change from 3 "
         "to 4: field is immutable while queued (Kueue's rule: each group is one Workload of "
         "that size); create a LeaderWorkerSet of the new size"),
    ],
    ids=["statefulset-replicas", "leaderworkerset-size"],
)  # fmt: skip
def test_a_queued_group_keeps_its_size_in_kueues_words(parent, old, new, said):
    with pytest.raises(ManifestError) as err:
        parent.update_problem(old, new)
    assert f"{err.value.path}: {err.value.message}" == said


def test_a_leaderworkerset_scales_by_whole_groups():
    LWS.update_problem(lws(replicas=2), lws(replicas=5))
