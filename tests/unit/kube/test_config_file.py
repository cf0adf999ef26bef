"""`python -m extender run --config FILE`: Kueue's Configuration, what it sets and what it refuses."""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from extender.kube.config_file import ConfigFileError, load, settle
from extender.kube.flags import add_arguments

ROOT = Path(__file__).resolve().parents[3]
KUEUE_DEFAULT = ROOT / "tests" / "data" / "kueue-config" / "controller_manager_config.yaml"


def args_of(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return str(path)


V1BETA2 = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
V1BETA1 = "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"


def test_kueues_default_file_sets_the_flags_and_warns_once_per_unacted_field(monkeypatch):
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.delenv("TOWER_KUBE_API_QPS", raising=False)
    args = args_of("--config", str(KUEUE_DEFAULT))
    warnings = settle(args)
    assert (args.kube_api_qps, args.kube_api_burst) == (300.0, 500)
    assert args.leader_elect is True
    assert args.leader_election_id == "c1f6bfd2.kueue.x-k8s.io"
    assert args.leader_election_namespace == "tower-system"  # no POD_NAMESPACE here
    assert (args.lease_duration, args.renew_deadline, args.retry_period) == (15.0, 10.0, 2.0)
    assert args.fair_sharing is False
    assert args.integrations[:2] == ("batch/job", "kubeflow.org/mpijob")
    assert "kubeflow.org/pytorchjob" not in args.integrations
    assert len(args.integrations) == 12
    assert args.metrics_address == ":8443"  # metrics.bindAddress, acted on
    name = f"Configuration {KUEUE_DEFAULT}"
    assert warnings == [
        f"{name}: webhook (Kueue's webhook server) is not acted on by Tower; Tower's webhook "
        "is python -m webhook",
        f"{name}: health (Kueue's health probe server) is not acted on by Tower; Tower's is "
        "--health-address",
        f"{name}: controller (controller concurrency and cache sync timeout) is not acted on "
        "by Tower",
    ]


def test_kueues_default_file_keeps_what_later_work_needs():
    config = load(str(KUEUE_DEFAULT))
    wait = config.wait_for_pods_ready
    assert wait is not None  # on by v1beta2's default
    assert (wait.timeout, wait.block_admission, wait.recovery_timeout) == (1800.0, False, 1800.0)
    assert wait.requeuing.timestamp == "Eviction"
    assert (wait.requeuing.backoff_base_seconds, wait.requeuing.backoff_max_seconds) == (60, 3600)
    assert wait.requeuing.backoff_limit_count is None
    assert config.resources is None
    assert config.manage_jobs_without_queue_name is False
    assert config.managed_jobs_namespace_selector.matches({"kubernetes.io/metadata.name": "team-a"})
    assert not config.managed_jobs_namespace_selector.matches(
        {"kubernetes.io/metadata.name": "kube-system"}
    )
    assert config.multi_kueue.gc_interval == 60.0
    assert config.multi_kueue.dispatcher_name == "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"


def test_without_a_file_the_flags_take_kueues_defaults(monkeypatch):
    monkeypatch.delenv("TOWER_KUBE_API_QPS", raising=False)
    monkeypatch.delenv("TOWER_INTEGRATIONS", raising=False)
    monkeypatch.setenv("POD_NAMESPACE", "tower-system")
    args = args_of()
    assert settle(args) == []
    assert (args.kube_api_qps, args.kube_api_burst) == (300.0, 500)  # Kueue's, file or none
    assert (args.leader_elect, args.leader_election_id) == (True, "tower-controller")
    assert (args.fair_sharing, args.integrations) == (False, None)


def test_a_silent_file_gets_kueues_defaults(tmp_path):
    args = args_of("--config", write(tmp_path, V1BETA2))
    settle(args)
    assert (args.kube_api_qps, args.kube_api_burst) == (300.0, 500)
    assert args.integrations == ("batch/job",)
    assert args.leader_election_id == "c1f6bfd2.kueue.x-k8s.io"


def test_every_acted_field_takes_effect(tmp_path):
    path = write(
        tmp_path,
        V1BETA2
        + textwrap.dedent("""\
        clientConnection: {qps: 20.5, burst: 40}
        leaderElection:
          leaderElect: false
          leaseDuration: 30s
          renewDeadline: 20s
          retryPeriod: 1500ms
          resourceName: my-lease
          resourceNamespace: ops
        integrations:
          frameworks: [jobset.x-k8s.io/jobset, batch/job]
        fairSharing:
          preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]
        waitForPodsReady:
          timeout: 2m
          recoveryTimeout: 0s
          blockAdmission: true
          requeuingStrategy: {backoffLimitCount: 3, backoffBaseSeconds: 5, backoffMaxSeconds: 40}
        """),
    )
    args = args_of("--config", path)
    assert settle(args) == []
    assert (args.kube_api_qps, args.kube_api_burst) == (20.5, 40)
    assert (args.leader_elect, args.leader_election_id) == (False, "my-lease")
    assert args.leader_election_namespace == "ops"
    assert (args.lease_duration, args.renew_deadline, args.retry_period) == (30.0, 20.0, 1.5)
    assert args.integrations == ("jobset.x-k8s.io/jobset", "batch/job")
    assert args.fair_sharing is True
    wait = args.wait_for_pods_ready
    assert (wait.timeout, wait.recovery_timeout, wait.block_admission) == (120.0, 0.0, True)
    requeuing = wait.requeuing
    assert (requeuing.backoff_limit_count, requeuing.backoff_base_seconds) == (3, 5)
    assert (requeuing.backoff_max_seconds, requeuing.timestamp) == (40, "Eviction")


def test_without_a_file_wait_for_pods_ready_is_off():
    args = args_of()
    settle(args)
    assert args.wait_for_pods_ready is None


def test_a_flag_overrides_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TOWER_KUBE_API_BURST", "7")
    path = write(
        tmp_path,
        V1BETA2
        + textwrap.dedent("""\
        clientConnection: {qps: 20, burst: 40}
        leaderElection: {leaderElect: true, resourceName: from-file}
        integrations: {frameworks: [jobset.x-k8s.io/jobset]}
        fairSharing: {preemptionStrategies: [LessThanInitialShare]}
        """),
    )
    args = args_of(
        "--config",
        path,
        "--kube-api-qps",
        "9",
        "--no-leader-elect",
        "--leader-election-id",
        "from-flag",
        "--integrations",
        "batch/job",
        "--no-fair-sharing",
    )
    warnings = settle(args)
    assert (args.kube_api_qps, args.kube_api_burst) == (9.0, 7)  # flag, then its variable
    assert (args.leader_elect, args.leader_election_id) == (False, "from-flag")
    assert args.integrations == ("batch/job",)
    assert args.fair_sharing is False
    # The file's single strategy is followed, and so not warned about.
    assert args.scheduling.fair_preemption.strategies == ("LessThanInitialShare",)
    assert not any("fairSharing.preemptionStrategies" in line for line in warnings)


def test_v1beta1_is_converted(tmp_path):
    path = write(
        tmp_path,
        V1BETA1
        + textwrap.dedent("""\
        fairSharing: {enable: true}
        waitForPodsReady: {enable: true}
        queueVisibility: {updateIntervalSeconds: 5}
        """),
    )
    config = load(path)
    assert config.fair_sharing is True
    wait = config.wait_for_pods_ready
    assert wait is not None
    # v1beta1's own defaults: 5 minutes, and `enable` blocks admission.
    assert (wait.timeout, wait.block_admission) == (300.0, True)
    assert [line.split(": ", 1)[1].split(" (")[0] for line in config.warnings("f")] == [
        "queueVisibility",
    ]


def test_v1beta1_without_enable_leaves_fair_sharing_and_pods_ready_off(tmp_path):
    config = load(write(tmp_path, V1BETA1 + "fairSharing: {enable: false}\n"))
    assert config.fair_sharing is False
    assert config.wait_for_pods_ready is None
    assert config.warnings("f") == []


@pytest.mark.parametrize(
    ("body", "want"),
    [
        # unknown fields, at any depth
        ("clientConnections: {qps: 5}\n", "clientConnections: unknown field"),
        (
            "waitForPodsReady: {timeout: 5m, enable: true}\n",
            "waitForPodsReady.enable: unknown field",
        ),
        ("leaderElection: {leaseDuraton: 15s}\n", "leaderElection.leaseDuraton: unknown field"),
        # wrong types
        ("clientConnection: {qps: fast}\n", "clientConnection.qps: 'fast' is not a number"),
        ("clientConnection: {burst: 1.5}\n", "clientConnection.burst: 1.5 is not a whole number"),
        (
            "manageJobsWithoutQueueName: 'yes'\n",
            "manageJobsWithoutQueueName: 'yes' is not true or false",
        ),
        (
            "leaderElection: {leaseDuration: 15}\n",
            "leaderElection.leaseDuration: 15 is not a duration such as 90s or 5m",
        ),
        (
            "integrations: {frameworks: batch/job}\n",
            "integrations.frameworks: 'batch/job' is not a list",
        ),
        (
            "featureGates: {TopologyAwareScheduling: maybe}\n",
            "featureGates[TopologyAwareScheduling]: 'maybe' is not true or false",
        ),
        # invalid values
        (
            "clientConnection: {qps: -1}\n",
            "clientConnection.qps: -1 is not a number above 0 (Tower always limits its API requests)",
        ),
        (
            "clientConnection: {burst: 0}\n",
            "clientConnection.burst: 0 is not a whole number of at least 1",
        ),
        (
            "leaderElection: {leaseDuration: 10s, renewDeadline: 10s}\n",
            "leaderElection.leaseDuration must be longer than renewDeadline, and that longer than retryPeriod (got 10s, 10s, 2s)",
        ),
        (
            "integrations: {frameworks: [batch/job, kubeflow.org/notajob]}\n",
            "integrations.frameworks[1]: 'kubeflow.org/notajob' is no integration (Kueue's are batch/job, ",
        ),
        (
            "integrations: {frameworks: [batch/job, batch/job]}\n",
            "integrations.frameworks[1]: 'batch/job' is listed twice",
        ),
        (
            "integrations: {externalFrameworks: [Foo]}\n",
            "integrations.externalFrameworks[0]: 'Foo' is not Kind.version.group",
        ),
        ("fairSharing: {}\n", "fairSharing.preemptionStrategies: must be set when fairSharing is"),
        (
            "leaderElection: {resourceLock: configmaps}\n",
            "leaderElection.resourceLock: 'configmaps' is not supported (Tower's lock is leases)",
        ),
        (
            "waitForPodsReady: {timeout: -5m}\n",
            "waitForPodsReady.timeout: '-5m' must not be negative",
        ),
        (
            "waitForPodsReady: {requeuingStrategy: {timestamp: Later}}\n",
            "waitForPodsReady.requeuingStrategy.timestamp: 'Later' is not Eviction or Creation",
        ),
        (
            "resources: {transformations: [{input: a, strategy: Keep}]}\n",
            "resources.transformations[0].strategy: 'Keep' is not Retain or Replace",
        ),
        (
            "managedJobsNamespaceSelector: {matchExpressions: [{key: a, operator: Is}]}\n",
            "managedJobsNamespaceSelector.matchExpressions[0].operator: 'Is' is not one of In, NotIn, Exists, DoesNotExist",
        ),
        ("multiKueue: {gcInterval: -1m}\n", "multiKueue.gcInterval: '-1m' must not be negative"),
        ("kind: Config\n", "kind: 'Config' is not Configuration"),
    ],
    ids=lambda v: v.split(":")[0] if v.endswith("\n") else None,
)
def test_a_bad_field_is_one_line_naming_it(tmp_path, body, want):
    head = (
        V1BETA2 if not body.startswith("kind:") else "apiVersion: config.kueue.x-k8s.io/v1beta2\n"
    )
    path = write(tmp_path, head + body)
    with pytest.raises(ConfigFileError) as err:
        load(path)
    assert str(err.value).startswith(f"--config {path}: {want}")
    assert "\n" not in str(err.value)


def test_a_file_that_is_not_a_configuration(tmp_path):
    with pytest.raises(ConfigFileError) as err:
        load(write(tmp_path, "apiVersion: config.kueue.x-k8s.io/v1beta3\nkind: Configuration\n"))
    assert (
        "apiVersion: 'config.kueue.x-k8s.io/v1beta3' is not config.kueue.x-k8s.io/v1beta2 or"
        in str(err.value)
    )
    with pytest.raises(ConfigFileError) as err:
        load(write(tmp_path, "a: [1,\n"))
    assert ": not YAML: " in str(err.value)
    assert "(line " in str(err.value)
    with pytest.raises(ConfigFileError) as err:
        load(str(tmp_path / "missing.yaml"))
    assert str(err.value) == f"--config {tmp_path / 'missing.yaml'}: No such file or directory"


def test_run_with_a_bad_file_exits_2_with_the_one_line(tmp_path):
    path = write(tmp_path, V1BETA2 + "clientConnection: {qps: -1}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "extender", "run", "--config", path, "--kubeconfig", "X"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        f"error: --config {path}: clientConnection.qps: -1 is not a number above 0 "
        "(Tower always limits its API requests)\n"
    )


def test_help_says_a_flag_overrides_the_file():
    proc = subprocess.run(
        [sys.executable, "-m", "extender", "run", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    assert "a flag given overrides the file" in " ".join(proc.stdout.split())


def test_the_managed_namespaces_default_to_all_but_the_system_and_towers_own(monkeypatch):
    """Without a file, and with a file silent on it: Kueue's default selector, with the
    namespace Tower runs in (POD_NAMESPACE) where Kueue has its own."""
    monkeypatch.setenv("POD_NAMESPACE", "tower-ops")
    args = args_of()
    settle(args)
    assert args.managed_namespaces.as_manifest() == {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "tower-ops"],
            }
        ]
    }


def test_the_files_selector_and_its_example_metadata(tmp_path):
    """Kueue's opt-in page's example carries `metadata`, which Kueue's strict decoding
    refuses: Tower takes the file and says in one line that it ignores it."""
    path = write(
        tmp_path,
        textwrap.dedent(
            """\
            apiVersion: config.kueue.x-k8s.io/v1beta2
            kind: Configuration
            metadata:
              name: config
              namespace: kueue-system
            manageJobsWithoutQueueName: true
            managedJobsNamespaceSelector:
              matchExpressions:
              - key: kubernetes.io/metadata.name
                operator: In
                values: [ production, training, inference ]
            """
        ),
    )
    args = args_of("--config", path)
    warnings = settle(args)
    assert args.managed_namespaces.matches({"kubernetes.io/metadata.name": "training"})
    assert not args.managed_namespaces.matches({"kubernetes.io/metadata.name": "default"})
    assert args.managed_namespaces.as_manifest()["matchExpressions"][0]["values"] == [
        "production",
        "training",
        "inference",
    ]
    assert [w for w in warnings if "metadata" in w] == [
        f"Configuration {path}: metadata (not a field of Kueue's Configuration, though its "
        "docs' example has one) is not acted on by Tower; ignored; Kueue's strict decoding "
        "refuses the file"
    ]
    assert not [w for w in warnings if "manageJobsWithoutQueueName" in w]  # acted on now


@pytest.mark.parametrize(
    ("text", "want"),
    [("", ":8443"), ("metrics:\n  bindAddress: 127.0.0.1:9090\n", "127.0.0.1:9090"),
     ("metrics:\n  bindAddress: \"0\"\n", "0")],
    ids=["Kueue's default", "an address", "0: no metrics server"],
)  # fmt: skip
def test_metrics_bind_address_is_the_metrics_servers_address(tmp_path, text, want):
    args = args_of("--config", write(tmp_path, V1BETA2 + text))
    assert settle(args) == []
    assert args.metrics_address == want


def test_a_metrics_bind_address_without_a_port_is_refused_by_name(tmp_path):
    path = write(tmp_path, V1BETA2 + "metrics:\n  bindAddress: localhost\n")
    with pytest.raises(ConfigFileError) as refused:
        settle(args_of("--config", path))
    assert str(refused.value) == (
        f"--config {path}: metrics.bindAddress: 'localhost' is not host:port (:8443, Kueue's "
        "default; 0: no metrics server)"
    )


def test_the_metrics_address_flag_wins_over_the_file(tmp_path):
    args = args_of(
        "--config", write(tmp_path, V1BETA2 + "metrics:\n  bindAddress: :9443\n"),
        "--metrics-address", "127.0.0.1:0",
    )  # fmt: skip
    settle(args)
    assert args.metrics_address == "127.0.0.1:0"


@pytest.mark.parametrize(
    ("text", "want"),
    [("", "0"), ("visibilityServer: {}\n", ":8082"),
     ("visibilityServer:\n  bindPort: 9082\n", ":9082"),
     ("visibilityServer:\n  bindAddress: 10.0.0.7\n  bindPort: 9082\n", "10.0.0.7:9082")],
    ids=["no section: not served", "Kueue's default port", "a port", "an address and a port"],
)  # fmt: skip
def test_the_visibility_server_section_is_where_the_visibility_api_listens(tmp_path, text, want):
    args = args_of("--config", write(tmp_path, V1BETA2 + text))
    warnings = settle(args)
    assert args.visibility_address == want
    assert not [w for w in warnings if "visibilityServer" in w]  # acted on


def test_a_visibility_bind_address_that_is_not_an_ip_is_refused_by_name(tmp_path):
    path = write(tmp_path, V1BETA2 + "visibilityServer:\n  bindAddress: localhost\n")
    with pytest.raises(ConfigFileError) as refused:
        settle(args_of("--config", path))
    assert str(refused.value) == (
        f"--config {path}: visibilityServer.bindAddress: 'localhost' is not an IP address"
    )


def test_the_visibility_flag_wins_over_the_file_and_without_either_nothing_is_served(tmp_path):
    args = args_of(
        "--config", write(tmp_path, V1BETA2 + "visibilityServer:\n  bindPort: 9082\n"),
        "--visibility-address", "127.0.0.1:0",
    )  # fmt: skip
    settle(args)
    assert args.visibility_address == "127.0.0.1:0"
    bare = args_of()
    settle(bare)
    assert bare.visibility_address == "0"
