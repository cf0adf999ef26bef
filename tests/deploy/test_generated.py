"""What deploy/ holds about the kinds of job is generated from the registry of job adapters:
the webhook configurations (kustomize and Helm) and the controller's job RBAC rules (here
and in the chart). Without kubectl or Helm: the chart is rendered by tests/deploy/helm.py."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from certs import kube as certs_kube
from extender.core.jobframework import registry
from extender.kube.generators import rbac
from tests.deploy.helm import template
from tests.webhook import toy

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "tower"
toys = toy.toys  # the fixture
WEBHOOKS = "python -m certs manifests --out deploy/default/webhooks.yaml"
HELM_WEBHOOKS = f"python -m certs manifests --helm --out {certs_kube.HELM_TEMPLATE}"


def test_the_kustomize_webhook_configurations_are_generated_from_the_registry():
    text = (ROOT / "deploy" / "default" / "webhooks.yaml").read_text()
    assert text == certs_kube.manifests(), f"run {WEBHOOKS}"


def test_the_charts_webhook_configurations_are_generated_from_the_registry():
    text = (ROOT / certs_kube.HELM_TEMPLATE).read_text()
    assert text == certs_kube.manifests(helm=True), f"run {HELM_WEBHOOKS}"


@pytest.mark.parametrize("cert_manager", [False, True])
def test_the_chart_renders_the_registrys_webhooks(cert_manager):
    objs = template(CHART, {"certManager": {"enabled": cert_manager}})
    want = certs_kube.webhook_configurations(None, service=certs_kube.SERVICE)
    for expected in want:
        got = next(o for o in objs if o["kind"] == expected["kind"])
        assert got["webhooks"] == expected["webhooks"], f"run {HELM_WEBHOOKS}"
        annotations = got["metadata"].get("annotations")
        assert annotations == (
            {"cert-manager.io/inject-ca-from": "tower-system/tower-webhook"}
            if cert_manager
            else None
        )
    job_paths = {
        h["clientConfig"]["service"]["path"]
        for o in objs
        if o["kind"].endswith("WebhookConfiguration")
        for h in o["webhooks"]
        if "-kueue-x-k8s-io-" not in h["clientConfig"]["service"]["path"]
    }
    assert job_paths == {
        registry.webhook_path(a, verb)
        for a in (*registry.enabled(), *registry.enabled_parents())
        for verb in ("mutate", "validate")
    }


# ----- RBAC ------------------------------------------------------------------------------------


def job_rules_in(text: str) -> list[dict]:
    start, stop = rbac.region(text)
    return yaml.safe_load(text[start:stop]) or []


def outside(text: str) -> str:
    start, stop = rbac.region(text)
    return text[:start] + text[stop:]


@pytest.mark.parametrize("name", rbac.FILES)
def test_the_committed_job_rules_are_the_registrys(name):
    text = (ROOT / name).read_text()
    assert job_rules_in(text) == rbac.job_rules(), f"run {rbac.COMMAND}"
    assert rbac.rewritten(text) == text, f"run {rbac.COMMAND}"


def test_the_chart_grants_the_controller_what_the_kustomize_base_does():
    chart = next(o for o in template(CHART) if o["kind"] == "ClusterRole")
    documents = yaml.safe_load_all((ROOT / rbac.FILES[0]).read_text())
    assert chart == next(d for d in documents if d and d["kind"] == "ClusterRole")


def rule(group, resource, verbs):
    return {"apiGroups": [group], "resources": [resource], "verbs": verbs}


READ_AND_PATCH = ["get", "list", "watch", "patch"]


@pytest.mark.parametrize(
    ("framework", "rules"),
    [
        (
            "batch/job",
            [rule("batch", "jobs", READ_AND_PATCH), rule("batch", "jobs/status", ["patch"])],
        ),
        (
            "jobset.x-k8s.io/jobset",
            [
                rule("jobset.x-k8s.io", "jobsets", READ_AND_PATCH),
                # the worker's status, taken by a JobSet MultiKueue ran on a worker
                rule("jobset.x-k8s.io", "jobsets/status", ["patch"]),
            ],
        ),
        ("example.com/toyjob", [rule("example.com", "toyjobs", READ_AND_PATCH)]),
        ("example.com/toypod", [rule("", "toypods", READ_AND_PATCH)]),
    ],
)
def test_the_rules_of_each_kind(toys, framework, rules):
    """Read and patch the kind; patch its status only where the adapter can count as started
    (the controller clears a Job's startTime through /status)."""
    adapter = registry.ADAPTERS[framework]
    assert rbac.job_rules([adapter]) == rules
    assert yaml.safe_load(rbac.rules_text(rules)) == rules  # the files' flow style, read back


def test_a_new_kind_is_granted_once_regenerated_and_the_test_says_how(toys, tmp_path, monkeypatch):
    # A new kind that is on by default (as a registered kind of Kueue's default set is).
    defaults = (*registry.DEFAULT_FRAMEWORKS, "example.com/toyjob")
    monkeypatch.setattr(registry, "DEFAULT_FRAMEWORKS", defaults)
    for name in rbac.FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text((ROOT / name).read_text())
    stale = (tmp_path / rbac.FILES[0]).read_text()
    assert job_rules_in(stale) != rbac.job_rules()  # what the test above would fail on
    assert rbac.main([str(tmp_path)]) == 0
    fresh = (tmp_path / rbac.FILES[0]).read_text()
    assert job_rules_in(fresh) == rbac.job_rules()
    assert rule("example.com", "toyjobs", READ_AND_PATCH) in job_rules_in(fresh)
    assert outside(fresh) == outside(stale)  # only the generated lines changed
    for document in yaml.safe_load_all(fresh):
        if document:
            kubernetes_validate.validate(document, "1.32.0", strict=True)
    assert rbac.main([str(tmp_path)]) == 0  # and again: nothing to do
    assert (tmp_path / rbac.FILES[0]).read_text() == fresh


@pytest.mark.parametrize(
    "text",
    [
        "rules: []\n",
        f"{rbac.END}\n{rbac.BEGIN}\n",
        f"{rbac.BEGIN}\n{rbac.END}\n{rbac.BEGIN}\n{rbac.END}\n",
    ],
    ids=["no markers", "out of order", "twice"],
)
def test_a_file_without_its_markers_is_refused(text, tmp_path, capsys):
    with pytest.raises(ValueError, match="expected one line"):
        rbac.region(text)
    (tmp_path / "deploy" / "rbac").mkdir(parents=True)
    (tmp_path / rbac.FILES[0]).write_text(text)
    assert rbac.main([str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
