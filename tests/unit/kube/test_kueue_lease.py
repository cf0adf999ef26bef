"""Kueue's lease watched so that Tower never admits beside a live Kueue: when it is live, the
line that says so, and Tower's own election yielding to it (clocks injected)."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from extender.kube.api.client import ApiError, NotLeaderError
from extender.kube.api.kueue_lease import KueueLease, YieldingFence, parse_lease
from extender.kube.api.lease import LeaderElector, Unfenced
from tests.unit.kube.test_lease import Clock, LeaseStore

KUEUE = ("kueue-system", "c1f6bfd2.kueue.x-k8s.io")
HOLDER = "kueue-controller-manager-7d9f8b6c5-x2x9z_0f4c1e2a"


def stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class KueueSide:
    """Kueue's Lease as its manager keeps it (controller-runtime's leader election): a holder,
    a duration of 15 s, and a renewTime it moves every 2 s."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.lease: dict | None = None
        self.refuse: ApiError | None = None

    def renew(self, holder: str | None = HOLDER) -> None:
        self.lease = {
            "metadata": {"name": KUEUE[1], "namespace": KUEUE[0]},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                     "renewTime": stamp(self.clock.now)},
        }  # fmt: skip

    def get(self, resource, name, namespace=None):
        assert (namespace, name) == KUEUE, (namespace, name)
        if self.refuse is not None:
            raise self.refuse
        if self.lease is None:
            raise ApiError(404, "NotFound", f'leases.coordination.k8s.io "{name}" not found')
        return {**self.lease, "spec": dict(self.lease["spec"])}


@pytest.fixture
def kueue():
    wall, mono = Clock(), Clock()
    wall.now = 1_800_000_000.0
    side = KueueSide(wall)
    watch = KueueLease(side, *KUEUE, clock=wall, monotonic=mono)
    return side, watch, wall, mono


def advance(wall: Clock, mono: Clock, seconds: float) -> None:
    wall.now += seconds
    mono.now += seconds


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("kueue-system/c1f6bfd2.kueue.x-k8s.io", KUEUE),
        ("none", None),
        ("", None),
    ],
)
def test_the_flag_names_a_lease_or_none(text, expect):
    assert parse_lease(text) == expect


@pytest.mark.parametrize("text", ["kueue-system", "/name", "ns/", "a/b/c"])
def test_a_flag_that_names_no_lease_is_refused_naming_the_form(text):
    with pytest.raises(ValueError, match="is not NAMESPACE/NAME"):
        parse_lease(text)


def test_a_renewed_lease_is_live_and_says_which_and_what_to_do(kueue):
    side, watch, wall, mono = kueue
    side.renew()
    advance(wall, mono, 1.5)
    watch.poll()
    assert watch.live() == (
        f"Kueue's controller holds its lease kueue-system/c1f6bfd2.kueue.x-k8s.io (holder "
        f"{HOLDER}, renewed 1.5s ago): Tower admits nothing beside a live Kueue; stop it first "
        "(kubectl -n kueue-system scale deployment kueue-controller-manager --replicas=0), then "
        "Tower takes over within 15s"
    )
    for _ in range(20):  # renewed every 2 s for 40 s: live all along
        advance(wall, mono, 2)
        side.renew()
        watch.poll()
        assert watch.live() is not None


def test_a_lease_no_longer_renewed_is_free_a_duration_after_it_last_changed(kueue):
    side, watch, wall, mono = kueue
    side.renew()
    watch.poll()
    advance(wall, mono, 14)
    watch.poll()
    assert watch.live() is not None
    advance(wall, mono, 1.5)
    watch.poll()
    assert watch.live() is None


def test_a_holders_clock_ahead_cannot_keep_it_live_past_a_duration_of_silence(kueue):
    side, watch, wall, mono = kueue
    wall.now += 3600  # Kueue's node writes renewTime an hour ahead of this clock
    side.renew()
    wall.now -= 3600
    watch.poll()
    assert watch.live() is not None
    advance(wall, mono, 15.1)
    watch.poll()
    assert watch.live() is None


@pytest.mark.parametrize(
    ("state", "why"),
    [
        (lambda side, wall: side.renew(holder=None), "released on a clean stop"),
        (lambda side, wall: None, "no such Lease: no Kueue here"),
        (
            lambda side, wall: (side.renew(), setattr(wall, "now", wall.now + 600)),
            "renewTime ten minutes old: a Kueue stopped long ago",
        ),
    ],
)
def test_a_lease_nobody_renews_is_free_at_the_first_look(kueue, state, why):
    side, watch, wall, _ = kueue
    state(side, wall)
    watch.poll()
    assert watch.live() is None, why


def test_a_lease_that_cannot_be_read_is_not_live_and_is_said_once(kueue, caplog):
    side, watch, *_ = kueue
    side.refuse = ApiError(403, "Forbidden", 'leases.coordination.k8s.io "c1f6bfd2" is forbidden')
    with caplog.at_level(logging.WARNING, logger="tower.lease"):
        watch.poll()
        watch.poll()
    assert watch.live() is None
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith(
        "cannot read Kueue's lease kueue-system/c1f6bfd2.kueue.x-k8s.io (403 Forbidden"
    ), line
    assert line.endswith(
        "Tower cannot tell whether it runs (deploy/rbac/ grants the controller get on it)"
    ), line


def test_turning_live_and_free_is_said_once_each(kueue, caplog):
    side, watch, wall, mono = kueue
    with caplog.at_level(logging.INFO, logger="tower.lease"):
        watch.poll()  # free at the first look: nothing said
        side.renew()
        for _ in range(3):
            watch.poll()
            advance(wall, mono, 1)
        side.renew(holder=None)
        watch.poll()
        watch.poll()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2, said
    assert said[0].startswith("Kueue's controller holds its lease"), said
    assert said[1] == "Kueue's lease kueue-system/c1f6bfd2.kueue.x-k8s.io is free: Tower may lead"


def test_the_fence_stops_every_write_while_kueue_leads(kueue):
    side, watch, *_ = kueue
    fence = YieldingFence(Unfenced(), watch)
    watch.poll()
    assert fence.holds()
    fence.check()
    side.renew()
    watch.poll()
    assert not fence.holds()
    with pytest.raises(NotLeaderError, match="not writing: Kueue's controller holds its lease"):
        fence.check()


def test_towers_election_waits_for_kueue_and_steps_down_when_kueue_starts(kueue):
    side, watch, wall, mono = kueue
    store = LeaseStore()
    elector = LeaderElector(
        store, "tower-a", clock=wall, monotonic=mono, retry_period=0.01, yield_to=watch.live
    )
    side.renew()
    watch.poll()
    assert not elector._attempt()
    assert elector.problem.startswith("Kueue's controller holds its lease"), elector.problem
    assert store.lease is None  # Tower's own lease not even taken
    side.renew(holder=None)  # Kueue stopped cleanly
    watch.poll()
    stop = threading.Event()
    assert elector.acquire(stop)
    assert store.lease["spec"]["holderIdentity"] == "tower-a"
    side.renew()  # Kueue started again: Tower steps down at its next renewal
    watch.poll()
    assert elector.lost.wait(5)
    assert not elector.fence.holds()
    assert store.lease["spec"]["holderIdentity"] is None  # given back
    stop.set()


def run_args(*argv: str):
    import argparse

    from extender.kube.config_file import settle
    from extender.kube.flags import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(argv)
    settle(args)
    return args


KUEUE_FILE = "tests/data/kueue-config/controller_manager_config.yaml"


def tower_file(tmp_path: Path) -> str:
    """The Configuration Tower's Deployment mounts (deploy/default's ConfigMap)."""
    import yaml

    docs = yaml.safe_load_all(
        (Path(__file__).resolve().parents[3] / "deploy/default/controller.yaml").read_text()
    )
    [config_map] = [d for d in docs if d and d.get("kind") == "ConfigMap"]
    path = tmp_path / "tower.yaml"
    path.write_text(config_map["data"]["controller_manager_config.yaml"])
    return str(path)


def custom_file(tmp_path: Path) -> str:
    """Kueue's file as a team runs it in its own namespace with its own Lease name."""
    path = tmp_path / "custom.yaml"
    path.write_text(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "namespace: batch-system\nleaderElection:\n  resourceName: my-kueue-lease\n"
    )
    return str(path)


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        ((), KUEUE),
        (("--config", KUEUE_FILE), KUEUE),  # Kueue's own file: namespace kueue-system
        (("--kueue-lease", "kueue/other-lease"), ("kueue", "other-lease")),
        (("--kueue-lease", "none"), None),
        # Kueue's file with Tower in Kueue's namespace: the very same Lease, so one leader.
        (("--config", KUEUE_FILE, "--leader-election-namespace", "kueue-system"), None),
        # Tower's shipped file keeps its own Lease name: Kueue's is still Kueue's default.
        (("--config", "TOWER_FILE"), KUEUE),
        (("--config", "CUSTOM_FILE"), ("batch-system", "my-kueue-lease")),
    ],
)
def test_which_lease_tower_watches(monkeypatch, tmp_path, argv, expect):
    from extender.kube.runtime import kueue_lease

    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.delenv("TOWER_KUEUE_LEASE", raising=False)
    monkeypatch.chdir(Path(__file__).resolve().parents[3])
    files = {"TOWER_FILE": tower_file(tmp_path), "CUSTOM_FILE": custom_file(tmp_path)}
    watch = kueue_lease(run_args(*(files.get(a, a) for a in argv)), client=None)  # type: ignore[arg-type]
    assert (None if watch is None else (watch.namespace, watch.name)) == expect
