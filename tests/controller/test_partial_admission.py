"""Kueue's partial-admission documentation example, applied unchanged, end to end over HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from extender.core.api.quantity import format_amount, to_amount
from extender.kube.api.resources import JOBS, WORKLOADS
from tests import yamlc
from tests.controller.conftest import eventually

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "kueue-v0.19.2" / "examples"


def test_kueues_partial_admission_example_runs_9_of_20_and_gets_its_20_back(
    cluster, start_controller
):
    """jobs.md: "When queued in a ClusterQueue with only 9 CPUs available, it will be admitted
    with parallelism=9. Note that the number of completions doesn't change." Deactivated, the
    Job is stopped with its own parallelism put back."""
    cluster.apply(*yamlc.safe_load_all((EXAMPLES / "single-clusterqueue-setup.yaml").read_text()))
    start_controller()
    job = cluster.admin.create(
        JOBS,
        yamlc.safe_load((EXAMPLES / "sample-job-partial-admission.yaml").read_text()),
        "default",
    )
    assert job["spec"]["suspend"] is True
    name = job["metadata"]["name"]

    def current() -> dict[str, Any]:
        found = cluster.get("jobs", name, "default")
        assert found is not None
        return found

    started = eventually(lambda: current()["spec"]["suspend"] is False and current(), what="start")
    assert (started["spec"]["parallelism"], started["spec"]["completions"]) == (9, 20)
    eventually(lambda: (current().get("status") or {}).get("active") == 9, what="9 pods active")
    workload = cluster.workload_of(job)
    assert workload is not None
    [pod_set] = workload["spec"]["podSets"]
    assert (pod_set["count"], pod_set["minCount"]) == (20, 5)  # what the Job asked for
    [assigned] = workload["status"]["admission"]["podSetAssignments"]
    assert assigned["count"] == 9
    assert assigned["resourceUsage"] == {
        "cpu": format_amount("cpu", to_amount("cpu", "9")),
        "memory": format_amount("memory", to_amount("memory", "1800Mi")),
    }

    cluster.admin.patch(
        WORKLOADS, workload["metadata"]["name"], {"spec": {"active": False}}, "default"
    )
    stopped = eventually(
        lambda: current()["spec"]["suspend"] is True and current()["spec"]["parallelism"] == 20
        and current(),
        what="the job to be stopped with its parallelism put back",
    )  # fmt: skip
    assert stopped["spec"]["completions"] == 20
    assert "kueue.x-k8s.io/podset" not in (
        stopped["spec"]["template"].get("metadata", {}).get("labels") or {}
    )
