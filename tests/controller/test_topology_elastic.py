"""An elastic Job on topology domains scaled up, through the double and `python -m extender
run` (Kueue's tas/baseline/job_test.go "should preserve topology assignment during scale-up
with elastic jobs"): the pod made after the scale-up carries the name of the slice the Job
started under, and the slice that replaced it places it, as Kueue's ungater lists a slice's
pods by its workload-slice-name."""

from __future__ import annotations

from typing import Any

from extender.kube.api import resources as r
from tests.controller.conftest import controller_process, eventually
from tests.controller.test_elastic import slices_of, status_of
from tests.controller.test_topology import HOSTNAME, example, node, pods_of, started


def elastic_job() -> dict[str, Any]:
    """One pod of 1 cpu at a time, ten to run, placed without constraint."""
    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "elastic",
            "labels": {"kueue.x-k8s.io/queue-name": "tas-user-queue"},
            "annotations": {"kueue.x-k8s.io/elastic-job": "true"},
        },
        "spec": {
            "parallelism": 1,
            "completions": 10,
            "suspend": True,
            "template": {
                "metadata": {
                    "annotations": {"kueue.x-k8s.io/podset-unconstrained-topology": "true"}
                },
                "spec": {"restartPolicy": "Never", "containers": [container]},
            },
        },
    }


def let_through(cluster: Any, name: str) -> str | None:
    """The host a pod was let through to, once it has no gate left."""
    pod = cluster.get("pods", name, "default")
    if pod is None or pod["spec"].get("schedulingGates"):
        return None
    return str(pod["spec"]["nodeSelector"][HOSTNAME])


def test_a_scale_up_slice_places_the_pod_made_after_it(cluster: Any) -> None:
    for obj in [node(f"e{i}", "b1", "r1", cpu="1") for i in (1, 2, 3)]:
        cluster.admin.create(r.NODES, obj)
    cluster.apply(*example("sample-queues.yaml"))
    proc = controller_process(cluster)
    try:
        job = cluster.admin.create(r.JOBS, elastic_job(), "default")
        live = eventually(lambda: started(cluster, job), 20, "the elastic job to start")
        pods = pods_of(live, 2)  # as the Job controller makes them from its template
        cluster.admin.create(r.PODS, pods[0], "default")
        first = eventually(lambda: let_through(cluster, "elastic-0"), 20, "its pod placed")

        cluster.admin.patch(r.JOBS, "elastic", {"spec": {"parallelism": 2}}, "default")

        def scaled() -> bool:
            found = slices_of(cluster, job)
            return len(found) == 2 and status_of(found[1], "Admitted") == "True"

        eventually(scaled, 20, "the scale-up slice admitted")
        cluster.admin.create(r.PODS, pods[1], "default")  # the second pod, made only now
        second = eventually(lambda: let_through(cluster, "elastic-1"), 20, "the new pod placed")
        assert second != first  # one cpu a host: the old pod keeps its host
    finally:
        proc.terminate()
        proc.wait(timeout=20)
