"""The tally of Kueue's e2e suite against Tower, printed at the end of `make e2e`.

Every case in cases.json is counted once: passed, differs on purpose (a strict xfail that held),
not expressible here (a skip that says so, or a whole folder listed in NOT_EXPRESSIBLE), or not
passing (a failure, an error, a skip for want of a cluster, or no port yet). The target is at least 95% of the expressible cases.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from certs.kube import CONVERTED_CRDS
from tests.e2e.conftest import kubectl
from tests.e2e.kubelet import real_nodes
from tests.e2e.kueue.cases import all_cases, not_expressible_cases
from tests.e2e.kueue.util import KUEUE_NS, ROOT, VISIBILITY_SERVICE, Cluster, Tower, eventually

# Folders that cannot run on this machine, with the reason (each is counted, never passing).
NOT_EXPRESSIBLE = {
    **not_expressible_cases(
        "dra/",
        "Kueue v0.19.2's DRA reads resource.k8s.io/v1, which kube-apiserver v1.32 does not serve",
    ),
    **not_expressible_cases(
        "multikueue/dra/",
        "Kueue v0.19.2's DRA reads resource.k8s.io/v1, which v1.32 does not serve",
    ),
}

_CASE_OF: dict[str, str] = {}
_OUTCOME: dict[str, str] = {}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kueue_case(key): the port of one Kueue e2e case")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        marker = item.get_closest_marker("kueue_case")
        if marker is not None:
            _CASE_OF[item.nodeid] = marker.args[0]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    key = _CASE_OF.get(report.nodeid)
    if key is None:
        return
    if report.skipped and hasattr(report, "wasxfail"):
        outcome = "differs"
    elif report.skipped and "not expressible here" in str(report.longrepr):
        outcome = "skipped"
    elif report.skipped:
        outcome = "not run"
    elif report.failed:
        outcome = "failed"
    elif report.when == "call":
        outcome = "passed"
    else:
        return
    # A case with several tests (parametrized halves) passes only if every one does.
    previous = _OUTCOME.get(key)
    if previous in (None, "passed") or outcome == "failed":
        _OUTCOME[key] = outcome


def tally() -> tuple[Counter[str], int]:
    counts: Counter[str] = Counter()
    for key in all_cases():
        if key in NOT_EXPRESSIBLE:
            counts["not expressible"] += 1
            continue
        outcome = _OUTCOME.get(key)
        if outcome == "skipped":
            counts["not expressible"] += 1
        elif outcome in ("passed", "differs", "failed", "not run"):
            counts[outcome] += 1
        else:
            counts["not ported"] += 1
    return counts, len(all_cases())


def results_log() -> Path | None:
    """Where each run appends its cases' outcomes (scripts/kueue_e2e_tally.py merges them):
    TOWER_E2E_KUEUE_RESULTS, else kueue-results.jsonl in the planes' TOWER_E2E_WORK."""
    named = os.environ.get("TOWER_E2E_KUEUE_RESULTS")
    work = os.environ.get("TOWER_E2E_WORK")
    if named:
        return Path(named)
    return Path(work) / "kueue-results.jsonl" if work else None


def record_outcomes(path: Path) -> None:
    """One line per case this run reached: which plane (its kube-system uid, new with every
    fresh etcd), which commit, when, and the outcome."""
    plane = kubectl("get", "namespace", "kube-system", "-o", "jsonpath={.metadata.uid}",
                    check=False).strip()  # fmt: skip
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False).stdout.strip()  # fmt: skip
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "extender",
                            "webhook", "tests/e2e"], capture_output=True, text=True,
                           check=False).stdout.strip()  # fmt: skip
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with path.open("a") as out:
        for key, outcome in sorted(_OUTCOME.items()):
            line = {"case": key, "outcome": outcome, "plane": plane, "at": at,
                    "commit": head + ("+dirty" if dirty else "")}  # fmt: skip
            out.write(json.dumps(line) + "\n")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _CASE_OF:
        return
    log = results_log()
    if log is not None and _OUTCOME and os.environ.get("TOWER_E2E_KUBECONFIG"):
        record_outcomes(log)
    counts, total = tally()
    expressible = total - counts["not expressible"]
    share = 100.0 * counts["passed"] / expressible if expressible else 0.0
    terminalreporter.section("Kueue v0.19.2 e2e suite")
    terminalreporter.write_line(
        f"{counts['passed']} of {total} Kueue e2e cases pass; {counts['differs']} differ on "
        f"purpose; {counts['not expressible']} not expressible here; "
        f"{counts['failed']} fail; {counts['not run']} not run (no cluster); "
        f"{counts['not ported']} not ported yet "
        f"({share:.0f}% of the {expressible} expressible cases pass; the target is 95%)"
    )


@pytest.fixture(scope="session")
def kueue_nodes(api_client: client.ApiClient) -> None:
    """The nodes labelled as Kueue's kind cluster labels its two workers
    (hack/testing/kind-cluster.yaml): a real node is `instance-type: on-demand`, the Node made by
    hand for big pods `spot` (where there is no real node, the first node is on-demand)."""
    core = client.CoreV1Api(api_client)
    names = sorted(n.metadata.name for n in core.list_node().items)
    real = real_nodes(api_client)
    on_demand = real[0] if real else names[0]
    for name in names:
        kind = "on-demand" if name == on_demand else "spot"
        core.patch_node(name, {"metadata": {"labels": {"instance-type": kind}}})


@pytest.fixture(scope="package")
def tower(tmp_path_factory: pytest.TempPathFactory, kueue_nodes: None) -> Iterator[Tower]:
    """Tower as Kueue's e2e suite runs Kueue: CRDs and RBAC applied, its webhook and controller
    up with the suite's Configuration (tests/e2e/kueue/util.py CONFIGURATION). For this package
    only: the rest of tests/e2e starts its own webhook on the same port."""
    # A run cut short leaves the CRDs' conversion at its own webhook's URL, which a
    # server-side apply of deploy/crds (the Service form) conflicts with: put back first.
    service = {
        "service": {"name": "tower-webhook", "namespace": "tower-system", "path": "/convert"}
    }
    patch = [{"op": "replace", "path": "/spec/conversion/webhook/clientConfig", "value": service}]
    for crd in CONVERTED_CRDS:
        kubectl("patch", "crd", crd, "--type=json", "-p", json.dumps(patch), check=False)
    kubectl("apply", "--server-side", "-f", str(ROOT / "deploy" / "crds"))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    tower = Tower(tmp_path_factory.mktemp("kueue-e2e"))
    yield tower
    tower.stop()


@pytest.fixture
def cluster(api_client: client.ApiClient, tower: Tower) -> Cluster:
    return Cluster(api_client)


@pytest.fixture
def ns(cluster: Cluster, kubelet_namespaces: set[str]) -> Iterator[str]:
    """ginkgo.BeforeEach's util.CreateNamespaceFromPrefixWithLog(ctx, k8sClient, "e2e-"), and the
    AfterEach's DeleteNamespace."""
    name = cluster.create_namespace_from_prefix("e2e-")
    kubelet_namespaces.add(name)
    yield name
    cluster.delete_namespace(name)


VISIBILITY_VERSIONS = ("v1beta1", "v1beta2")


@pytest.fixture(scope="package")
def user_roles(tower: Tower) -> Iterator[None]:
    """Tower's user-facing ClusterRoles, under Kueue's names (kueue-batch-user-role,
    kueue-batch-admin-role, kueue-metrics-reader, ...), as Kueue's deployment ships them."""
    roles = str(ROOT / "deploy" / "rbac" / "user-roles.yaml")
    kubectl("apply", "--server-side", "-f", roles)
    kubectl("create", "namespace", KUEUE_NS, check=False)
    yield
    kubectl("delete", "-f", roles, "--ignore-not-found", "--wait=false", check=False)
    kubectl("delete", "namespace", KUEUE_NS, "--wait=false", check=False)


@pytest.fixture(scope="package")
def visibility_api(api_client: client.ApiClient, tower: Tower, user_roles: None) -> Iterator[str]:
    """Kueue's visibility API through the real kube-apiserver: APIServices v1beta1 and v1beta2
    of visibility.kueue.x-k8s.io (insecureSkipTLSVerify, as deploy/visibility/ has them) for a
    Service without selector whose Endpoints name the controller's address on the pod bridge
    (kube-apiserver runs with --enable-aggregator-routing). Yields Kueue's namespace."""
    assert tower.visibility is not None, (
        "no real node's pod bridge on this machine: the aggregator cannot reach the controller"
    )
    host, port = tower.visibility
    core = client.CoreV1Api(api_client)
    core.create_namespaced_service(KUEUE_NS, {
        "metadata": {"name": VISIBILITY_SERVICE},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]},
    })  # fmt: skip
    core.create_namespaced_endpoints(KUEUE_NS, {
        "metadata": {"name": VISIBILITY_SERVICE},
        "subsets": [{"addresses": [{"ip": host}], "ports": [{"name": "https", "port": port}]}],
    })  # fmt: skip
    registration = client.ApiregistrationV1Api(api_client)
    for version in VISIBILITY_VERSIONS:
        registration.create_api_service({
            "metadata": {"name": f"{version}.visibility.kueue.x-k8s.io"},
            "spec": {"group": "visibility.kueue.x-k8s.io", "version": version,
                     "groupPriorityMinimum": 100, "versionPriority": 100,
                     "insecureSkipTLSVerify": True,
                     "service": {"name": VISIBILITY_SERVICE, "namespace": KUEUE_NS, "port": 443}},
        })  # fmt: skip

    def available() -> bool:
        for version in VISIBILITY_VERSIONS:
            service = registration.read_api_service(f"{version}.visibility.kueue.x-k8s.io")
            conditions = {c.type: c for c in (service.status.conditions or [])}
            ready = conditions.get("Available")
            assert ready is not None, f"APIService {version}: no Available condition yet"
            assert ready.status == "True", f"APIService {version}: {ready.reason} {ready.message}"
        return True

    eventually(available, 60, "the visibility APIServices to be Available")
    yield KUEUE_NS
    for version in VISIBILITY_VERSIONS:
        kubectl("delete", "apiservice", f"{version}.visibility.kueue.x-k8s.io", check=False)
    core.delete_namespaced_service(VISIBILITY_SERVICE, KUEUE_NS)


@pytest.fixture
def ns_b(cluster: Cluster, kubelet_namespaces: set[str]) -> Iterator[str]:
    """A second namespace, as the visibility cases' nsB."""
    name = cluster.create_namespace_from_prefix("e2e-")
    kubelet_namespaces.add(name)
    yield name
    cluster.delete_namespace(name)
