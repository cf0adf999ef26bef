"""JobSets are managed when their CRD is served: one podSet per replicatedJob."""

from __future__ import annotations

from extender.kube.api import resources as r
from tests.controller.conftest import CRDS, eventually
from tests.controller.test_preemption import (
    cluster_queue,
    flavor,
    local_queue,
    priority_preemption_setup,
)

JOBSET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "jobsets.jobset.x-k8s.io"},
    "spec": {
        "group": "jobset.x-k8s.io",
        "scope": "Namespaced",
        "names": {
            "kind": "JobSet",
            "plural": "jobsets",
            "singular": "jobset",
            "listKind": "JobSetList",
        },
        "versions": [
            {
                "name": "v1alpha2",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


def replicated(name, replicas, cpu):
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": 2,
                "completions": 2,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
                        ],
                    }
                },
            }
        },
    }


def test_a_jobset_is_queued_admitted_placed_and_finished(cluster, start_controller):
    cluster.admin.create(CRDS, JOBSET_CRD)
    cluster.apply(
        flavor("pool-a", {"pool": "a"}), cluster_queue("cq", 8), local_queue("user-queue", "cq")
    )
    start_controller()
    created = cluster.admin.create(
        r.JOBSETS,
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "train", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
            "spec": {
                "replicatedJobs": [replicated("Workers", 2, "1"), replicated("driver", 1, "1")]
            },
        },
        "default",
    )
    assert created["spec"]["suspend"] is True  # the real webhook, called by the double

    def running():
        jobset = cluster.get("jobsets", "train", "default")
        return jobset if jobset["spec"]["suspend"] is False else None

    jobset = eventually(running, what="the JobSet to start")
    for rjob in jobset["spec"]["replicatedJobs"]:
        pod = rjob["template"]["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"pool": "a"}
    wl = cluster.workload_of(created)
    assert wl["metadata"]["name"].startswith("jobset-train-")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [
        ("workers", 4),
        ("driver", 2),
    ]
    usage = {
        p["name"]: p["resourceUsage"]["cpu"] for p in wl["status"]["admission"]["podSetAssignments"]
    }
    assert usage == {"workers": "4", "driver": "2"}

    def complete(status):
        status["conditions"] = [
            {
                "type": "Completed",
                "status": "True",
                "reason": "AllJobsCompleted",
                "message": "jobset completed successfully",
            }
        ]

    cluster.api.update_status("jobsets", "default", "train", complete)

    def finished():
        conditions = (cluster.workload_of(created).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Finished" and c["status"] == "True" for c in conditions)

    eventually(finished, what="the Workload to finish")


def test_a_preempted_jobset_is_suspended_and_its_templates_restored(cluster, start_controller):
    cluster.admin.create(CRDS, JOBSET_CRD)
    cluster.apply(*priority_preemption_setup())
    start_controller()

    def jobset(name, klass):
        return cluster.admin.create(
            r.JOBSETS,
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": {
                    "name": name,
                    "labels": {
                        "kueue.x-k8s.io/queue-name": "user-queue",
                        "kueue.x-k8s.io/priority-class": klass,
                    },
                },
                "spec": {"replicatedJobs": [replicated("workers", 1, "2")]},
            },
            "default",
        )

    def suspended(name):
        return cluster.get("jobsets", name, "default")["spec"]["suspend"]

    jobset("low", "low")
    eventually(lambda: suspended("low") is False, what="the low JobSet to start")
    jobset("high", "high")
    eventually(lambda: suspended("high") is False, what="the high JobSet to start")
    low = cluster.get("jobsets", "low", "default")
    assert low["spec"]["suspend"] is True
    pod = low["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert "nodeSelector" not in pod


def test_a_jobset_crd_installed_after_the_controller_started_is_taken_up(
    cluster, start_controller, caplog
):
    caplog.set_level("INFO", logger="tower.cache")
    cluster.apply(
        flavor("pool-a", {"pool": "a"}), cluster_queue("cq", 8), local_queue("user-queue", "cq")
    )
    start_controller()
    said = [r.getMessage() for r in caplog.records if r.name == "tower.cache"]
    assert said == [
        "managing Job (batch/job): the API server serves jobs.batch",
        "managing Pod (pod): the API server serves pods",
        "managing StatefulSet (statefulset): the API server serves statefulsets.apps",
        "integrations enabled whose CRD is not installed, managed once it is: "
        "kubeflow.org/mpijob, ray.io/rayjob, ray.io/raycluster, ray.io/rayservice, "
        "jobset.x-k8s.io/jobset, workload.codeflare.dev/appwrapper, trainer.kubeflow.org/trainjob, "
        "leaderworkerset.x-k8s.io/leaderworkerset",
    ]
    cluster.admin.create(CRDS, JOBSET_CRD)
    created = cluster.admin.create(
        r.JOBSETS,
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "late", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
            "spec": {"replicatedJobs": [replicated("workers", 1, "1")]},
        },
        "default",
    )

    def running():
        return cluster.get("jobsets", "late", "default")["spec"]["suspend"] is False

    eventually(running, what="the JobSet created after its CRD appeared to start")
    assert cluster.workload_of(created)["metadata"]["name"].startswith("jobset-late-")
    found = (
        "managing JobSet (jobset.x-k8s.io/jobset): the API server serves jobsets.jobset.x-k8s.io"
    )
    assert found in [r.getMessage() for r in caplog.records]
