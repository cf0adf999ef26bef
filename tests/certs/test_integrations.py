"""The webhook configurations have four webhooks for each kind of job of the integrations
asked for (Kueue's default set unless told), from the registry: named after the kind, at
Kueue's paths, with rules from the adapter's group, version and plural."""

from __future__ import annotations

import json

import pytest

from certs import kube
from certs.__main__ import main
from extender.core.jobframework import registry
from tests import yamlc
from tests.certs.test_kube import BASE, FakeAPI, api  # noqa: F401 (a fixture)
from tests.webhook import toy

URL = "https://127.0.0.1:9443"
toys = toy.toys  # the fixture
KUEUE_WEBHOOKS = {
    f"v{kind}.tower.dev"
    for kind in ("clusterqueue", "localqueue", "resourceflavor", "cohort", "workloadpriorityclass")
}


def job_webhooks(short, group, version, plural, path):
    """(name, path, apiGroups, apiVersions, resources, operations, failurePolicy) of a kind's
    four webhooks, mutating then validating."""
    rule = ([group], [version], [plural])
    return (
        [
            (f"m{short}-create.tower.dev", f"/mutate-{path}", *rule, ["CREATE"], "Fail"),
            (f"m{short}-update.tower.dev", f"/mutate-{path}", *rule, ["UPDATE"], "Ignore"),
            (f"m{short}-default-queue.tower.dev", f"/mutate-{path}", *rule, ["CREATE"], "Fail"),
        ],
        [(f"v{short}.tower.dev", f"/validate-{path}", *rule, ["CREATE", "UPDATE"], "Ignore")],
    )


def parent_webhooks(kind: str, group: str, version: str, plural: str) -> tuple[list, list]:
    """A kind whose pods Tower queues (a Deployment): its template marked on create and update,
    also in namespaces queued by default; only updates validated, failing open."""
    path = f"{group.replace('.', '-')}-{version}-{kind}"
    rule = ([group], [version], [plural])
    return (
        [
            (f"m{kind}.tower.dev", f"/mutate-{path}", *rule, ["CREATE", "UPDATE"], "Fail"),
            (f"m{kind}-default-queue.tower.dev", f"/mutate-{path}", *rule, ["CREATE"], "Fail"),
        ],
        [(f"v{kind}.tower.dev", f"/validate-{path}", *rule, ["CREATE", "UPDATE"], "Ignore")],
    )


KINDS = {
    "batch/job": job_webhooks("job", "batch", "v1", "jobs", "batch-v1-job"),
    "jobset.x-k8s.io/jobset": job_webhooks(
        "jobset", "jobset.x-k8s.io", "v1alpha2", "jobsets", "jobset-x-k8s-io-v1alpha2-jobset"
    ),
    "kubeflow.org/mpijob": job_webhooks(
        "mpijob", "kubeflow.org", "v2beta1", "mpijobs", "kubeflow-org-v2beta1-mpijob"
    ),
    "kubeflow.org/pytorchjob": job_webhooks(
        "pytorchjob", "kubeflow.org", "v1", "pytorchjobs", "kubeflow-org-v1-pytorchjob"
    ),
    "ray.io/rayjob": job_webhooks("rayjob", "ray.io", "v1", "rayjobs", "ray-io-v1-rayjob"),
    "ray.io/raycluster": job_webhooks(
        "raycluster", "ray.io", "v1", "rayclusters", "ray-io-v1-raycluster"
    ),
    "ray.io/rayservice": job_webhooks(
        "rayservice", "ray.io", "v1", "rayservices", "ray-io-v1-rayservice"
    ),
    "workload.codeflare.dev/appwrapper": job_webhooks(
        "appwrapper",
        "workload.codeflare.dev",
        "v1beta2",
        "appwrappers",
        "workload-codeflare-dev-v1beta2-appwrapper",
    ),
    "trainer.kubeflow.org/trainjob": job_webhooks(
        "trainjob",
        "trainer.kubeflow.org",
        "v1alpha1",
        "trainjobs",
        "trainer-kubeflow-org-v1alpha1-trainjob",
    ),
    "pod": job_webhooks("pod", "", "v1", "pods", "-v1-pod"),
    "example.com/toyjob": job_webhooks(
        "toyjob", "example.com", "v1", "toyjobs", "example-com-v1-toyjob"
    ),
    "example.com/deeptoyjob": job_webhooks(
        "deeptoyjob", "example.com", "v2beta1", "deeptoyjobs", "example-com-v2beta1-deeptoyjob"
    ),
    "example.com/toypod": job_webhooks("toypod", "", "v1", "toypods", "-v1-toypod"),
    # Last, as the configurations list them. A parent's template is marked on create and
    # update; only updates are validated.
    "deployment": parent_webhooks("deployment", "apps", "v1", "deployments"),
    "statefulset": parent_webhooks("statefulset", "apps", "v1", "statefulsets"),
    "leaderworkerset.x-k8s.io/leaderworkerset": parent_webhooks(
        "leaderworkerset", "leaderworkerset.x-k8s.io", "v1", "leaderworkersets"
    ),
}


PARENT_KINDS = ("deployment", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset")


def expected_order(integrations: tuple[str, ...]) -> list[str]:
    """Kinds of job in the order given, then `pod` when only a parent names it (Kueue's
    implicit pod integration), then the parents."""
    jobs = [n for n in integrations if n in KINDS and n not in PARENT_KINDS]
    parents = [n for n in integrations if n in PARENT_KINDS]
    implicit = ["pod"] if parents and "pod" not in integrations else []
    return [*jobs, *implicit, *parents]


def seen(hook):
    rule = hook["rules"][0]
    path = hook["clientConfig"]["url"].removeprefix(URL)
    return (
        hook["name"],
        path,
        rule["apiGroups"],
        rule["apiVersions"],
        rule["resources"],
        rule["operations"],
        hook["failurePolicy"],
    )


@pytest.mark.parametrize(
    "integrations",
    [
        None,
        ("batch/job",),
        ("jobset.x-k8s.io/jobset", "batch/job"),
        ("statefulset",),  # Kueue's implicit pod integration: its pods are queued too
        ("kubeflow.org/pytorchjob", "batch/job"),  # Kueue's paths: /mutate-kubeflow-org-v1-…
        ("example.com/toyjob", "batch/job"),
        ("example.com/deeptoyjob", "example.com/toypod"),
        tuple(KINDS),
    ],
)
def test_each_kind_of_the_integrations_has_its_four_webhooks(toys, integrations):
    mutating, validating = kube.webhook_configurations(b"ca", url=URL, integrations=integrations)
    names = (
        [  # Kueue's default set, in its order
            "batch/job",
            "kubeflow.org/mpijob",
            "ray.io/rayjob",
            "ray.io/raycluster",
            "ray.io/rayservice",
            "jobset.x-k8s.io/jobset",
            "workload.codeflare.dev/appwrapper",
            "trainer.kubeflow.org/trainjob",
            "pod",
            "deployment",  # the kinds whose pods Tower queues come last
            "statefulset",
            "leaderworkerset.x-k8s.io/leaderworkerset",
        ]
        if integrations is None
        else expected_order(integrations)
    )
    assert [seen(h) for h in mutating["webhooks"]] == [m for n in names for m in KINDS[n][0]]
    jobs = [h for h in validating["webhooks"] if h["name"] not in KUEUE_WEBHOOKS]
    assert [seen(h) for h in jobs] == [v for n in names for v in KINDS[n][1]]
    kueue = [h["name"] for h in validating["webhooks"] if h["name"] in KUEUE_WEBHOOKS]
    assert set(kueue) == KUEUE_WEBHOOKS  # Kueue's objects, whatever the kinds of job


def test_every_webhook_name_is_unique_and_every_path_is_served(toys):
    from webhook.app import admission_routes
    from webhook.settings import Settings

    configurations = kube.webhook_configurations(b"ca", url=URL, integrations=tuple(KINDS))
    hooks = [h for c in configurations for h in c["webhooks"]]
    names = [h["name"] for h in hooks]
    assert len(names) == len(set(names))
    routes = admission_routes(Settings(integrations=tuple(KINDS)))
    assert {h["clientConfig"]["url"].removeprefix(URL) for h in hooks} <= set(routes)


def test_the_default_is_kueues_default_set():
    assert kube.webhook_configurations(None, service=kube.SERVICE) == (
        kube.webhook_configurations(
            None, service=kube.SERVICE, integrations=registry.DEFAULT_FRAMEWORKS
        )
    )


def test_manifests_takes_integrations(tmp_path, capsys):
    out = tmp_path / "webhooks.yaml"
    assert main(["manifests", "--out", str(out), "--integrations", "batch/job"]) == 0
    mutating, validating = [d for d in yamlc.safe_load_all(out.read_text()) if d]
    assert [h["name"] for h in mutating["webhooks"]] == [
        "mjob-create.tower.dev",
        "mjob-update.tower.dev",
        "mjob-default-queue.tower.dev",
    ]
    assert "vjobset.tower.dev" not in [h["name"] for h in validating["webhooks"]]
    assert out.read_text() == kube.manifests(("batch/job",))


@pytest.mark.parametrize("command", ["manifests", "install"])
def test_an_unknown_integration_is_one_line_naming_it(tmp_path, capsys, command):
    args = (
        ["--out", str(tmp_path / "w.yaml")]
        if command == "manifests"
        else ["--kubeconfig", str(tmp_path / "none"), "--url", URL, "--certs-dir", str(tmp_path)]
    )
    assert main([command, *args, "--integrations", "batch/job,nope, ray.io/rayjob,zz"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(
        "error: --integrations nope, zz: no such integration (Kueue's are batch/job, "
    )
    assert not (tmp_path / "w.yaml").exists()


def test_install_configures_the_integrations_asked_for(api):  # noqa: F811 (the fixture)
    kube.install(api, URL, b"ca", ("jobset.x-k8s.io/jobset",))
    stored = FakeAPI.store[f"{BASE}/mutatingwebhookconfigurations/tower-mutating-webhook"]
    assert [h["name"] for h in stored["webhooks"]] == [
        "mjobset-create.tower.dev",
        "mjobset-update.tower.dev",
        "mjobset-default-queue.tower.dev",
    ]
    assert json.dumps(stored).count("/mutate-batch-v1-job") == 0
