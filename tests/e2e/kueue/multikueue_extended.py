"""Kueue's MultiKueue extended e2e setup: the operators' CRDs on every cluster, and the operators
played where Kueue's e2e clusters run the real ones.

Kueue's manager and workers all run the operators (JobSet, Kubeflow, Trainer, AppWrapper, LWS,
KubeRay). On the manager a job handed to MultiKueue (its managedBy) is left alone by its
operator, so only the LeaderWorkerSet controller, which has no managedBy, is played there; on
each worker every operator is played (tests/e2e/kueue/operators.py, lws.py, ray.py), and the
worker's pods are run by its played kubelet (tests/e2e/kueue/multikueue.py).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from kubernetes import client

from tests.e2e.conftest import kubectl
from tests.e2e.kueue.lws import LeaderWorkerSetController
from tests.e2e.kueue.multikueue import MultiKueueSetup, Worker
from tests.e2e.kueue.operators import (
    CRD_FILES,
    KUBEFLOW_JOB,
    MPIJOB,
    PYTORCHJOB,
    REPLICA_TYPE,
    Operators,
)
from tests.e2e.kueue.ray import KubeRay
from tests.e2e.kueue.util import LONG_TIMEOUT, ROOT, Tower, eventually

DATA = ROOT / "tests" / "data"
# The operators' CRDs of Kueue's e2e clusters, with LWS v0.9.0's and KubeRay's.
ALL_CRDS = (
    *CRD_FILES,
    "lws/leaderworkerset.x-k8s.io_leaderworkersets.yaml",
    "kuberay/ray.io_rayclusters.yaml",
    "kuberay/ray.io_rayjobs.yaml",
    "kuberay/ray.io_rayservices.yaml",
)
# How long a running Tower takes to watch a kind newly served (it looks every 30 s).
TAKE_UP = 35.0
RUNTIME = DATA / "trainer" / "runtimes" / "torch_distributed.yaml"
OPERATOR = "training.kubeflow.org/operator-name"
KINDS = ("jobsets.jobset.x-k8s.io", "mpijobs.kubeflow.org", "pytorchjobs.kubeflow.org",
         "trainjobs.trainer.kubeflow.org", "appwrappers.workload.codeflare.dev",
         "leaderworkersets.leaderworkerset.x-k8s.io", "rayclusters.ray.io", "rayjobs.ray.io",
         "rayservices.ray.io")  # fmt: skip


def _install(run: Any) -> bool:
    """The CRDs and trainer's `torch-distributed` runtime applied with `run` (one cluster's
    kubectl); True when a CRD was new there."""
    before = set(run("get", "crd", "-o", "name").split())
    for path in ALL_CRDS:
        # Server-side: some CRDs are larger than client-side apply's annotation allows.
        run("apply", "--server-side", "--force-conflicts", "-f", str(DATA / path))
    run("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    run("apply", "--server-side", "--force-conflicts", "-f", str(RUNTIME))
    return bool(set(run("get", "crd", "-o", "name").split()) - before)


def install_crds(tower: Tower, workers: tuple[Worker, Worker]) -> None:
    """Kueue's e2e clusters have every operator installed: the CRDs on the manager (its Tower
    restarted to watch a new kind at once) and on each worker (whose Tower takes up a kind
    it finds served within 30 s: the test waits until it serves each)."""
    if _install(kubectl):
        tower.restart_controller()
    for worker in workers:
        if _install(worker.kubectl):
            api = client.ApisApi(worker.api)

            def served(api: client.ApisApi = api) -> bool:
                groups = {g.name for g in api.get_api_versions().groups}
                return all(kind.split(".", 1)[1] in groups for kind in KINDS)

            eventually(served, LONG_TIMEOUT, f"{worker.name} to serve the operators' kinds")
            time.sleep(TAKE_UP)


class WorkerOperators(Operators):
    """The operators on a worker. The Kubeflow operators replace their status whole (a count
    gone to zero is dropped, not kept as a merge patch would), and training-operator v1.9
    writes each replica type's pod selector in it (Kueue's PyTorchJob case compares it)."""

    def _status(self, gvp: tuple[str, str, str], obj: dict, status: dict) -> None:
        if gvp not in (PYTORCHJOB, MPIJOB):
            super()._status(gvp, obj, status)
            return
        if gvp == PYTORCHJOB and "replicaStatuses" in status:
            name = obj["metadata"]["name"]
            status = {**status, "replicaStatuses": {
                kind: {**state, "selector": f"{KUBEFLOW_JOB}={name},"
                       f"{OPERATOR}=pytorchjob-controller,{REPLICA_TYPE}={kind.lower()}"}
                for kind, state in status["replicaStatuses"].items()}}  # fmt: skip
        old = obj.get("status") or {}
        if all(old.get(k) == v for k, v in status.items()):
            return
        group, version, plural = gvp
        body = {**obj, "status": {**old, **status}}
        self.custom.replace_namespaced_custom_object_status(
            group, version, self.ns, plural, obj["metadata"]["name"], body
        )


class WorkerKubeRay(KubeRay):
    """KubeRay's operator played on a worker cluster."""

    def __init__(self, worker: Worker, namespace: str) -> None:
        super().__init__(namespace)
        self.api = worker.api
        self.custom = client.CustomObjectsApi(worker.api)
        self.core = worker.core
        self.batch = worker.batch


class Played:
    """The operators of one case's namespace, running until the case ends."""

    def __init__(self, mk: MultiKueueSetup) -> None:
        self.mk = mk
        self.operators = [WorkerOperators(w.cluster, mk.ns) for w in mk.workers]
        self.lws = [LeaderWorkerSetController(c.api, mk.ns)
                    for c in (mk.manager, *(w.cluster for w in mk.workers))]  # fmt: skip
        self.ray = [WorkerKubeRay(w, mk.ns) for w in mk.workers]
        for ray in self.ray:
            ray.__enter__()

    def stop(self) -> list[str]:
        for op in self.operators:
            op.stop()
        for lws in self.lws:
            lws.stop()
        errors = [e for op in self.operators for e in op.errors]
        errors += [e for lws in self.lws for e in lws.errors]
        for ray in self.ray:
            try:
                ray.__exit__(None, None, None)
            except AssertionError as err:
                errors.append(str(err))
        return errors


@contextlib.contextmanager
def played(mk: MultiKueueSetup) -> Iterator[Played]:
    running = Played(mk)
    try:
        yield running
    finally:
        errors = running.stop()
    assert not errors, f"the operators' players failed: {errors[:3]}"
