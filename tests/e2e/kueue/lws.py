"""The LeaderWorkerSet controller (LWS v0.9.0, whose CRD is installed), played by the test.

No LWS controller runs here, so a thread does its part for one namespace, as LWS v0.9.0 does
it (pkg/controllers/leaderworkerset_controller.go, pod_controller.go, its pod webhook):
- each group `i` is a leader pod `<name>-<i>` and workers `<name>-<i>-<j>` (j = 1..size-1),
  labelled with the set's name, group index, worker index, group key and template revision,
  annotated with the size (and, on a worker, its leader's name); the leader is owned by the
  LeaderWorkerSet and the workers by their leader (LWS: by a StatefulSet the leader owns), so
  the garbage collector removes a group with its leader and the set with all its groups;
- startupPolicy LeaderReady makes the workers only once the leader is ready;
- restartPolicy RecreateGroupOnPodRestart (the default) recreates the whole group when one of
  its pods is gone; None recreates only the missing pod;
- a change of the templates is rolled out group by group from the highest index, at most
  maxUnavailable groups down at once, with up to maxSurge extra groups (indices replicas..)
  while it lasts (status.replicas counts them, as the leader StatefulSet's);
- status: replicas, readyReplicas (groups whose pods all run and are ready), updatedReplicas,
  hpaPodSelector, and the conditions Available (reason AllGroupsReady) / Progressing (reason
  GroupsProgressing), one True and the other False.
The pods' containers are run by the real node (or the stand-in kubelet).
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from tests.e2e.kueue.util import AGNHOST, BEHAVIOR_WAIT_FOR_DELETION, QUEUE_LABEL

GROUP, VERSION, PLURAL = "leaderworkerset.x-k8s.io", "v1", "leaderworkersets"
PREFIX = "leaderworkerset.sigs.k8s.io/"
SET_NAME = PREFIX + "name"
GROUP_INDEX = PREFIX + "group-index"
WORKER_INDEX = PREFIX + "worker-index"
GROUP_KEY = PREFIX + "group-key"
REVISION = PREFIX + "template-revision-hash"
SIZE = PREFIX + "size"
LEADER_NAME = PREFIX + "leader-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"


def make_leader_worker_set(
    name: str,
    namespace: str,
    *,
    queue: str | None = None,
    size: int = 1,
    replicas: int = 1,
    cpu: str = "200m",
    image: str = AGNHOST,
    args: list[str] | None = None,
    grace: int | None = 1,
    startup_policy: str = "LeaderCreated",
    restart_policy: str | None = None,
    leader_cpu: str | None = None,
    priority_class: str | None = None,
    worker_labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """leaderworkersettesting.MakeLeaderWorkerSet(name, ns).Image(image, args).Size(size)
    .Replicas(n).RequestAndLimit(cpu, cpu).TerminationGracePeriod(grace).Queue(q)
    .StartupPolicy(p), and RestartPolicy, WorkloadPriorityClass, WorkerTemplateSpecLabel;
    `leader_cpu` adds the cases' LeaderTemplate: container `c`, the same image, that cpu
    request (no limit)."""
    labels = {QUEUE_LABEL: queue} if queue else {}
    if priority_class:
        labels[PRIORITY_CLASS_LABEL] = priority_class
    worker_spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": image, "args": args or BEHAVIOR_WAIT_FOR_DELETION,
                        "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}],
        "nodeSelector": {},
    }  # fmt: skip
    template: dict[str, Any] = {"size": size, "workerTemplate": {"spec": worker_spec}}
    if worker_labels:
        template["workerTemplate"]["metadata"] = {"labels": dict(worker_labels)}
    if leader_cpu is not None:
        template["leaderTemplate"] = {"spec": {
            "containers": [{"name": "c", "image": image,
                            "args": args or BEHAVIOR_WAIT_FOR_DELETION,
                            "resources": {"requests": {"cpu": leader_cpu}}}],
            "nodeSelector": {},
        }}  # fmt: skip
    if grace is not None:
        for which in ("leaderTemplate", "workerTemplate"):
            if which in template:
                template[which]["spec"]["terminationGracePeriodSeconds"] = grace
    if restart_policy is not None:
        template["restartPolicy"] = restart_policy
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"replicas": replicas, "startupPolicy": startup_policy,
                 "leaderWorkerTemplate": template},
    }  # fmt: skip


def _hash(value: Any) -> str:
    return hashlib.sha1(json.dumps(value, sort_keys=True).encode()).hexdigest()[:10]


def _ready(pod: client.V1Pod) -> bool:
    """LWS's PodRunningAndReady (a pod on its way out counts as gone)."""
    if pod.metadata.deletion_timestamp or pod.status.phase != "Running":
        return False
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Group:
    leader: client.V1Pod | None = None
    workers: dict[int, client.V1Pod] = field(default_factory=dict)

    def pods(self) -> list[client.V1Pod]:
        return ([self.leader] if self.leader else []) + list(self.workers.values())


class LeaderWorkerSetController:
    """The LWS controller for one namespace, on a thread, until `stop`."""

    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.namespace = namespace
        self.errors: list[str] = []
        # Workers made under a leader (by its uid): one of them gone means a pod restart.
        self._made: dict[str, set[str]] = {}
        self._surging: set[str] = set()  # the sets (uid) in a rollout with surge groups
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lws-{namespace}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                listed = self.custom.list_namespaced_custom_object(
                    GROUP, VERSION, self.namespace, PLURAL
                )["items"]
                for lws in listed:
                    if not lws["metadata"].get("deletionTimestamp"):
                        self._reconcile(lws)
            except client.ApiException as err:
                if err.status not in (404, 409, 422):  # a race with a delete or an update
                    self.errors.append(f"{err.status}: {err.body}")
            except Exception as err:  # reported by the test (`errors`), never swallowed
                self.errors.append(repr(err))
            self._stop.wait(0.3)

    # ----- one pass over a LeaderWorkerSet -------------------------------------------------

    def _reconcile(self, lws: dict[str, Any]) -> None:
        meta, spec = lws["metadata"], lws["spec"]
        name, uid = meta["name"], meta["uid"]
        template = spec["leaderWorkerTemplate"]
        replicas = int(spec.get("replicas", 1))
        size = int(template.get("size", 1))
        revision = _hash({k: template.get(k) for k in ("leaderTemplate", "workerTemplate")})
        groups = self._groups(name)
        rolling = (spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}
        max_surge = int(rolling.get("maxSurge") or 0)
        max_unavailable = int(rolling.get("maxUnavailable", 1) or 1)

        def updated(i: int) -> bool:
            pods = groups[i].pods() if i in groups else []
            return len(pods) == size and all(
                (p.metadata.labels or {}).get(REVISION) == revision for p in pods
            )

        def ready(i: int) -> bool:
            pods = groups[i].pods() if i in groups else []
            return len(pods) == size and all(_ready(p) for p in pods)

        old = [i for i in range(replicas) if i in groups and groups[i].leader and not updated(i)]
        if old and max_surge:
            self._surging.add(uid)
        if uid in self._surging and all(updated(i) and ready(i) for i in range(replicas)):
            self._surging.discard(uid)
        total = replicas + (max_surge if uid in self._surging else 0)

        # Groups beyond the wanted count go, their workers with their leader.
        for i, group in groups.items():
            if i >= total:
                self._delete(group.pods())
        # A rollout replaces old groups from the highest index, never more than maxUnavailable
        # groups down at once, surge groups counted (LWS's partition waits for the tail of
        # ready groups: the surge groups are ready before any old one goes).
        budget = max_unavailable - sum(1 for i in range(total) if not ready(i))
        for i in sorted(old, reverse=True):
            if budget <= 0:
                break
            if ready(i):
                self._delete(groups[i].pods())
                budget -= 1
        policy = template.get("restartPolicy", "RecreateGroupOnPodRestart")
        for i in range(total):
            self._make_group(lws, i, groups.get(i, _Group()), size, revision, policy)
        self._write_status(lws, self._groups(name), replicas, size, revision)

    def _groups(self, name: str) -> dict[int, _Group]:
        pods = self.core.list_namespaced_pod(
            self.namespace, label_selector=f"{SET_NAME}={name}"
        ).items
        groups: dict[int, _Group] = {}
        for pod in pods:
            labels = pod.metadata.labels or {}
            i, worker = int(labels[GROUP_INDEX]), int(labels.get(WORKER_INDEX, "0"))
            group = groups.setdefault(i, _Group())
            if worker == 0:
                group.leader = pod
            else:
                group.workers[worker] = pod
        return groups

    def _make_group(
        self, lws: dict[str, Any], i: int, group: _Group, size: int, revision: str, policy: str
    ) -> None:
        name = lws["metadata"]["name"]
        leader = group.leader
        if leader is not None and leader.metadata.deletion_timestamp:
            return  # its group goes with it; made again once it is gone
        if leader is None:
            if group.workers:
                self._delete(list(group.workers.values()))  # as the garbage collector would
                return
            self._create(self._pod(lws, i, 0, revision, None))
            return
        made = self._made.setdefault(leader.metadata.uid, set())
        missing = [j for j in range(1, size) if j not in group.workers]
        if policy == "RecreateGroupOnPodRestart" and any(
            f"{name}-{i}-{j}" in made for j in missing
        ):
            self._delete(group.pods())  # LWS deletes the leader; the group is made anew
            return
        startup = lws["spec"].get("startupPolicy", "LeaderCreated")
        if missing and startup == "LeaderReady" and not _ready(leader):
            return
        for j in missing:
            self._create(self._pod(lws, i, j, revision, leader))
            made.add(f"{name}-{i}-{j}")

    def _pod(
        self,
        lws: dict[str, Any],
        i: int,
        j: int,
        revision: str,
        leader: client.V1Pod | None,
    ) -> dict[str, Any]:
        meta, spec = lws["metadata"], lws["spec"]["leaderWorkerTemplate"]
        which = "leaderTemplate" if j == 0 and spec.get("leaderTemplate") else "workerTemplate"
        template = copy.deepcopy(spec[which])
        pod_meta = template.get("metadata") or {}
        labels = dict(pod_meta.get("labels") or {})
        annotations = dict(pod_meta.get("annotations") or {})
        group_name = f"{meta['name']}-{i}"
        labels.update({
            SET_NAME: meta["name"],
            GROUP_INDEX: str(i),
            WORKER_INDEX: str(j),
            GROUP_KEY: _hash(f"{self.namespace}/{group_name}"),
            REVISION: revision,
        })  # fmt: skip
        annotations[SIZE] = str(spec.get("size", 1))
        if leader is None:
            owner = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "LeaderWorkerSet",
                     "name": meta["name"], "uid": meta["uid"]}  # fmt: skip
            name = group_name
        else:
            owner = {"apiVersion": "v1", "kind": "Pod", "name": leader.metadata.name,
                     "uid": leader.metadata.uid}  # fmt: skip
            annotations[LEADER_NAME] = group_name
            name = f"{group_name}-{j}"
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels, "annotations": annotations,
                         "ownerReferences": [{**owner, "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": template["spec"],
        }  # fmt: skip

    def _create(self, pod: dict[str, Any]) -> None:
        try:
            self.core.create_namespaced_pod(self.namespace, pod)
        except client.ApiException as err:
            if err.status != 409:  # made already (the list was older)
                raise

    def _delete(self, pods: list[client.V1Pod]) -> None:
        for pod in pods:
            if pod.metadata.deletion_timestamp:
                continue
            try:
                self.core.delete_namespaced_pod(pod.metadata.name, self.namespace)
            except client.ApiException as err:
                if err.status != 404:
                    raise

    def _write_status(
        self, lws: dict[str, Any], groups: dict[int, _Group], replicas: int, size: int, rev: str
    ) -> None:
        def complete(group: _Group) -> list[client.V1Pod]:
            pods = group.pods()
            return pods if len(pods) == size else []

        present = sum(1 for g in groups.values() if g.leader)  # as the leader StatefulSet's
        ready = [i for i, g in groups.items() if (p := complete(g)) and all(_ready(x) for x in p)]
        updated = [
            i for i, g in groups.items()
            if (p := complete(g)) and all((x.metadata.labels or {}).get(REVISION) == rev for x in p)
        ]  # fmt: skip
        in_range = range(replicas)
        available = all(i in ready and i in updated for i in in_range)
        old = lws.get("status") or {}
        previous = {c["type"]: c for c in old.get("conditions") or []}
        wanted = {
            "Available": ("True" if available else "False", "AllGroupsReady",
                          "All replicas are ready"),
            "Progressing": ("False" if available else "True", "GroupsProgressing",
                            "Replicas are progressing"),
        }  # fmt: skip
        conditions = []
        for kind, (status, reason, message) in wanted.items():
            before = previous.get(kind) or {}
            since = before.get("lastTransitionTime") if before.get("status") == status else None
            conditions.append({"type": kind, "status": status, "reason": reason,
                               "message": message, "lastTransitionTime": since or _now()})  # fmt: skip
        status = {
            "replicas": present,
            "readyReplicas": len(ready),
            "updatedReplicas": len(updated),
            "hpaPodSelector": f"{SET_NAME}={lws['metadata']['name']},{WORKER_INDEX}=0",
            "conditions": conditions,
        }
        if _comparable(old) == _comparable(status):
            return
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, self.namespace, PLURAL, lws["metadata"]["name"], {"status": status}
        )


def _comparable(status: dict[str, Any]) -> dict[str, Any]:
    counts = {k: int(status.get(k) or 0) for k in ("replicas", "readyReplicas", "updatedReplicas")}
    conditions = sorted(
        (c["type"], c["status"], c["reason"]) for c in status.get("conditions") or []
    )
    return {**counts, "selector": status.get("hpaPodSelector"), "conditions": conditions}
