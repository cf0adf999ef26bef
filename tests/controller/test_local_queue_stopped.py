"""A LocalQueue with a stopPolicy says so in its status, as Kueue's LocalQueue controller
writes it: Active False, reason Stopped, "LocalQueue is stopped"; back to Ready once the
policy is gone. (Kueue's default_config_test.go sets Hold and waits for Active False.)"""

from __future__ import annotations

from extender.kube.api import resources as r
from tests.controller.conftest import eventually
from tests.controller.test_pods import setup


def active(cluster) -> dict:
    lq = cluster.get("localqueues", "user-queue", "default") or {}
    found = [c for c in (lq.get("status") or {}).get("conditions") or [] if c["type"] == "Active"]
    return found[0] if found else {}


def test_a_held_local_queue_is_inactive_stopped_and_comes_back(cluster, start_controller):
    setup(cluster)
    start_controller()
    eventually(lambda: active(cluster).get("status") == "True", what="the LocalQueue active")
    for policy in ("Hold", "HoldAndDrain"):
        cluster.admin.patch(
            r.LOCAL_QUEUES, "user-queue", {"spec": {"stopPolicy": policy}}, "default"
        )
        said = eventually(
            lambda: active(cluster) if active(cluster).get("status") == "False" else None,
            what=f"the LocalQueue inactive under {policy}",
        )
        assert (said["reason"], said["message"]) == ("Stopped", "LocalQueue is stopped")
        cluster.admin.patch(
            r.LOCAL_QUEUES, "user-queue", {"spec": {"stopPolicy": "None"}}, "default"
        )
        said = eventually(
            lambda: active(cluster) if active(cluster).get("status") == "True" else None,
            what="the LocalQueue active again",
        )
        assert said["reason"] == "Ready"
