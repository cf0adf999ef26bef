"""Access to shared/fixtures/real-apiserver: what a real kube-apiserver v1.32 sent and answered."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = next(
    (
        p
        for p in (
            ROOT.parent / "shared" / "fixtures" / "real-apiserver",
            ROOT / "tests" / "data" / "real-apiserver",
        )
        if p.is_dir()
    ),
    ROOT.parent / "shared" / "fixtures" / "real-apiserver",
)


def load(relative: str) -> dict[str, Any]:
    """A fixture file as JSON."""
    return json.loads((FIXTURES / relative).read_text())


def admission_review(name: str) -> dict[str, Any]:
    """The AdmissionReview body kube-apiserver sent, from admission/<name>.json (a copy)."""
    return copy.deepcopy(load(f"admission/{name}.json")["request"]["body"])


def as_jobset(review: dict[str, Any]) -> dict[str, Any]:
    """The same review for a jobset.x-k8s.io/v1alpha2 JobSet of the same shape."""
    out = copy.deepcopy(review)
    request = out["request"]
    gvk = {"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"}
    request["kind"] = request["requestKind"] = gvk
    request["resource"] = request["requestResource"] = {
        "group": "jobset.x-k8s.io",
        "version": "v1alpha2",
        "resource": "jobsets",
    }
    for key in ("object", "oldObject"):
        job = request.get(key)
        if job:
            template = job["spec"]["template"]
            job["apiVersion"], job["kind"] = "jobset.x-k8s.io/v1alpha2", "JobSet"
            job["spec"] = {
                "suspend": job["spec"].get("suspend"),
                "replicatedJobs": [
                    {
                        "name": "workers",
                        "replicas": 1,
                        "template": {"spec": {"parallelism": 1, "template": template}},
                    }
                ],
            }
    return out


def as_pod(review: dict[str, Any]) -> dict[str, Any]:
    """The same review for a plain pod of the Job's template, labelled for the Job's queue
    (what kube-apiserver sends for `kubectl create` of such a pod: its spec defaulted as the
    template's is)."""
    out = copy.deepcopy(review)
    request = out["request"]
    gvk = {"group": "", "version": "v1", "kind": "Pod"}
    request["kind"] = request["requestKind"] = gvk
    request["resource"] = request["requestResource"] = {
        "group": "",
        "version": "v1",
        "resource": "pods",
    }
    for key in ("object", "oldObject"):
        job = request.get(key)
        if job:
            template = job["spec"]["template"]
            meta = {k: v for k, v in job["metadata"].items() if k != "annotations"}
            labels = {
                **(template.get("metadata") or {}).get("labels", {}),
                **meta.get("labels", {}),
            }
            request[key] = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {**meta, "labels": labels},
                "spec": template["spec"],
                "status": {"phase": "Pending", "qosClass": "Burstable"},
            }
    return out
