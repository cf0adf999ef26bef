"""Validation: queue names on Jobs and JobSets, Kueue's rules on its own objects."""

import copy

import pytest

from extender.core.jobframework import registry
from tests.fixtures import admission_review
from webhook.mutate import JOB
from webhook.validate import validate_job, validate_kueue, validate_parent

CREATE = "02-validate.job-CREATE-generateName.seed-job"
UPDATE = "06-validate.job-UPDATE-kubectl-patch-suspend-false"


def test_the_seed_job_is_allowed():
    request = admission_review(CREATE)["request"]
    assert validate_job(request, JOB) == {"uid": request["uid"], "allowed": True}


def test_queue_name_must_be_a_dns_label():
    request = admission_review(CREATE)["request"]
    request["object"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "User_Queue"
    response = validate_job(request, JOB)
    assert response["allowed"] is False
    assert response["status"] == {
        "code": 403,
        "reason": "Forbidden",
        "message": "metadata.labels[\"kueue.x-k8s.io/queue-name\"]: 'User_Queue' is not a valid "
        "LocalQueue name (a DNS-1123 label: lowercase letters, digits and '-', at "
        "most 63 characters)",
    }


def test_queue_name_cannot_change_while_running():
    request = admission_review(UPDATE)["request"]
    request["oldObject"]["spec"]["suspend"] = False
    request["object"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "other-queue"
    response = validate_job(request, JOB)
    assert response["allowed"] is False
    assert (
        "cannot change from 'user-queue' to 'other-queue' while the Job is running"
        in (response["status"]["message"])
    )


def test_queue_name_may_change_while_suspended():
    request = admission_review(UPDATE)["request"]
    assert request["oldObject"]["spec"]["suspend"] is True
    request["object"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "other-queue"
    assert validate_job(request, JOB)["allowed"] is True


PRIORITY = "kueue.x-k8s.io/priority-class"


@pytest.mark.parametrize(
    ("was", "now", "suspended", "refused"),
    [
        ("high", None, True, "WorkloadPriorityClass cannot be removed from a workload"),
        ("high", "", False, "WorkloadPriorityClass cannot be removed from a workload"),
        (None, "high", False, "'high': WorkloadPriorityClass cannot be added to a non-suspended"),
        (None, "high", True, None),
        ("low", "high", False, None),  # changed, not removed: Kueue updates the Workload's
        ("low", "high", True, None),
        (None, None, False, None),
    ],
)
def test_a_jobs_priority_class_label_on_update(was, now, suspended, refused):
    """Kueue's ValidateUpdateForWorkloadPriorityClassName (its e2e job_test.go refuses both)."""
    request = admission_review(UPDATE)["request"]
    for obj, value in ((request["oldObject"], was), (request["object"], now)):
        labels = obj["metadata"]["labels"]
        labels.pop(PRIORITY, None)
        if value is not None:
            labels[PRIORITY] = value
    request["oldObject"]["spec"]["suspend"] = suspended
    request["object"]["spec"]["suspend"] = suspended
    response = validate_job(request, JOB)
    if refused is None:
        assert response["allowed"] is True, response
    else:
        assert response["allowed"] is False
        assert response["status"]["code"] == 403
        message = response["status"]["message"]
        assert message.startswith("Job ")
        assert 'metadata.labels["kueue.x-k8s.io/priority-class"]: ' in message
        assert refused in message


def kueue_request(kind, obj, operation="CREATE", old=None):
    request = {
        "uid": "u-1",
        "operation": operation,
        "object": obj,
        "kind": {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": kind},
    }
    if old is not None:
        request["oldObject"] = old
    return request


CQ = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {"name": "cluster-queue"},
    "spec": {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "default-flavor",
                        "resources": [
                            {"name": "cpu", "nominalQuota": 4},
                            {"name": "memory", "nominalQuota": "8Gi"},
                        ],
                    }
                ],
            }
        ],
    },
}
LQ = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "LocalQueue",
    "metadata": {"name": "user-queue", "namespace": "default"},
    "spec": {"clusterQueue": "cluster-queue"},
}


def test_the_seed_cluster_queue_and_local_queue_are_allowed():
    assert validate_kueue(kueue_request("ClusterQueue", CQ), "ClusterQueue")["allowed"]
    assert validate_kueue(kueue_request("LocalQueue", LQ), "LocalQueue")["allowed"]


@pytest.mark.parametrize(
    ("mutate", "want"),
    [
        (
            lambda s: s["resourceGroups"][0]["flavors"][0]["resources"].reverse(),
            "spec.resourceGroups[0].flavors[0].resources: must list exactly the coveredResources",
        ),
        (
            lambda s: s["resourceGroups"][0]["flavors"][0]["resources"][0].update(nominalQuota=-1),
            "nominalQuota: must be greater than or equal to 0",
        ),
        (
            lambda s: s["resourceGroups"][0]["flavors"][0]["resources"][0].update(borrowingLimit=1),
            "borrowingLimit: must be null when there is no cohort",
        ),
        (
            lambda s: (
                s.update(cohortName="c")
                or s["resourceGroups"][0]["flavors"][0]["resources"][0].update(lendingLimit=5)
            ),
            "lendingLimit: must be less than or equal to nominalQuota",
        ),
    ],
    ids=[
        "resources out of coveredResources order",
        "negative quota",
        "borrowingLimit without cohort",
        "lendingLimit above nominal",
    ],
)
def test_cluster_queue_rules(mutate, want):
    cq = copy.deepcopy(CQ)
    mutate(cq["spec"])
    response = validate_kueue(kueue_request("ClusterQueue", cq), "ClusterQueue")
    assert response["allowed"] is False
    assert response["status"]["message"].startswith("ClusterQueue cluster-queue: spec.")
    assert want in response["status"]["message"]


def test_local_queue_cluster_queue_is_immutable():
    moved = copy.deepcopy(LQ)
    moved["spec"]["clusterQueue"] = "elsewhere"
    response = validate_kueue(kueue_request("LocalQueue", moved, "UPDATE", LQ), "LocalQueue")
    assert response["status"]["message"] == (
        "LocalQueue default/user-queue: spec.clusterQueue: field is immutable "
        "(was 'cluster-queue', got 'elsewhere')"
    )


def test_resource_flavor_limits():
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "gpu"},
        "spec": {"nodeTaints": [{"key": "gpu", "value": "true", "effect": "Maybe"}]},
    }
    response = validate_kueue(kueue_request("ResourceFlavor", flavor), "ResourceFlavor")
    assert (
        "spec.nodeTaints[0].effect: must be one of NoSchedule, PreferNoSchedule, NoExecute"
        in (response["status"]["message"])
    )


MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"
MAX_EXEC_PATH = 'metadata.labels["kueue.x-k8s.io/max-exec-time-seconds"]'


@pytest.mark.parametrize(
    ("value", "refused"),
    [
        ("600", None),
        ("0", "Invalid value: 0: should be greater than 0"),
        ("-5", "Invalid value: -5: should be greater than 0"),
        ("ten", 'Invalid value: "ten": strconv.Atoi: parsing "ten": invalid syntax'),
    ],
)
def test_a_jobs_max_exec_time_label_on_create(value, refused):
    """Kueue's validateCreateForMaxExecTime, with its messages."""
    request = admission_review(CREATE)["request"]
    request["object"]["metadata"]["labels"][MAX_EXEC] = value
    response = validate_job(request, JOB)
    if refused is None:
        assert response["allowed"] is True, response
        return
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert message.startswith("Job "), message
    assert message.endswith(f"{MAX_EXEC_PATH}: {refused}"), message


@pytest.mark.parametrize(
    ("was", "now", "suspended", "refused"),
    [
        ("60", "120", False, 'Invalid value: "120": field is immutable'),
        ("60", None, False, 'Invalid value: "": field is immutable'),
        (None, "60", False, 'Invalid value: "60": field is immutable'),
        ("60", "120", True, None),  # suspended: the Workload is made again with it
        ("60", "60", False, None),
        ("60", "0", True, "Invalid value: 0: should be greater than 0"),  # checked as on create
    ],
)
def test_a_jobs_max_exec_time_label_on_update(was, now, suspended, refused):
    """Kueue's validateUpdateForMaxExecTime: no change unless suspended before and after."""
    request = admission_review(UPDATE)["request"]
    for obj, value in ((request["oldObject"], was), (request["object"], now)):
        labels = obj["metadata"]["labels"]
        labels.pop(MAX_EXEC, None)
        if value is not None:
            labels[MAX_EXEC] = value
        obj["spec"]["suspend"] = suspended
    response = validate_job(request, JOB)
    if refused is None:
        assert response["allowed"] is True, response
        return
    assert response["allowed"] is False
    assert response["status"]["message"].endswith(f"{MAX_EXEC_PATH}: {refused}")


def test_a_job_with_no_queue_keeps_any_max_exec_time_label():
    """Kueue validates only the jobs it manages."""
    request = admission_review(CREATE)["request"]
    request["object"]["metadata"]["labels"].pop("kueue.x-k8s.io/queue-name")
    request["object"]["metadata"]["labels"][MAX_EXEC] = "0"
    assert validate_job(request, JOB)["allowed"] is True


GATED_BY = "kueue.x-k8s.io/admission-gated-by"
GATED_PATH = f"metadata.annotations[{GATED_BY}]"


@pytest.mark.parametrize(
    ("operation", "was", "now", "refused"),
    [
        ("CREATE", None, "example.com/a, example.com/b", None),
        (
            "CREATE",
            None,
            "example.com/a,example.com/a",
            f'{GATED_PATH}: Invalid value: "example.com/a,example.com/a": duplicate gate name: '
            "example.com/a",
        ),
        (
            "CREATE",
            None,
            "not-a-path",
            f'{GATED_PATH}: Invalid value: "not-a-path": must be a domain-prefixed path '
            '(such as "acme.io/foo")',
        ),
        ("UPDATE", "example.com/a,example.com/b", "example.com/b", None),
        ("UPDATE", "example.com/a", None, None),
        (
            "UPDATE",
            None,
            "example.com/a",
            f"{GATED_PATH}: Forbidden: cannot add admission gate after creation",
        ),
        (
            "UPDATE",
            "example.com/a",
            "example.com/a,example.com/b",
            f"{GATED_PATH}: Forbidden: can only remove gates, not add new ones",
        ),
    ],
    ids=[
        "two gates at creation",
        "a gate named twice",
        "a name that is no domain-prefixed path",
        "one gate taken off",
        "the annotation taken off",
        "a gate added after creation",
        "a gate added to the list",
    ],
)
def test_admission_gated_by_rules_are_kueues(operation, was, now, refused):
    """Kueue's ValidateAdmissionGatedByAnnotationOnCreate/OnUpdate, with its messages."""
    request = admission_review(CREATE if operation == "CREATE" else UPDATE)["request"]
    meta = request["object"]["metadata"]
    if now is not None:
        meta.setdefault("annotations", {})[GATED_BY] = now
    if operation == "UPDATE":
        old_meta = request["oldObject"]["metadata"]
        old_meta.setdefault("annotations", {}).pop(GATED_BY, None)
        if was is not None:
            old_meta["annotations"][GATED_BY] = was
    response = validate_job(request, JOB)
    if refused is None:
        assert response["allowed"] is True, response
    else:
        assert response["allowed"] is False
        name = meta.get("name") or "?"
        assert response["status"]["message"] == f"Job {meta['namespace']}/{name}: {refused}"


WORKLOAD = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Workload",
    "metadata": {"name": "w", "namespace": "default"},
    "spec": {
        "queueName": "user-queue",
        "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}],
    },
}


def _with_gates(obj, value):
    out = copy.deepcopy(obj)
    if value is not None:
        out["metadata"]["annotations"] = {GATED_BY: value}
    return out


@pytest.mark.parametrize(
    ("operation", "was", "now", "refused"),
    [
        ("CREATE", None, "example.com/a", None),
        ("CREATE", None, "example.com/a,", "cannot contain empty gate names"),
        ("UPDATE", "example.com/a,example.com/b", "example.com/a", None),
        ("UPDATE", "example.com/a", None, None),
        ("UPDATE", None, "example.com/a", "Forbidden: cannot add admission gate after creation"),
        (
            "UPDATE",
            "example.com/a",
            "example.com/c",
            "Forbidden: can only remove gates, not add new ones",
        ),
    ],
    ids=[
        "created gated",
        "created with an empty name",
        "one gate taken off",
        "the annotation taken off",
        "a gate added after creation",
        "a gate swapped",
    ],
)
def test_a_workloads_admission_gates_follow_kueues_rules(operation, was, now, refused):
    """Kueue's Workload webhook applies the same rules as the job webhooks."""
    old = _with_gates(WORKLOAD, was) if operation == "UPDATE" else None
    request = kueue_request("Workload", _with_gates(WORKLOAD, now), operation, old)
    response = validate_kueue(request, "Workload")
    if refused is None:
        assert response["allowed"] is True, response
    else:
        assert response["allowed"] is False
        message = response["status"]["message"]
        assert message.startswith(f"Workload default/w: {GATED_PATH}: ")
        assert message.endswith(refused)


@pytest.mark.parametrize("parent", ["deployment", "statefulset"])
def test_a_parents_admission_gates_follow_kueues_rules(parent):
    """Kueue's Deployment and StatefulSet webhooks check the annotation too."""
    kind = registry.PARENTS[parent]
    obj = {
        "apiVersion": "apps/v1",
        "kind": kind.kind,
        "metadata": {
            "name": "web",
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
            "annotations": {GATED_BY: "not a path"},
        },
        "spec": {},
    }
    request = {
        "uid": "u-1",
        "operation": "CREATE",
        "object": obj,
        "kind": {"group": "apps", "version": "v1", "kind": kind.kind},
    }
    response = validate_parent(request, kind)
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        f'{kind.kind} default/web: {GATED_PATH}: Invalid value: "not a path": must be a '
        'domain-prefixed path (such as "acme.io/foo")'
    )
    obj["metadata"]["annotations"][GATED_BY] = "example.com/a"
    assert validate_parent(request, kind)["allowed"] is True
