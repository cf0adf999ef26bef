"""A MultiKueue worker named by a ClusterProfile (Kueue's MultiKueueClusterProfile gate), on two
API doubles: the manager's MultiKueueCluster says, in Kueue's words, that the gate is off, that
the profile is missing, that no access provider is configured; with one configured, the worker
is reached through the profile's endpoint and the exec plugin the Configuration names, which
gets the profile's per-cluster config (the test plays cluster-inventory-api's secretreader
plugin: Kueue's e2e multikueue/sequential/e2e_test.go "Connection via ClusterProfile")."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from extender.core.admission.cluster_profile import AccessProvider, worker_kubeconfig
from extender.core.admission.multikueue import MultiKueueSettings
from extender.kube.api import resources as r
from extender.kube.controller.multikueue.kubeconfig import CLUSTER_PROFILES
from tests.controller.conftest import CRDS, Cluster, eventually
from tests.controller.test_multikueue import _condition, _start
from tests.controller.test_multikueue import worker as worker  # the fixture
from tests.unit.kube.test_config_sections_reach_the_controller import settled

GATE = "MultiKueueClusterProfile"
CRD = (
    Path(__file__).parents[1]
    / "data"
    / "cluster-inventory-api"
    / "multicluster.x-k8s.io_clusterprofiles.yaml"
)
PLUGIN = """\
import json, os, sys
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
with open(sys.argv[1], "w") as out:
    json.dump(info, out)
name = info["spec"]["cluster"]["config"]["clusterName"]
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": "token-of-" + name}}))
"""


def _install_crd(cluster: Cluster) -> None:
    cluster.admin.create(CRDS, yaml.safe_load(CRD.read_text()))
    eventually(lambda: _list_profiles(cluster) is not None, what="the ClusterProfile CRD served")


def _list_profiles(cluster: Cluster) -> list[Any] | None:
    try:
        return cluster.admin.list(CLUSTER_PROFILES, "tower-system")
    except Exception:
        return None


def _active(cluster: Cluster, name: str) -> tuple[str, str, str] | None:
    c = _condition(cluster.get("multikueueclusters", name), "Active")
    return (c["status"], c["reason"], c["message"]) if c else None


def _profile_cluster(cluster: Cluster, name: str, profile: str) -> None:
    cluster.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "MultiKueueCluster",
            "metadata": {"name": name},
            "spec": {"clusterSource": {"clusterProfileRef": {"name": profile}}},
        }
    )


def _profile(cluster: Cluster, name: str, manager: str = "secretreader") -> None:
    cluster.admin.create(
        CLUSTER_PROFILES,
        {
            "apiVersion": "multicluster.x-k8s.io/v1alpha1",
            "kind": "ClusterProfile",
            "metadata": {"name": name, "namespace": "tower-system"},
            "spec": {"displayName": name, "clusterManager": {"name": manager}},
        },
        "tower-system",
    )


def test_with_the_gate_off_a_profile_worker_is_refused_in_kueues_words(cluster):
    _profile_cluster(cluster, "worker3", "clusterprofile3")
    running = _start(cluster)
    try:
        eventually(
            lambda: _active(cluster, "worker3")
            == ("False", "MultiKueueClusterProfileFeatureDisabled",
                "load client config failed: MultiKueueClusterProfile feature gate is disabled"),
            timeout=20,
            what="the gate said off",
        )  # fmt: skip
    finally:
        running.halt()


def test_a_missing_profile_then_one_without_providers(cluster):
    """Kueue's "uses ClusterProfile as way to connect worker cluster" (no plugins)."""
    _install_crd(cluster)
    _profile_cluster(cluster, "worker3", "clusterprofile3-missing")
    running = _start(cluster, feature_gates={GATE: True})
    try:
        eventually(
            lambda: _active(cluster, "worker3")
            == ("False", "BadClusterProfile", "load client config failed: "
                'ClusterProfile.multicluster.x-k8s.io "clusterprofile3-missing" not found'),
            timeout=20,
            what="the missing profile said",
        )  # fmt: skip
        _profile(cluster, "clusterprofile3", "clustermanager3")
        cluster.admin.patch(
            r.MULTIKUEUE_CLUSTERS,
            "worker3",
            {"spec": {"clusterSource": {"clusterProfileRef": {"name": "clusterprofile3"}}}},
        )
        eventually(
            lambda: _active(cluster, "worker3")
            == ("False", "BadClusterProfile",
                "load client config failed: no access provider configured"),
            timeout=20,
            what="no access provider said",
        )  # fmt: skip
    finally:
        running.halt()


def test_a_profile_worker_is_reached_through_the_configured_plugin(cluster, worker, tmp_path):
    """Kueue's "Should be able to use ClusterProfile as way to connect worker cluster"."""
    _install_crd(cluster)
    plugin = tmp_path / "secretreader.py"
    plugin.write_text(PLUGIN)
    seen = tmp_path / "exec-info.json"
    provider = AccessProvider(
        "secretreader",
        {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin), str(seen)],
            "provideClusterInfo": True,
            "interactiveMode": "Never",
        },
    )
    _profile_cluster(cluster, "worker1", "worker1")
    running = _start(
        cluster,
        feature_gates={GATE: True},
        multikueue=MultiKueueSettings(access_providers=(provider,)),
    )
    try:
        _profile(cluster, "worker1")
        # A profile that offers no provider Tower is configured for: said, and waited on.
        eventually(
            lambda: _active(cluster, "worker1")
            == ("False", "BadClusterProfile", "load client config failed: "
                'no matching cluster accessor found for cluster profile "worker1"'),
            timeout=20,
            what="no matching accessor said",
        )  # fmt: skip
        server = json.loads(Path(worker.admin_config).read_text())["clusters"][0]["cluster"]
        cluster.admin.patch(
            CLUSTER_PROFILES,
            "worker1",
            {"status": {"accessProviders": [{"name": "secretreader", "cluster": {
                "server": server["server"],
                "extensions": [{"name": "client.authentication.k8s.io/exec",
                                "extension": {"clusterName": "multikueue1-cp"}}]}}]}},
            "tower-system",
            subresource="status",
        )  # fmt: skip
        eventually(
            lambda: _active(cluster, "worker1") == ("True", "Active", "Connected"),
            timeout=30,
            what="the worker connected through the profile",
        )
        info = json.loads(seen.read_text())
        assert info["kind"] == "ExecCredential"
        assert info["spec"]["cluster"]["server"] == server["server"]
        assert info["spec"]["cluster"]["config"] == {"clusterName": "multikueue1-cp"}
    finally:
        running.halt()


def test_the_first_configured_provider_the_profile_offers_is_used():
    profile = {
        "metadata": {"name": "p"},
        "status": {
            "credentialProviders": [{"name": "b", "cluster": {"server": "https://old:6443"}}],
            "accessProviders": [
                {"name": "a", "cluster": {"server": "https://a.example:6443"}},
                {"name": "b", "cluster": {"server": "https://b.example:6443"}},
            ],
        },
    }
    providers = [AccessProvider("b", {"command": "/b"}), AccessProvider("a", {"command": "/a"})]
    built = worker_kubeconfig(profile, providers)
    assert isinstance(built, dict)
    [cluster] = built["clusters"]
    assert cluster["cluster"]["server"] == "https://b.example:6443"  # accessProviders win
    [user] = built["users"]
    assert user["user"]["exec"] == {"command": "/b", "interactiveMode": "Never"}
    assert worker_kubeconfig(profile, []) == "no access provider configured"
    assert worker_kubeconfig(profile, [AccessProvider("b", {})]) == (
        'no exec config found for provider "b"'
    )
    bad = {"metadata": {"name": "p"}, "status": {"accessProviders": [
        {"name": "b", "cluster": {"server": "https://under_score:6443"}}]}}  # fmt: skip
    assert worker_kubeconfig(bad, providers) == "untrusted server endpoint"


def test_the_configurations_access_providers_reach_the_check_controller(tmp_path):
    args = settled(
        tmp_path,
        """\
        multiKueue:
          clusterProfile:
            accessProviders:
            - name: secretreader
              execConfig:
                apiVersion: client.authentication.k8s.io/v1
                command: /plugins/bin/secretreader-plugin
                provideClusterInfo: true
                interactiveMode: Never
        """,
    )
    assert args.multikueue.access_providers == (
        AccessProvider(
            "secretreader",
            {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": "/plugins/bin/secretreader-plugin",
                "provideClusterInfo": True,
                "interactiveMode": "Never",
            },
        ),
    )
    # Kueue's deprecated name, taken when accessProviders is empty.
    old = settled(
        tmp_path,
        """\
        multiKueue:
          clusterProfile:
            credentialsProviders:
            - name: old
              execConfig: {command: /old}
        """,
    )
    assert old.multikueue.access_providers == (AccessProvider("old", {"command": "/old"}),)
