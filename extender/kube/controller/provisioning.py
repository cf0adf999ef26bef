"""Tower's `kueue.x-k8s.io/provisioning-request` admission check controller: ProvisioningRequests
made for reserved Workloads, and their conditions turned into the check's state.

Keys are ("check", name) for an AdmissionCheck of this controller (its Active condition) and
("workload", key) for a Workload with such a check. For a Workload with quota reserved and
the check Pending it creates the PodTemplates, then the ProvisioningRequest of the next
attempt, owned by the Workload (the templates pass to the request), and deletes requests of
earlier attempts; the request's conditions set the check's state (extender/core/
provisioning.py); a finished or evicted Workload's requests are deleted. It acts only while
the API server serves autoscaling.x-k8s.io/v1 ProvisioningRequests, and says so on each of
its AdmissionChecks otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from extender.core.admission import checks
from extender.core.admission import provisioning as policy
from extender.core.admission.checks import check_states
from extender.core.api.parse import ManifestError, admission_check
from extender.core.jobframework.adapter import as_mapping, as_sequence
from extender.kube.api import objects as o
from extender.kube.api.cache import request_owners
from extender.kube.api.client import ApiError
from extender.kube.api.resources import (
    ADMISSION_CHECKS,
    POD_TEMPLATES,
    PROVISIONING_REQUEST_CONFIGS,
    PROVISIONING_REQUESTS,
    WORKLOADS,
    Resource,
)
from extender.kube.controller.active import set_active
from extender.kube.controller.context import Context, Ref
from extender.kube.controller.workload_status import write_status

log = logging.getLogger("tower.provisioning")

Obj = dict[str, Any]
NOT_SERVED = (
    "the API server does not serve autoscaling.x-k8s.io/v1 ProvisioningRequests: install "
    "cluster-autoscaler's ProvisioningRequest CRD (Tower takes it up without a restart)"
)


class ProvisioningController:
    """The ProvisioningRequest admission check, for one term."""

    def __init__(self, ctx: Context, served: Any) -> None:
        self.ctx = ctx
        self.served = served  # () -> whether ProvisioningRequests are served (and watched)
        self.requests = RequestWriter(ctx)

    # ----- what to look at ---------------------------------------------------------------

    def ours(self, name: str) -> bool:
        obj = self.ctx.store.get(ADMISSION_CHECKS, name)
        spec = as_mapping(as_mapping(obj).get("spec"))
        return spec.get("controllerName") == policy.CONTROLLER

    def workloads_with(self, names: set[str]) -> list[str]:
        """The Workloads whose status lists one of these checks."""
        store = self.ctx.store
        return [
            key
            for key, obj in store.items(WORKLOADS)
            if isinstance(obj, dict) and names & {c.name for c in check_states(obj)}
        ]

    def checks_using(self, config: str) -> list[str]:
        out = []
        for name, obj in self.ctx.store.items(ADMISSION_CHECKS):
            params = as_mapping(as_mapping(as_mapping(obj).get("spec")).get("parameters"))
            if self.ours(name) and params.get("name") == config:
                out.append(name)
        return out

    def handlers(self) -> list[tuple[Resource, Callable[[str, Any, Any], None]]]:
        """What its watches enqueue: a check changed (and its Workloads), a config changed
        (its checks), a request changed (its Workload)."""
        queue = self.ctx.queues.checks

        def on_check(key: str, old: Any, new: Any) -> None:
            queue.add(("check", key))
            for wl_key in self.workloads_with({key}):
                queue.add(("workload", wl_key))

        def on_config(key: str, old: Any, new: Any) -> None:
            for name in self.checks_using(key):
                on_check(name, None, None)

        def on_request(key: str, old: Any, new: Any) -> None:
            for obj in (old, new):
                for wl_key in request_owners(obj):
                    queue.add(("workload", wl_key))

        return [
            (ADMISSION_CHECKS, on_check),
            (PROVISIONING_REQUEST_CONFIGS, on_config),
            (PROVISIONING_REQUESTS, on_request),
        ]

    def workload_changed(self, key: str, old: Any, new: Any) -> None:
        """A Workload with admission checks is looked at (one without costs nothing)."""
        for obj in (old, new):
            if isinstance(obj, dict) and (obj.get("status") or {}).get("admissionChecks"):
                self.ctx.queues.checks.add(("workload", key))
                return

    # ----- reconcile ---------------------------------------------------------------------

    def reconcile(self, ref: Ref) -> float | None:
        kind, key = ref
        if kind == "check":
            self._check(key)
        elif kind == "workload":
            self._workload(key)
        return None

    def _config(self, name: str) -> tuple[policy.ProvisioningConfig | None, str]:
        """The ProvisioningRequestConfig an AdmissionCheck of ours names, or why none."""
        obj = self.ctx.store.get(ADMISSION_CHECKS, name)
        if obj is None:
            return None, f"AdmissionCheck {name} does not exist"
        try:
            check = admission_check(obj)
        except ManifestError as err:
            return None, f"{err.path}: {err.message}"
        error = policy.parameters_ref_error(check.parameters)
        if error is not None:
            return None, error
        assert check.parameters is not None
        config_name = check.parameters[2]
        config = self.ctx.store.get(PROVISIONING_REQUEST_CONFIGS, config_name)
        if config is None:
            return None, f'provisioningrequestconfigs.kueue.x-k8s.io "{config_name}" not found'
        try:
            return policy.parse_config(config), ""
        except ManifestError as err:
            return None, f"ProvisioningRequestConfig {config_name}: {err.path}: {err.message}"

    def _check(self, name: str) -> None:
        """The Active condition of an AdmissionCheck of ours: whether its config resolves
        (Kueue's reasons), and whether ProvisioningRequests can be made at all."""
        ctx = self.ctx
        obj = ctx.store.get(ADMISSION_CHECKS, name)
        if obj is None or not self.ours(name):
            return
        if not self.served():
            want = ("False", "ProvisioningRequestsNotServed", NOT_SERVED)
        else:
            config, why = self._config(name)
            want = (
                ("True", "Active", policy.ACTIVE_MESSAGE)
                if config is not None
                else ("False", "BadParametersRef", why)
            )
        set_active(ctx, ADMISSION_CHECKS, name, obj, *want)

    def _workload(self, key: str) -> None:
        ctx = self.ctx
        if not self.served():
            return
        obj = ctx.store.get(WORKLOADS, key)
        owned = ctx.store.by_index(PROVISIONING_REQUESTS, "owner", key)
        if not isinstance(obj, dict) or o.is_true(obj, o.FINISHED) or o.is_true(obj, o.EVICTED):
            for request in owned:
                self.requests.delete(PROVISIONING_REQUESTS, request)
            return
        if not o.is_true(obj, o.QUOTA_RESERVED):
            return
        namespace, name = key.split("/", 1)
        states = check_states(obj)
        mine = [c for c in states if self.ours(c.name)]
        if not mine:
            return
        keep: set[str] = set()
        changed: dict[str, checks.CheckState] = {}
        for state in mine:
            config, _ = self._config(state.name)
            if config is None:
                inactive = replace(state, state=checks.PENDING, message=policy.NOT_ACTIVE)
                if inactive != state:
                    changed[state.name] = inactive
                continue
            requested = self._requested(obj, config)
            if not requested:
                if state.state != checks.READY:
                    changed[state.name] = replace(
                        state, state=checks.READY, message=policy.NOT_NEEDED, pod_set_updates=()
                    )
                continue
            last, attempt = self._last(owned, name, state.name, config)
            new = state
            if last is not None:
                keep.add(f"{namespace}/{last['metadata']['name']}")
                new = self._new_state(obj, state, last, attempt, config, requested)
                if new != state:
                    changed[state.name] = new
            # As Kueue: the states first, then a request for a check still Pending whose
            # last request failed (or expired before admission), or that has none.
            create = new.state == checks.PENDING and (
                last is None
                or _true(last, "Failed")
                or (_true(last, "BookingExpired") and not o.is_true(obj, o.ADMITTED))
            )
            if create:
                attempt = state.retry_count + 1 if last is None else attempt + 1
                try:
                    made = self.requests.create(obj, state.name, attempt, config, requested)
                except ManifestError as err:  # the pods' template and a flavor disagree
                    why = f"Error creating PodTemplate: {err.path}: {err.message}"
                    if self.ctx.told.first(f"provreq:{key}", why):
                        self.ctx.story(key, "Warning", "FailedCreate", why)
                    if new.message != why:
                        changed[state.name] = replace(new, message=why)
                    continue
                keep.add(f"{namespace}/{made}")
        for request in owned:
            if request not in keep:
                self.requests.delete(PROVISIONING_REQUESTS, request)
        if changed:
            self._write_states(key, obj, states, changed)

    def _new_state(
        self,
        obj: Obj,
        state: checks.CheckState,
        request: Obj,
        attempt: int,
        config: policy.ProvisioningConfig,
        requested: list[policy.RequestedPodSet],
    ) -> checks.CheckState:
        change = policy.check_state(
            state,
            request,
            attempt,
            config,
            admitted=o.is_true(obj, o.ADMITTED),
            active=(obj.get("spec") or {}).get("active") is not False,
            requested=requested,
        )
        if change is None:
            return state
        return replace(
            state,
            state=change.state,
            message=change.message,
            requeue_after=state.requeue_after
            if change.requeue_after is None
            else change.requeue_after,
            pod_set_updates=state.pod_set_updates
            if change.pod_set_updates is None
            else change.pod_set_updates,
        )

    def _requested(
        self, obj: Obj, config: policy.ProvisioningConfig
    ) -> list[policy.RequestedPodSet]:
        admission = o.admission_of(obj)
        counts = (
            {psa.name: psa.count for psa in admission.pod_set_assignments}
            if admission is not None
            else {}
        )
        pod_sets = [as_mapping(p) for p in as_sequence(as_mapping(obj.get("spec")).get("podSets"))]
        return policy.requested_pod_sets(pod_sets, counts, config)

    def _last(
        self, owned: list[str], workload: str, check: str, config: policy.ProvisioningConfig
    ) -> tuple[Obj | None, int]:
        """The check's request of the highest attempt still in step with its config."""
        best: tuple[Obj | None, int] = (None, 0)
        for key in owned:
            request = self.ctx.store.get(PROVISIONING_REQUESTS, key)
            if not isinstance(request, dict):
                continue
            attempt = policy.attempt_of(request["metadata"]["name"], workload, check)
            if attempt is None or not policy.synced_with(config, request):
                continue
            if attempt > best[1]:
                best = (request, attempt)
        return best

    def _write_states(
        self,
        key: str,
        obj: Obj,
        states: list[checks.CheckState],
        changed: dict[str, checks.CheckState],
    ) -> None:
        ctx = self.ctx
        now = ctx.clock()
        out = []
        for state in states:
            new = changed.get(state.name)
            if new is None:
                out.append(state)
                continue
            if new.state != state.state:
                new = replace(new, last_transition=now)
                suffix = f" with message: {new.message}" if new.message else ""
                ctx.story(
                    key,
                    "Normal",
                    "AdmissionCheckUpdated",
                    f"Admission check {state.name} updated state from {state.state} to "
                    f"{new.state}{suffix}",
                )
            out.append(new)
        patch = {"status": {"admissionChecks": o.checks_status(out)}}
        if write_status(ctx, key, o.conditional(patch, obj), "admission-checks") is not None:
            ctx.queues.workloads.add(key)


class RequestWriter:
    """Writes a check's ProvisioningRequests and their PodTemplates, and deletes them."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def create(
        self,
        obj: Obj,
        check: str,
        attempt: int,
        config: policy.ProvisioningConfig,
        requested: list[policy.RequestedPodSet],
    ) -> str:
        """PodTemplates owned by the Workload, then the ProvisioningRequest, which then owns
        them (they go with it). The Workload is read whole: the cache keeps its pod templates
        trimmed to what scheduling reads."""
        ctx = self.ctx
        meta = obj["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        full = ctx.client.get(WORKLOADS, name, namespace)
        templates = {
            str(p.get("name")): as_mapping(p.get("template"))
            for p in map(as_mapping, as_sequence(as_mapping(full.get("spec")).get("podSets")))
        }
        admission = o.admission_of(obj)
        flavors = ctx.state.resource_flavors()
        request_name = policy.request_name(name, check, attempt)
        owner = {
            "apiVersion": WORKLOADS.api_version,
            "kind": WORKLOADS.kind,
            "name": name,
            "uid": meta.get("uid", ""),
            "controller": True,
            "blockOwnerDeletion": True,
        }
        pod_sets = []
        made: list[str] = []
        for pod_set in requested:
            labels: dict[str, str] = {}
            tolerations: list[Obj] = []
            for psa in admission.pod_set_assignments if admission is not None else ():
                if psa.name != pod_set.name:
                    continue
                for flavor_name in dict.fromkeys(psa.flavors.values()):
                    flavor = flavors.get(flavor_name)
                    if flavor is None:
                        continue
                    labels.update(flavor.node_labels)
                    tolerations += [o.toleration_dict(t) for t in flavor.tolerations]
            template_name = policy.template_name(request_name, pod_set.name)
            body = {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {
                    "name": template_name,
                    "namespace": namespace,
                    "labels": {policy.MANAGED_LABEL: "true"},
                    "ownerReferences": [owner],
                },
                "template": policy.template_for(
                    templates.get(pod_set.name) or pod_set.template, labels, tolerations
                ),
            }
            self._create_object(POD_TEMPLATES, body, namespace)
            made.append(template_name)
            pod_sets.append({"podTemplateRef": {"name": template_name}, "count": pod_set.count})
        request = {
            "apiVersion": PROVISIONING_REQUESTS.api_version,
            "kind": PROVISIONING_REQUESTS.kind,
            "metadata": {
                "name": request_name,
                "namespace": namespace,
                "labels": {policy.MANAGED_LABEL: "true"},
                "ownerReferences": [owner],
            },
            "spec": {
                "provisioningClassName": config.class_name,
                "parameters": policy.effective_parameters(
                    config, as_mapping(meta.get("annotations"))
                ),
                "podSets": pod_sets,
            },
        }
        answer = self._create_object(PROVISIONING_REQUESTS, request, namespace)
        ctx.store.record(PROVISIONING_REQUESTS, answer)
        by_request = {
            "apiVersion": PROVISIONING_REQUESTS.api_version,
            "kind": PROVISIONING_REQUESTS.kind,
            "name": request_name,
            "uid": as_mapping(answer.get("metadata")).get("uid", ""),
            "controller": True,
            "blockOwnerDeletion": True,
        }
        owned_by_request = {"metadata": {"ownerReferences": [by_request]}}
        for template_name in made:
            self._patch_template(template_name, namespace, owned_by_request)
        log.info("ProvisioningRequest %s/%s created for %s", namespace, request_name, check)
        ctx.story(
            f"{namespace}/{name}",
            "Normal",
            "ProvisioningRequestCreated",
            f'Created ProvisioningRequest: "{request_name}"',
        )
        return request_name

    def _patch_template(self, name: str, namespace: str, patch: Obj) -> None:
        ctx = self.ctx
        ctx.write(
            POD_TEMPLATES, "patch", lambda: ctx.client.patch(POD_TEMPLATES, name, patch, namespace)
        )

    def _create_object(self, resource: Resource, body: Obj, namespace: str) -> Obj:
        """Create, or take the one an earlier try made: a PodTemplate as it was meant (its
        name says what it holds), a request as the watch has it (not there yet: raised, and
        the reconcile is retried)."""
        ctx = self.ctx
        try:
            return ctx.write(
                resource, "create", lambda: ctx.client.create(resource, body, namespace)
            )
        except ApiError as err:
            if not err.already_exists:
                raise
            if resource is POD_TEMPLATES:
                return body
            known = ctx.store.get(resource, f"{namespace}/{body['metadata']['name']}")
            if not isinstance(known, dict):
                raise
            return known

    def delete(self, resource: Resource, key: str) -> None:
        ctx = self.ctx
        namespace, name = key.split("/", 1)
        try:
            ctx.write(resource, "delete", lambda: ctx.client.delete(resource, name, namespace))
        except ApiError as err:
            if not err.not_found:
                raise
        ctx.store.forget(resource, key)


def _true(obj: Obj, kind: str) -> bool:
    return o.is_true(obj, kind)
