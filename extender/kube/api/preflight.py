"""Before the controller starts: who it is, whether Kueue's API is served, and whether it may
do its work — each missing piece is one line that says what to do, not a silent retry.

An API server that cannot be reached is waited for (it may be starting); a setup that can
never work as it is (no CRDs, missing permissions) raises SetupError.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from extender.kube.api.client import ApiError, KubeClient, KubeError
from extender.kube.api.lease import SetupError
from extender.kube.api.resources import (
    ADMISSION_CHECKS,
    CONFIG,
    JOBS,
    KUEUE_GROUP,
    KUEUE_VERSION,
    NODES,
    PODS,
    PROVISIONING_REQUEST_CONFIGS,
    WORKLOADS,
    Resource,
)
from extender.kube.api.workqueue import Backoff

log = logging.getLogger("tower.preflight")

SELF_SUBJECT_REVIEWS = Resource(
    "authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False
)
SELF_SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False
)
RBAC_FIX = "apply deploy/rbac/controller.yaml (or bind the ClusterRole tower-controller to it)"


@dataclass(frozen=True, slots=True)
class Setup:
    username: str | None  # None on a server without SelfSubjectReview (before 1.28)
    jobs: tuple[Resource, ...]  # the enabled kinds of job whose CRD is served


def needed(
    jobs: Sequence[Resource] = (JOBS,), placement: bool = True, watched: Sequence[Resource] = ()
) -> list[tuple[str, Resource, str]]:
    """(verb, resource, subresource) the controller cannot work without."""
    out = [(verb, r, "") for r in CONFIG for verb in ("list", "watch")]
    out += [(verb, WORKLOADS, "") for verb in ("list", "watch", "create", "delete", "patch")]
    if placement:  # physical fit: nodes, and the pods bound to them; the topology ungater
        out += [(verb, r, "") for r in (NODES, PODS) for verb in ("list", "watch")]
        out += [("patch", PODS, "")]
    out += [("patch", WORKLOADS, "status"), ("patch", ADMISSION_CHECKS, "status")]
    out += [(verb, PROVISIONING_REQUEST_CONFIGS, "") for verb in ("list", "watch")]
    for resource in jobs:
        out += [(verb, resource, "") for verb in ("list", "watch", "patch")]
    for resource in watched:  # read only: the kinds whose pods run as groups (StatefulSet)
        out += [(verb, resource, "") for verb in ("list", "watch")]
    return out


def preflight(
    client: KubeClient,
    stop: threading.Event,
    *,
    placement: bool = True,
    jobs: Sequence[Resource] = (JOBS,),
    watched: Sequence[Resource] = (),
) -> Setup | None:
    """The answers, once the API server answers; None if stopped first."""
    backoff = Backoff(base=0.5, cap=10.0)
    failures = 0
    while not stop.is_set():
        try:
            return _check(client, placement, jobs, watched)
        except SetupError:
            raise
        except KubeError as err:
            delay = backoff.delay(failures)
            failures += 1
            if failures == 1 or failures % 10 == 0:
                log.warning("cannot reach the API server yet: %s (retrying in %.1fs)", err, delay)
            stop.wait(delay)
    return None


def _check(
    client: KubeClient, placement: bool, jobs: Sequence[Resource], watched: Sequence[Resource] = ()
) -> Setup:
    served = client.served(f"{KUEUE_GROUP}/{KUEUE_VERSION}")
    if served is None:
        raise SetupError(
            f"Kueue's CRDs are not installed: the API server does not serve "
            f"{KUEUE_GROUP}/{KUEUE_VERSION}; apply them with kubectl apply -f deploy/crds/"
        )
    # A partial install would leave the watch of the missing kind retrying forever.
    kueue = [r for r in (*CONFIG, WORKLOADS) if r.group == KUEUE_GROUP]
    absent = [r.qualified for r in kueue if r.plural not in served]
    if absent:
        raise SetupError(
            "Kueue's CRDs are only partly installed: the API server does not serve "
            f"{', '.join(absent)}; apply them with kubectl apply -f deploy/crds/"
        )
    served_jobs = []
    for resource in jobs:
        plurals = client.served(resource.api_version)
        if plurals is not None and resource.plural in plurals:
            served_jobs.append(resource)
    username = whoami(client)
    if username is not None:
        log.info("running as %s", username)
    refused = [
        (verb, resource, sub)
        for verb, resource, sub in needed(served_jobs, placement, watched)
        if not allowed(client, verb, resource, sub)
    ]
    if refused:
        who = username or "this controller's identity"
        # Pods are watched for placement and, queued as jobs, in a view of their own: one
        # permission, named once.
        named = dict.fromkeys(f"{v} {r.qualified}" + (f"/{s}" if s else "") for v, r, s in refused)
        missing = ", ".join(named)
        fix = RBAC_FIX
        if all(r.qualified in ("nodes", "pods") for _, r, _ in refused):
            # An RBAC from before placement: say how to run without it, too.
            fix += ", or run without accelerator placement: --physical-resources=none"
            if any(r.qualified == "pods" for r in served_jobs):
                fix += " and without Kueue's pod integration (--integrations)"
        raise SetupError(f"{who} may not {missing}: {fix}")
    return Setup(username, tuple(served_jobs))


def whoami(client: KubeClient) -> str | None:
    """The username the API server knows this client by (SelfSubjectReview)."""
    try:
        answer = client.create(
            SELF_SUBJECT_REVIEWS,
            {"apiVersion": SELF_SUBJECT_REVIEWS.api_version, "kind": SELF_SUBJECT_REVIEWS.kind},
        )
    except ApiError as err:
        if err.not_found or err.forbidden:
            return None
        raise
    user = ((answer.get("status") or {}).get("userInfo") or {}).get("username")
    return str(user) if user else None


def allowed(client: KubeClient, verb: str, resource: Resource, subresource: str = "") -> bool:
    """SelfSubjectAccessReview for one cluster-wide verb (unknown answers count as allowed:
    the requests themselves will say)."""
    body = {
        "apiVersion": SELF_SUBJECT_ACCESS_REVIEWS.api_version,
        "kind": SELF_SUBJECT_ACCESS_REVIEWS.kind,
        "spec": {
            "resourceAttributes": {
                "group": resource.group,
                "resource": resource.plural,
                "subresource": subresource,
                "verb": verb,
            }
        },
    }
    try:
        answer = client.create(SELF_SUBJECT_ACCESS_REVIEWS, body)
    except ApiError as err:
        if err.not_found or err.forbidden:
            return True
        raise
    return bool((answer.get("status") or {}).get("allowed", True))
