"""Kueue's topology-aware scheduling examples, unchanged, through the double, the real webhook
and `python -m extender run`: a rack chosen and written on the Workload, the Job's pods
started gated and each let through to its host by completion index, and a Job larger than
any rack waiting with Kueue's message although the quota holds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from extender.kube.api import resources as r
from tests.builders import provisioning_check, ready_node
from tests.controller.conftest import CRDS, controller_process, eventually
from tests.controller.test_appwrapper import APPWRAPPERS
from tests.controller.test_jobset import JOBSET_CRD
from tests.controller.test_placement import pending_message, scheduler_filter
from tests.controller.test_pod_groups import LWS, LWS_NAME, lws_pods
from tests.controller.test_provisioning import PR_CRD, set_condition
from tests.servers import free_port
from tests.yamlc import safe_load, safe_load_all

LWS_CRD_FILE = "leaderworkerset.x-k8s.io_leaderworkersets.yaml"

EXAMPLES = Path(__file__).parents[1] / "data" / "kueue-v0.19.2" / "examples" / "tas"
BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
HOSTNAME = "kubernetes.io/hostname"
INDEX = "batch.kubernetes.io/job-completion-index"


def example(name: str) -> list[dict[str, Any]]:
    return [d for d in safe_load_all((EXAMPLES / name).read_text()) if d]


def node(name: str, block: str, rack: str, cpu: str = "6") -> dict[str, Any]:
    """A node of Kueue's TAS kind cluster (examples/tas/kind-cluster.yaml): its group, block
    and rack labels."""
    labels = {
        "cloud.provider.com/node-group": "tas-group",
        BLOCK: block,
        RACK: rack,
        HOSTNAME: name,
    }
    return ready_node(name, labels, {"cpu": cpu, "memory": "32Gi", "pods": "110"})


NODES = [
    node(f"{block}-{rack}-{i}", block, rack)
    for block in ("b1", "b2")
    for rack in ("r1", "r2")
    for i in (1, 2)
]


def started(cluster: Any, job: dict[str, Any]) -> dict[str, Any] | None:
    current = cluster.get("jobs", job["metadata"]["name"], "default")
    return current if current and current["spec"]["suspend"] is False else None


def pods_of(job: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """What the Job controller makes from an Indexed Job's template: one pod per index."""
    template = job["spec"]["template"]
    meta = template.get("metadata") or {}
    name = job["metadata"]["name"]
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{i}",
                "namespace": "default",
                "labels": {**(meta.get("labels") or {}), INDEX: str(i)},
                "annotations": {**(meta.get("annotations") or {}), INDEX: str(i)},
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": name,
                        "uid": job["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": template["spec"],
        }
        for i in range(count)
    ]


def let_through(cluster: Any, names: list[str]) -> list[str] | None:
    """The host each of these pods was let through to, once none is gated any more."""
    hosts = []
    for name in names:
        pod = cluster.get("pods", name, "default")
        if pod is None or pod["spec"].get("schedulingGates"):
            return None
        hosts.append(pod["spec"]["nodeSelector"][HOSTNAME])
    return hosts


def test_kueues_required_example_is_placed_in_one_rack_and_its_pods_pinned(cluster: Any) -> None:
    for obj in NODES:
        cluster.admin.create(r.NODES, obj)
    cluster.apply(*example("sample-queues.yaml"))
    (required,) = example("sample-job-required.yaml")
    port = free_port()
    proc = controller_process(cluster, "--scheduler-extender-address", f"127.0.0.1:{port}")
    try:
        job = cluster.admin.create(r.JOBS, required, "default")
        job = eventually(lambda: started(cluster, job), 20, "the required job to start")
        workload = cluster.workload_of(job)
        assert workload is not None
        (psa,) = workload["status"]["admission"]["podSetAssignments"]
        # 10 pods of 1 cpu; every rack holds 12: the first, its first host filled first.
        assert psa["topologyAssignment"] == {
            "levels": [HOSTNAME],
            "slices": [
                {
                    "domainCount": 2,
                    "valuesPerLevel": [{"individual": {"prefix": "b1-r1-", "roots": ["1", "2"]}}],
                    "podCounts": {"individual": [6, 4]},
                }
            ],
        }
        request = workload["spec"]["podSets"][0]["topologyRequest"]
        assert request == {"required": RACK, "podIndexLabel": INDEX}
        template = job["spec"]["template"]
        assert {"name": "kueue.x-k8s.io/topology"} in template["spec"]["schedulingGates"]
        assert (
            template["metadata"]["annotations"]["kueue.x-k8s.io/workload"]
            == (workload["metadata"]["name"])
        )

        # Where the scheduler extender runs, it holds the pods to the same two hosts.
        names = [n["metadata"]["name"] for n in NODES]
        answer = scheduler_filter(port, pods_of(job, 1)[0], names)
        assert answer["NodeNames"] == ["b1-r1-1", "b1-r1-2"]
        assert answer["FailedNodes"] == {
            n: "not in a domain of its podSet's topology assignment"
            for n in names
            if n not in ("b1-r1-1", "b1-r1-2")
        }

        # The test plays the Job controller; each pod is let through to its rank's host.
        for pod in pods_of(job, 10):
            cluster.admin.create(r.PODS, pod, "default")

        names = [f"{job['metadata']['name']}-{i}" for i in range(10)]
        hosts = eventually(lambda: let_through(cluster, names), 20, "every pod let through")
        assert hosts == ["b1-r1-1" if i < 6 else "b1-r1-2" for i in range(10)]
        assert all(
            cluster.get("pods", f"{job['metadata']['name']}-{i}", "default")["spec"][
                "nodeSelector"
            ]["cloud.provider.com/node-group"]
            == "tas-group"
            for i in range(10)
        )

        # Kueue's unconstrained example: anywhere, the tightest host first.
        (loose,) = example("sample-job-unconstrained.yaml")
        loose_job = cluster.admin.create(r.JOBS, loose, "default")
        loose_job = eventually(lambda: started(cluster, loose_job), 20, "the unconstrained job")
        loose_psa = cluster.workload_of(loose_job)["status"]["admission"]["podSetAssignments"][0]
        assert loose_psa["topologyAssignment"]["slices"][0]["podCounts"] == {
            "individual": [2, 6, 2]
        }

        # 14 pods in one rack: the quota holds them (100 cpu), no rack does.
        big = dict(required, spec={**required["spec"], "parallelism": 14, "completions": 14})
        big_job = cluster.admin.create(r.JOBS, big, "default")
        message = eventually(lambda: pending_message(cluster, big_job), 20, "the big job's reason")
        assert message == (
            'couldn\'t assign flavors to pod set main: topology "default" allows to fit only 12 '
            'out of 14 pod(s). Total nodes: 8; excluded: resource "cpu": 3'
        )
        assert cluster.get("jobs", big_job["metadata"]["name"], "default")["spec"]["suspend"]
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_a_failed_host_is_replaced_within_the_rack_then_the_workload_evicted(cluster: Any) -> None:
    hosts = [node(f"h{i}", "b1", "r1") for i in (1, 2, 3)] + [node("h4", "b1", "r2")]
    for obj in hosts:
        cluster.admin.create(r.NODES, obj)
    cluster.apply(*example("sample-queues.yaml"))
    (required,) = example("sample-job-required.yaml")
    eight = dict(required, spec={**required["spec"], "parallelism": 8, "completions": 8})
    proc = controller_process(cluster)

    def placed() -> dict[str, int] | None:
        workload = cluster.workload_of(job)
        admission = ((workload or {}).get("status") or {}).get("admission")
        if not admission:
            return None
        (piece,) = admission["podSetAssignments"][0]["topologyAssignment"]["slices"]
        level = piece["valuesPerLevel"][0]
        roots = level["individual"]["roots"] if "individual" in level else [level["universal"]]
        prefix = level.get("individual", {}).get("prefix", "")
        counts = piece["podCounts"]
        return {
            prefix + root: counts["universal"] if "universal" in counts else counts["individual"][i]
            for i, root in enumerate(roots)
        }

    try:
        job = cluster.admin.create(r.JOBS, eight, "default")
        job = eventually(lambda: started(cluster, job), 20, "the job to start")
        assert placed() == {"h1": 6, "h2": 2}
        # h2 goes NotReady: its 2 pods go to h3, in the same rack (h4 is in another).
        broken = cluster.admin.get(r.NODES, "h2")
        broken["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "Down"}]
        cluster.admin.update(r.NODES, broken, subresource="status")
        assert eventually(lambda: placed() == {"h1": 6, "h3": 2}, 20, "h2's pods on h3")
        # h3 fails too: no other host of the rack has room (h1 is full, h2 is down): evicted,
        # with Kueue's message (after a replacement Kueue clears its unhealthy nodes too).
        broken = cluster.admin.get(r.NODES, "h3")
        broken["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "Down"}]
        cluster.admin.update(r.NODES, broken, subresource="status")

        def evicted() -> dict[str, Any] | None:
            workload = cluster.workload_of(job)
            for condition in ((workload or {}).get("status") or {}).get("conditions") or []:
                if condition["type"] == "Evicted" and condition["status"] == "True":
                    return condition
            return None

        condition = eventually(evicted, 20, "the eviction")
        assert condition["reason"] == "NodeFailures"
        assert condition["message"] == (
            "Workload was evicted as there was no replacement for unhealthy node(s): h3"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_a_jobsets_slices_each_get_a_host_and_its_pods_ranked_by_job_index(cluster: Any) -> None:
    cluster.admin.create(CRDS, JOBSET_CRD)
    for obj in [node(f"j-{rack}-{i}", "b1", rack) for rack in ("r1", "r2") for i in (1, 2)]:
        cluster.admin.create(r.NODES, obj)
    cluster.apply(*example("sample-queues.yaml"))
    annotations = {
        "kueue.x-k8s.io/podset-required-topology": RACK,
        "kueue.x-k8s.io/podset-slice-required-topology": HOSTNAME,
        "kueue.x-k8s.io/podset-slice-size": "4",
    }
    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}
    pod_template = {
        "metadata": {"annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "sliced", "labels": {"kueue.x-k8s.io/queue-name": "tas-user-queue"}},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {
                        "spec": {"parallelism": 4, "completions": 4, "template": pod_template}
                    },
                }
            ]
        },
    }
    proc = controller_process(cluster)
    try:
        created = cluster.admin.create(r.JOBSETS, jobset, "default")

        def running() -> dict[str, Any] | None:
            current = cluster.get("jobsets", "sliced", "default")
            return current if current and current["spec"]["suspend"] is False else None

        started_set = eventually(running, 20, "the JobSet to start")
        workload = cluster.workload_of(created)
        assert workload is not None
        (pod_set,) = workload["spec"]["podSets"]
        assert pod_set["topologyRequest"] == {
            "required": RACK,
            "podIndexLabel": INDEX,
            "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index",
            "subGroupCount": 2,
            "podSetSliceRequiredTopology": HOSTNAME,
            "podSetSliceSize": 4,
        }
        (psa,) = workload["status"]["admission"]["podSetAssignments"]
        assert psa["topologyAssignment"]["slices"][0]["podCounts"] == {"universal": 4}

        # The test plays JobSet's and Job's controllers: 2 jobs of 4 indexed pods.
        template = started_set["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        for job_index in (1, 0):
            for i in range(4):
                labels = {
                    **(template["metadata"].get("labels") or {}),
                    INDEX: str(i),
                    "jobset.sigs.k8s.io/job-index": str(job_index),
                }
                pod = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"sliced-workers-{job_index}-{i}",
                        "namespace": "default",
                        "labels": labels,
                        "annotations": dict(template["metadata"].get("annotations") or {}),
                    },
                    "spec": template["spec"],
                }
                cluster.admin.create(r.PODS, pod, "default")

        def hosts() -> dict[str, str] | None:
            out = {}
            for job_index in (0, 1):
                for i in range(4):
                    pod = cluster.get("pods", f"sliced-workers-{job_index}-{i}", "default")
                    if pod is None or pod["spec"].get("schedulingGates"):
                        return None
                    out[f"{job_index}-{i}"] = pod["spec"]["nodeSelector"][HOSTNAME]
            return out

        pinned = eventually(hosts, 20, "every pod let through")
        # One slice (one job's 4 pods) a host, both hosts in one rack.
        by_job = {j: {pinned[f"{j}-{i}"] for i in range(4)} for j in (0, 1)}
        assert all(len(h) == 1 for h in by_job.values()), pinned
        assert by_job[0] != by_job[1]
        racks = {h.split("-")[1] for hs in by_job.values() for h in hs}
        assert len(racks) == 1, pinned
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_kueues_leaderworkerset_tas_example_puts_each_group_in_one_rack(cluster: Any) -> None:
    """site/static/examples/serving-workloads/sample-leaderworkerset-tas.yaml, unchanged: the
    leader and its workers of each group required in one rack, together (podset-group-name)."""
    crd = safe_load((Path(__file__).parents[1] / "data" / "lws" / LWS_CRD_FILE).read_text())
    cluster.admin.create(CRDS, crd)
    gpu_nodes = []
    for rack in ("r1", "r2"):
        for i in (1, 2):
            obj = node(f"g-{rack}-{i}", "b1", rack, cpu="4")
            for key in ("allocatable", "capacity"):
                obj["status"][key]["nvidia.com/gpu"] = "2"
            gpu_nodes.append(obj)
    for obj in gpu_nodes:
        cluster.admin.create(r.NODES, obj)
    cluster.apply(*example("sample-gpu-queues.yaml"))
    (sample,) = example("sample-leaderworkerset-tas.yaml")
    proc = controller_process(cluster)
    try:
        created = cluster.admin.create(LWS, sample, "default")
        for index in range(2):
            for pod in lws_pods(created, index):
                cluster.admin.create(r.PODS, pod, "default")

        def placed() -> dict[str, str] | None:
            hosts = {}
            for index in range(2):
                for pod in lws_pods(created, index):
                    name = pod["metadata"]["name"]
                    current = cluster.get("pods", name, "default")
                    if current is None or current["spec"].get("schedulingGates"):
                        return None
                    hosts[name] = current["spec"]["nodeSelector"][HOSTNAME]
            return hosts

        hosts = eventually(placed, 30, "every pod of both groups let through to a host")
        for index in range(2):
            group = [h for name, h in hosts.items() if name.startswith(f"{LWS_NAME}-{index}")]
            assert len(group) == 3
            assert len({h.split("-")[1] for h in group}) == 1, hosts  # one rack a group
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def provisioned_tas_queue(cluster: Any, nodes: list[dict[str, Any]], **config: Any) -> None:
    """The nodes, and Kueue's sample TAS queues with a ProvisioningRequest check on their
    ClusterQueue (its config's spec extended with `config`)."""
    for obj in nodes:
        cluster.admin.create(r.NODES, obj)
    cluster.admin.create(CRDS, safe_load(PR_CRD.read_text()))
    topology, flavor, cq, lq = example("sample-queues.yaml")
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "tas-prov"}]}
    check, settings = provisioning_check("tas-prov", "tas-prov-config")
    settings["spec"].update(config)
    cluster.admin.create(r.PROVISIONING_REQUEST_CONFIGS, settings)
    cluster.apply(topology, flavor, check, cq, lq)


def capacity_requested(cluster: Any, job: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """The job's Workload once it reserved quota and its ProvisioningRequest exists, and the
    request's name."""
    workload = cluster.workload_of(job)
    if workload is None or not (workload.get("status") or {}).get("admission"):
        return None
    name = f"{workload['metadata']['name']}-tas-prov-1"
    return (workload, name) if cluster.get("provisioningrequests", name, "default") else None


def test_a_provisioning_check_delays_placement_until_the_capacity_is_provisioned(
    cluster: Any,
) -> None:
    """Kueue's delayed topology request: with a ProvisioningRequest check on the topology
    flavor, quota is reserved without a placement (delayedTopologyRequest Pending); once the
    request is Provisioned the pods are placed (Ready) and only then is the job admitted."""
    provisioned_tas_queue(cluster, NODES)
    (required,) = example("sample-job-required.yaml")
    proc = controller_process(cluster)
    try:
        job = cluster.admin.create(r.JOBS, required, "default")
        workload, request = eventually(
            lambda: capacity_requested(cluster, job), 20, "quota reserved and capacity requested"
        )
        (psa,) = workload["status"]["admission"]["podSetAssignments"]
        assert psa["delayedTopologyRequest"] == "Pending"
        assert "topologyAssignment" not in psa
        admitted = [c for c in workload["status"]["conditions"] if c["type"] == "Admitted"]
        assert not admitted or admitted[0]["status"] != "True"
        assert cluster.get("jobs", job["metadata"]["name"], "default")["spec"]["suspend"]

        set_condition(cluster, request, "Provisioned", "Provisioned")
        job = eventually(lambda: started(cluster, job), 20, "the job to start once provisioned")
        (psa,) = cluster.workload_of(job)["status"]["admission"]["podSetAssignments"]
        assert psa["delayedTopologyRequest"] == "Ready"
        (piece,) = psa["topologyAssignment"]["slices"]
        assert piece["valuesPerLevel"] == [
            {"individual": {"prefix": "b1-r1-", "roots": ["1", "2"]}}
        ]
        assert piece["podCounts"] == {"individual": [6, 4]}
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_a_delayed_placement_keeps_to_the_nodes_the_provisioning_request_brought(
    cluster: Any,
) -> None:
    """Kueue's second pass merges the Ready checks' podSetUpdates into the podSet it places:
    a ProvisioningRequestConfig's node selector keeps the pods to the provisioned nodes, not
    to the tightest rack elsewhere."""
    brought = {"dedicated-selector-key": "pool-7"}
    nodes = [node(n["metadata"]["name"], *n["metadata"]["name"].split("-")[:2]) for n in NODES]
    for obj in nodes:
        if obj["metadata"]["name"].startswith("b2-r2-"):
            obj["metadata"]["labels"].update(brought)  # the provisioned capacity
    selector = {
        "key": "dedicated-selector-key",
        "valueFromProvisioningClassDetail": "dedicated-selector-detail",
    }
    provisioned_tas_queue(cluster, nodes, podSetUpdates={"nodeSelector": [selector]})
    (required,) = example("sample-job-required.yaml")
    proc = controller_process(cluster)
    try:
        job = cluster.admin.create(r.JOBS, required, "default")
        _, request = eventually(
            lambda: capacity_requested(cluster, job), 20, "quota reserved and capacity requested"
        )
        details = {"provisioningClassDetails": {"dedicated-selector-detail": "pool-7"}}
        set_condition(cluster, request, "Provisioned", "Provisioned", **details)
        job = eventually(lambda: started(cluster, job), 20, "the job to start once provisioned")
        (psa,) = cluster.workload_of(job)["status"]["admission"]["podSetAssignments"]
        assert psa["delayedTopologyRequest"] == "Ready"
        (piece,) = psa["topologyAssignment"]["slices"]
        assert piece["valuesPerLevel"] == [
            {"individual": {"prefix": "b2-r2-", "roots": ["1", "2"]}}
        ]
        template = job["spec"]["template"]["spec"]
        assert template["nodeSelector"]["dedicated-selector-key"] == "pool-7"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


AW_CRD = (
    Path(__file__).parents[1] / "data" / "appwrapper" / "workload.codeflare.dev_appwrappers.yaml"
)


def test_an_appwrappers_job_pods_are_pinned_by_their_completion_index(cluster: Any) -> None:
    """Kueue's required example wrapped in an AppWrapper: the appwrapper library's podSet
    annotations name the completion index, so each pod goes to its rank's host, whatever
    order the pods come in."""
    for obj in NODES:
        cluster.admin.create(r.NODES, obj)
    cluster.admin.create(CRDS, safe_load(AW_CRD.read_text()))
    cluster.apply(*example("sample-queues.yaml"))
    (job,) = example("sample-job-required.yaml")
    job["metadata"] = {"name": "tas-job"}
    wrapper = {
        "apiVersion": "workload.codeflare.dev/v1beta2",
        "kind": "AppWrapper",
        "metadata": {
            "name": "tas-aw",
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "tas-user-queue"},
        },
        "spec": {"components": [{"template": job}]},
    }
    proc = controller_process(cluster)
    try:
        cluster.admin.create(APPWRAPPERS, wrapper, "default")

        def running() -> dict[str, Any] | None:
            aw = cluster.get("appwrappers", "tas-aw", "default")
            return aw if aw and aw["spec"].get("suspend") is False else None

        aw = eventually(running, 20, "the AppWrapper started")
        workload = cluster.workload_of(aw)
        request = workload["spec"]["podSets"][0]["topologyRequest"]
        (info,) = aw["spec"]["components"][0]["podSetInfos"]
        # The test plays the appwrapper and Job controllers: pods with the podSetInfo applied
        # and their completion index, made and named in the reverse of their index's order.
        template = job["spec"]["template"]
        for i in reversed(range(10)):
            labels = {**(info.get("labels") or {}), INDEX: str(i)}
            annotations = {
                **template["metadata"]["annotations"],
                **(info.get("annotations") or {}),
                INDEX: str(i),
            }
            spec = {
                **template["spec"],
                "nodeSelector": dict(info.get("nodeSelector") or {}),
                "schedulingGates": list(info.get("schedulingGates") or []),
            }
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"tas-job-{chr(ord('z') - i)}",
                    "namespace": "default",
                    "labels": labels,
                    "annotations": annotations,
                },
                "spec": spec,
            }
            cluster.admin.create(r.PODS, pod, "default")

        names = [f"tas-job-{chr(ord('z') - i)}" for i in range(10)]  # by index
        hosts = eventually(lambda: let_through(cluster, names), 20, "every pod let through")
        assert hosts == ["b1-r1-1" if i < 6 else "b1-r1-2" for i in range(10)]
        assert request == {"required": RACK, "podIndexLabel": INDEX}
    finally:
        proc.terminate()
        proc.wait(timeout=20)
