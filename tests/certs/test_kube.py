"""certs.kube against a recording HTTP server that answers like kube-apiserver for the calls made."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest
from kubernetes import client

from certs import kube
from extender.core.config.kueue_config import parse
from tests import yamlc
from tests.fixtures import load

CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_job_webhooks_select_only_queued_objects():
    mutating, validating = kube.webhook_configurations(CA, url="https://127.0.0.1:9443")
    create = next(w for w in mutating["webhooks"] if w["name"] == "mjob-create.tower.dev")
    assert create["objectSelector"] == {
        "matchExpressions": [{"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}]
    }
    assert create["clientConfig"]["url"] == "https://127.0.0.1:9443/mutate-batch-v1-job"
    assert create["failurePolicy"] == "Fail"
    assert create["rules"][0]["operations"] == ["CREATE"]
    update = next(w for w in mutating["webhooks"] if w["name"] == "mjob-update.tower.dev")
    assert update["failurePolicy"] == "Ignore"
    not_system = {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": ["kube-system", "tower-system"],
    }
    assert create["namespaceSelector"] == {"matchExpressions": [not_system]}
    opt_in = next(w for w in mutating["webhooks"] if w["name"] == "mjob-default-queue.tower.dev")
    assert opt_in["namespaceSelector"] == {
        "matchExpressions": [
            not_system,
            {
                "key": "tower.dev/manage-jobs-without-queue-name",
                "operator": "In",
                "values": ["true"],
            },
        ]
    }
    paths = {w["clientConfig"]["url"].rsplit("/", 1)[1] for w in validating["webhooks"]}
    assert "validate-kueue-x-k8s-io-v1beta2-clusterqueue" in paths


def test_configuration_has_the_fields_kube_apiserver_stores():
    stored = load("admission/mutatingwebhookconfiguration.as-stored.json")["webhooks"][0]
    mutating, _ = kube.webhook_configurations(CA, url="https://127.0.0.1:9443")
    ours = mutating["webhooks"][0]
    for key in (
        "name",
        "clientConfig",
        "rules",
        "failurePolicy",
        "sideEffects",
        "admissionReviewVersions",
        "timeoutSeconds",
        "objectSelector",
        "namespaceSelector",
        "matchPolicy",
    ):
        assert key in stored, key
        assert key in ours, key


class FakeAPI(BaseHTTPRequestHandler):
    """GET answers 404 until the object is created; POST stores; PUT replaces."""

    store: ClassVar[dict] = {}
    calls: ClassVar[list] = []

    def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self):
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def do_GET(self):
        self.calls.append(("GET", self.path))
        if self.path in self.store:
            self._send(200, self.store[self.path])
        else:
            self._send(
                404,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": "NotFound",
                    "code": 404,
                    "metadata": {},
                },
            )

    def do_POST(self):
        body = self._body()
        self.calls.append(("POST", self.path))
        body["metadata"]["resourceVersion"] = "1"
        self.store[f"{self.path}/{body['metadata']['name']}"] = body
        self._send(201, body)

    def do_PUT(self):
        body = self._body()
        self.calls.append(("PUT", self.path, body["metadata"].get("resourceVersion")))
        self.store[self.path] = body
        self._send(200, body)

    def do_PATCH(self):
        patch = self._body()
        self.calls.append(("PATCH", self.path, self.headers["Content-Type"]))
        if self.path not in self.store:
            self.do_GET()
            return
        current = self.store[self.path]
        _merge(current, patch, self.headers["Content-Type"])
        self._send(200, current)

    def log_message(self, *args):
        pass


def _merge(target, patch, content_type):
    """Strategic merge of `webhooks` by name (its patchMergeKey), JSON merge otherwise."""
    for key, value in patch.items():
        if key == "webhooks" and "strategic" in content_type:
            for item in value:
                match = next(w for w in target["webhooks"] if w["name"] == item["name"])
                _merge(match, item, content_type)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value, content_type)
        else:
            target[key] = value


@pytest.fixture
def api():
    FakeAPI.store, FakeAPI.calls = {}, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeAPI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = client.Configuration(host=f"http://127.0.0.1:{server.server_port}")
    yield client.ApiClient(config)
    server.shutdown()


BASE = "/apis/admissionregistration.k8s.io/v1"


def test_install_creates_then_replaces_with_the_resource_version(api):
    names = kube.install(api, "https://127.0.0.1:9443", CA)
    assert names == [
        "MutatingWebhookConfiguration/tower-mutating-webhook",
        "ValidatingWebhookConfiguration/tower-validating-webhook",
    ]
    assert ("POST", f"{BASE}/mutatingwebhookconfigurations") in FakeAPI.calls
    kube.install(api, "https://127.0.0.1:9443", CA)
    assert ("PUT", f"{BASE}/mutatingwebhookconfigurations/tower-mutating-webhook", "1") in (
        FakeAPI.calls
    )
    stored = FakeAPI.store[f"{BASE}/mutatingwebhookconfigurations/tower-mutating-webhook"]
    assert (
        stored["webhooks"][0]["clientConfig"]["caBundle"]
        == "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
    )


def test_install_from_the_command_line_with_a_kubeconfig(api, tmp_path, capsys):
    from certs.__main__ import main

    assert main(["generate", "--out", str(tmp_path), "--ip-address", "127.0.0.1"]) == 0
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "fake",
                "clusters": [{"name": "fake", "cluster": {"server": api.configuration.host}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
            }
        )
    )
    assert (
        main(
            [
                "install",
                "--kubeconfig",
                str(kubeconfig),
                "--url",
                "https://127.0.0.1:9443",
                "--certs-dir",
                str(tmp_path),
            ]
        )
        == 0
    )
    assert (
        "configured MutatingWebhookConfiguration/tower-mutating-webhook -> https://127.0.0.1:9443"
        in (capsys.readouterr().out)
    )


def test_bad_flags_are_one_line_and_exit_2(tmp_path, capsys):
    from certs.__main__ import main

    assert main(["generate", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        "error: a serving certificate needs at least one --dns-name or --ip-address\n"
    )
    assert (
        main(
            [
                "install",
                "--kubeconfig",
                str(tmp_path / "none"),
                "--url",
                "https://x",
                "--certs-dir",
                str(tmp_path),
            ]
        )
        == 2
    )
    assert capsys.readouterr().err == (
        f"error: --certs-dir {tmp_path}: no ca.crt (write it with python -m certs generate)\n"
    )
    assert main(["generate", "--out", str(tmp_path), "--dns-name", "tower"]) == 0
    capsys.readouterr()
    not_a_kubeconfig = tmp_path / "kubeconfig"
    not_a_kubeconfig.write_text("just text\n")
    args = ["install", "--kubeconfig", str(not_a_kubeconfig), "--url", "https://x"]
    assert main([*args, "--certs-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"error: cannot load the Kubernetes configuration: {not_a_kubeconfig} is not a "
        "kubeconfig (a YAML mapping of clusters, users and contexts)\n"
    )


def test_write_secret_creates_then_replaces(api):
    from datetime import UTC, datetime

    from certs import pki

    bundle = pki.generate(
        ["tower-webhook.tower-system.svc"], now=datetime(2026, 11, 29, tzinfo=UTC)
    )
    kube.write_secret(api, "tower-system", "tower-webhook-certs", bundle)
    kube.write_secret(api, "tower-system", "tower-webhook-certs", bundle)
    path = "/api/v1/namespaces/tower-system/secrets/tower-webhook-certs"
    secret = FakeAPI.store[path]
    assert secret["type"] == "kubernetes.io/tls"
    assert sorted(secret["data"]) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert ("PUT", path, None) in FakeAPI.calls


def test_inject_ca_bundle_into_every_webhook_and_the_crds(api):
    kube.install(api, "https://127.0.0.1:9443", CA)
    crd_path = (
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/clusterqueues.kueue.x-k8s.io"
    )
    # A CRD exactly as kube-apiserver stored one with a conversion webhook (fixtures).
    FakeAPI.store[crd_path] = load("conversion/crd-widgets.as-stored.json")
    new_ca = b"new CA"
    kube.inject_ca_bundle(api, new_ca)
    for kind in (
        "mutatingwebhookconfigurations/tower-mutating-webhook",
        "validatingwebhookconfigurations/tower-validating-webhook",
    ):
        hooks = FakeAPI.store[f"{BASE}/{kind}"]["webhooks"]
        assert {w["clientConfig"]["caBundle"] for w in hooks} == {"bmV3IENB"}
        assert all("url" in w["clientConfig"] for w in hooks)  # the rest is kept
    crd = FakeAPI.store[crd_path]
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] == "bmV3IENB"


def test_renewal_keeps_the_ca_and_replaces_an_expiring_certificate(api):
    import base64
    from datetime import UTC, datetime, timedelta

    kube.install(api, "https://127.0.0.1:9443", CA)
    start = datetime(2026, 11, 29, tzinfo=UTC)
    names = ["tower-webhook.tower-system.svc"]
    assert kube.renew_if_needed(api, "tower-system", "certs", names, now=start) is True
    path = "/api/v1/namespaces/tower-system/secrets/certs"
    first = dict(FakeAPI.store[path]["data"])
    assert (
        kube.renew_if_needed(api, "tower-system", "certs", names, now=start + timedelta(days=100))
        is False
    )
    assert (
        kube.renew_if_needed(api, "tower-system", "certs", names, now=start + timedelta(days=340))
        is True
    )
    second = FakeAPI.store[path]["data"]
    assert second["ca.crt"] == first["ca.crt"]
    assert second["tls.crt"] != first["tls.crt"]
    hooks = FakeAPI.store[f"{BASE}/mutatingwebhookconfigurations/tower-mutating-webhook"]
    assert hooks["webhooks"][0]["clientConfig"]["caBundle"] == second["ca.crt"]
    assert base64.b64decode(second["ca.crt"]).startswith(b"-----BEGIN CERTIFICATE-----")


def _config(text: str):
    return parse(yamlc.safe_load(text), namespace="tower-system")


def test_the_configurations_namespaces_scope_every_jobs_hook():
    """managedJobsNamespaceSelector is every job hook's namespaceSelector (Kueue respects it
    for labelled jobs too); manageJobsWithoutQueueName drops Tower's opt-in label."""
    config = _config(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "manageJobsWithoutQueueName: true\n"
        "managedJobsNamespaceSelector:\n  matchLabels: {managed-by-kueue: 'true'}\n"
    )
    mutating, validating = kube.webhook_configurations(
        CA, url="https://x", integrations=config.integrations, scope=kube.Scope.of(config)
    )
    selected = {"matchLabels": {"managed-by-kueue": "true"}}
    for hook in mutating["webhooks"] + validating["webhooks"]:
        if hook["name"].startswith(("mjob", "vjob")):
            assert hook["namespaceSelector"] == selected, hook["name"]
        else:  # Kueue's own objects are checked in every namespace
            assert hook["namespaceSelector"] == {}, hook["name"]
    # Without manageJobsWithoutQueueName, unlabelled jobs need the opt-in label as well.
    quiet = _config(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "managedJobsNamespaceSelector:\n  matchLabels: {managed-by-kueue: 'true'}\n"
    )
    mutating, _ = kube.webhook_configurations(CA, url="https://x", scope=kube.Scope.of(quiet))
    default_queue = next(
        h for h in mutating["webhooks"] if h["name"].endswith("default-queue.tower.dev")
    )
    assert default_queue["namespaceSelector"] == {
        "matchLabels": {"managed-by-kueue": "true"},
        "matchExpressions": [
            {
                "key": "tower.dev/manage-jobs-without-queue-name",
                "operator": "In",
                "values": ["true"],
            }
        ],
    }


@pytest.mark.parametrize(
    ("current", "wanted", "hooks", "changes"),
    [
        pytest.param(
            [{"name": "a.tower.dev", "namespaceSelector": {}, "timeoutSeconds": 9}],
            [{"name": "a.tower.dev", "namespaceSelector": {"matchLabels": {"x": "y"}}}],
            [
                {
                    "name": "a.tower.dev",
                    "namespaceSelector": {"matchLabels": {"x": "y"}},
                    "timeoutSeconds": 9,
                }
            ],
            ["namespaceSelector of a.tower.dev"],
            id="a selector changes, an admin's timeout stays",
        ),
        pytest.param(
            [
                {
                    "name": "a.tower.dev",
                    "namespaceSelector": {},
                    "clientConfig": {"caBundle": "Q0E="},
                }
            ],
            [
                {"name": "a.tower.dev", "namespaceSelector": {}, "clientConfig": {}},
                {"name": "b.tower.dev", "namespaceSelector": {}, "clientConfig": {"url": "u"}},
            ],
            [
                {
                    "name": "a.tower.dev",
                    "namespaceSelector": {},
                    "clientConfig": {"caBundle": "Q0E="},
                },
                {
                    "name": "b.tower.dev",
                    "namespaceSelector": {},
                    "clientConfig": {"url": "u", "caBundle": "Q0E="},
                },
            ],
            ["added b.tower.dev"],
            id="a new integration's hook gets the CA of the others",
        ),
        pytest.param(
            [
                {"name": "old.tower.dev"},
                {"name": "theirs.example.com"},
                {"name": "a.tower.dev", "namespaceSelector": {}},
            ],
            [{"name": "a.tower.dev", "namespaceSelector": {}}],
            [{"name": "a.tower.dev", "namespaceSelector": {}}, {"name": "theirs.example.com"}],
            ["removed old.tower.dev (its integration is not enabled)"],
            id="a disabled integration's hook goes, another's hook stays",
        ),
        pytest.param(
            [{"name": "a.tower.dev", "namespaceSelector": {}}],
            [{"name": "a.tower.dev", "namespaceSelector": {}}],
            [{"name": "a.tower.dev", "namespaceSelector": {}}],
            [],
            id="nothing to do",
        ),
    ],
)
def test_reconciled_hooks(current, wanted, hooks, changes):
    assert kube._reconciled_hooks(current, wanted) == (hooks, changes)


def test_a_bad_config_file_is_one_line_and_exit_2(tmp_path, capsys):
    from certs.__main__ import main

    bad = tmp_path / "config.yaml"
    bad.write_text(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nmanageJobsWithoutQueueName: yes please\n"
    )
    assert main(["manifests", "--out", str(tmp_path / "w.yaml"), "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --config {bad}: manageJobsWithoutQueueName")
    assert err.count("\n") == 1


def test_uninstall_leaves_the_crds_readable_and_takes_what_tower_made(tmp_path):
    """Helm's post-delete hook: a CRD that converts through Tower's Service converts no more,
    others are left alone; the webhook's Secret and the controller's Lease go. Twice is
    the same as once."""
    import subprocess
    import sys

    from kubernetes import config as k8s_config

    from extender.kube.generators.crds import custom_resource_definitions
    from tests.apidouble import ApiDouble

    api = ApiDouble()
    api.start()
    try:
        path = api.kubeconfig(str(tmp_path / "k"))
        kube_api = k8s_config.new_client_from_config(config_file=path)
        extensions = client.ApiextensionsV1Api(kube_api)
        core = client.CoreV1Api(kube_api)
        crds = custom_resource_definitions()
        converted = [
            c["metadata"]["name"]
            for c in crds
            if c["spec"].get("conversion", {}).get("strategy") == "Webhook"
        ]
        assert converted
        for crd in crds:
            extensions.create_custom_resource_definition(crd)
        core.create_namespace({"metadata": {"name": "tower-system"}})
        core.create_namespaced_secret("tower-system", {"metadata": {"name": "tower-webhook-tls"}})
        client.CoordinationV1Api(kube_api).create_namespaced_lease(
            "tower-system", {"metadata": {"name": "tower-controller"}, "spec": {}}
        )
        command = [sys.executable, "-m", "certs", "uninstall", "--kubeconfig", path]
        first = subprocess.run(command, capture_output=True, text=True, check=True)
        for crd in extensions.list_custom_resource_definition().items:
            name = crd.metadata.name
            if name in converted:
                assert crd.spec.conversion.strategy == "None", name
                assert crd.spec.conversion.webhook is None, name
                assert f"CRD {name}: conversion None" in first.stdout
        assert "deleted Secret tower-system/tower-webhook-tls" in first.stdout
        assert "deleted Lease tower-system/tower-controller" in first.stdout
        assert [s.metadata.name for s in core.list_namespaced_secret("tower-system").items] == []
        again = subprocess.run(command, capture_output=True, text=True, check=True)
        assert again.stdout == ""
    finally:
        api.stop()
