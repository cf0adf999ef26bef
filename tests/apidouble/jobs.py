"""The Job controller's part the double needs: Suspended/JobResumed, start, finish.

As kube-controller-manager does (shared/fixtures/real-apiserver/lifecycle/): a suspended Job
gets Suspended=True/JobSuspended; unsuspended it gets startTime, `active` and
Suspended=False/JobResumed; re-suspended it drops `active` but keeps startTime; finished it
gets SuccessCriteriaMet then Complete (CompletionsReached) and completionTime. There are no
pods: a Job "runs" for the duration in its `tower.dev/sim-duration` annotation (no
annotation: it runs until stopped), and `tower.dev/sim-fail: "true"` makes it fail. A Job whose
spec.managedBy names another controller is left alone, as kube-controller-manager leaves it.
"""

from __future__ import annotations

import queue
import threading
import time

from tests.apidouble.server import ApiDouble
from tests.apidouble.store import Kind, Obj, now_rfc3339

DURATION = "tower.dev/sim-duration"
FAIL = "tower.dev/sim-fail"


def _seconds(text: str) -> float:
    text = text.strip()
    for suffix, scale in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix) and text[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(text[: -len(suffix)]) * scale
    return float(text)


def _condition(kind: str, status: str, reason: str, message: str) -> Obj:
    stamp = now_rfc3339()
    return {
        "type": kind,
        "status": status,
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": message,
    }


def _set(conditions: list[Obj], new: Obj) -> None:
    for i, old in enumerate(conditions):
        if old["type"] == new["type"]:
            if (old["status"], old["reason"]) != (new["status"], new["reason"]):
                conditions[i] = new
            return
    conditions.append(new)


JOB_CONTROLLER = "kubernetes.io/job-controller"  # spec.managedBy of the built-in controller


class JobRunner:
    """Reacts to Job commits in its own thread (never inside the store's lock)."""

    def __init__(self, api: ApiDouble) -> None:
        self.api = api
        self._work: queue.Queue[tuple[str, str] | None] = queue.Queue()
        self._timers: dict[tuple[str, str], threading.Timer] = {}
        api.hooks.append(self._on_commit)
        self._thread = threading.Thread(target=self._run, daemon=True, name="job-runner")
        self._thread.start()

    def stop(self) -> None:
        self._work.put(None)
        for timer in self._timers.values():
            timer.cancel()

    def _on_commit(self, event: str, kind: Kind, obj: Obj) -> None:
        if kind.plural == "jobs" and kind.group == "batch" and event != "DELETED":
            self._work.put((obj["metadata"]["namespace"], obj["metadata"]["name"]))

    def _run(self) -> None:
        while (item := self._work.get()) is not None:
            self._reconcile(*item)

    def _reconcile(self, namespace: str, name: str) -> None:
        job = self.api.get("jobs", name, namespace)
        if job is None:
            return
        if job["spec"].get("managedBy", JOB_CONTROLLER) != JOB_CONTROLLER:
            return  # another controller runs it (JobManagedBy, on by default in v1.32)
        status = job.get("status") or {}
        if any(
            c["type"] in ("Complete", "Failed") and c["status"] == "True"
            for c in status.get("conditions") or []
        ):
            return
        suspended = bool(job["spec"].get("suspend"))
        key = (namespace, name)
        if suspended:
            timer = self._timers.pop(key, None)
            if timer:
                timer.cancel()
            conditions = status.get("conditions") or []
            current = next((c for c in conditions if c["type"] == "Suspended"), None)
            if current is None or current["status"] != "True" or status.get("active"):

                def suspend(st: Obj) -> None:
                    st.pop("active", None)
                    st.setdefault("ready", 0)
                    st.setdefault("terminating", 0)
                    st.setdefault("uncountedTerminatedPods", {})
                    conditions = st.setdefault("conditions", [])
                    _set(
                        conditions, _condition("Suspended", "True", "JobSuspended", "Job suspended")
                    )

                self.api.update_status("jobs", namespace, name, suspend)
            return
        if key in self._timers:
            return
        if not status.get("active"):
            parallelism = int(job["spec"].get("parallelism") or 1)

            def resume(st: Obj) -> None:
                st["active"] = parallelism
                st.setdefault("startTime", now_rfc3339())
                st.setdefault("ready", 0)
                st.setdefault("terminating", 0)
                st.setdefault("uncountedTerminatedPods", {})
                conditions = st.setdefault("conditions", [])
                if any(c["type"] == "Suspended" for c in conditions):
                    _set(conditions, _condition("Suspended", "False", "JobResumed", "Job resumed"))

            self.api.update_status("jobs", namespace, name, resume)
        annotations = job["metadata"].get("annotations") or {}
        if DURATION in annotations:
            timer = threading.Timer(
                _seconds(annotations[DURATION]),
                self._finish,
                args=(namespace, name, annotations.get(FAIL) == "true"),
            )
            timer.daemon = True
            self._timers[key] = timer
            timer.start()

    def _finish(self, namespace: str, name: str, fail: bool) -> None:
        self._timers.pop((namespace, name), None)
        job = self.api.get("jobs", name, namespace)
        if job is None or job["spec"].get("suspend"):
            return
        completions = int(job["spec"].get("completions") or 1)

        def finish(st: Obj) -> None:
            st.pop("active", None)
            conditions = st.setdefault("conditions", [])
            if fail:
                st["failed"] = 1
                _set(
                    conditions,
                    _condition(
                        "FailureTarget",
                        "True",
                        "BackoffLimitExceeded",
                        "Job has reached the specified backoff limit",
                    ),
                )
                _set(
                    conditions,
                    _condition(
                        "Failed",
                        "True",
                        "BackoffLimitExceeded",
                        "Job has reached the specified backoff limit",
                    ),
                )
            else:
                st["succeeded"] = completions
                st["completionTime"] = now_rfc3339()
                _set(
                    conditions,
                    _condition(
                        "SuccessCriteriaMet",
                        "True",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                    ),
                )
                _set(
                    conditions,
                    _condition(
                        "Complete",
                        "True",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                    ),
                )

        self.api.update_status("jobs", namespace, name, finish)
        time.sleep(0)
