"""The tally of Kueue's e2e suite against Tower, printed at the end of `make e2e`.

Every case in cases.json is counted once: passed, differs on purpose (a strict xfail that held),
not expressible here (a skip that says so, or a whole folder listed in NOT_EXPRESSIBLE), or not
passing (a failure, an error, a skip for want of a cluster, or no port yet). The target is at least 95% of the expressible cases.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.e2e.conftest import kubectl
from tests.e2e.kubelet import real_nodes
from tests.e2e.kueue.cases import all_cases, not_expressible_cases
from tests.e2e.kueue.util import ROOT, Cluster, Tower

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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _CASE_OF:
        return
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


@pytest.fixture(scope="session")
def tower(tmp_path_factory: pytest.TempPathFactory, kueue_nodes: None) -> Iterator[Tower]:
    """Tower as Kueue's e2e suite runs Kueue: CRDs and RBAC applied, its webhook and controller
    up with the suite's Configuration (tests/e2e/kueue/util.py CONFIGURATION)."""
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
