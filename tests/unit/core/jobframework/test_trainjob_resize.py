"""A queued TrainJob keeps its size: a change of what sizes its podSets (numNodes,
resourcesPerNode) is refused with the way to scale it; other changes, and unqueued
TrainJobs, pass."""

from __future__ import annotations

from typing import Any

import pytest

from extender.core.api.parse import ManifestError
from extender.core.jobframework.trainer import TrainJob

TJ = TrainJob()


def train_job(queued: bool = True, suspend: bool = False, **trainer: Any) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": "user-queue"} if queued else {}
    return {
        "metadata": {"name": "tj", "namespace": "default", "labels": labels},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "suspend": suspend,
            "trainer": trainer,
        },
    }


@pytest.mark.parametrize(
    ("old", "new", "refused"),
    [
        (train_job(numNodes=2), train_job(numNodes=4), "spec.trainer.numNodes: cannot change "
         "from 2 to 4 on a queued TrainJob"),
        (train_job(), train_job(numNodes=3), "spec.trainer.numNodes: cannot change from unset "
         "to 3"),
        (train_job(suspend=True, numNodes=2), train_job(suspend=True, numNodes=1),
         "spec.trainer.numNodes: cannot change from 2 to 1"),
        (train_job(resourcesPerNode={"requests": {"cpu": "1"}}),
         train_job(resourcesPerNode={"requests": {"cpu": "2"}}),
         'spec.trainer.resourcesPerNode: cannot change from {"requests":{"cpu":"1"}} to '
         '{"requests":{"cpu":"2"}}'),
        (train_job(numNodes=2, image="a"), train_job(numNodes=2, image="b"), None),
        (train_job(queued=False, numNodes=2), train_job(queued=False, numNodes=4), None),
    ],
    ids=["grown", "set", "while-suspended", "resources", "image", "unqueued"],
)  # fmt: skip
def test_a_queued_trainjob_keeps_its_size(old, new, refused):
    if refused is None:
        TJ.check_update(old, new)
        return
    with pytest.raises(ManifestError) as err:
        TJ.check_update(old, new)
    said = f"{err.value.path}: {err.value.message}"
    assert said.startswith(refused), said
    assert said.endswith("delete it and create it again at the new size"), said
