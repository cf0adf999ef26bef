"""Kueue's visibility API served by `python -m extender run --visibility-address`: the running
controller's queues, behind the authenticated front door (TokenReview, SubjectAccessReview)."""

from __future__ import annotations

import json
import re
import signal

from tests.controller.conftest import controller_process, eventually
from tests.controller.test_preemption import cluster_queue, flavor, local_queue
from tests.controller.test_rbac import BASIC_USER
from tests.scrape import get as get_https

LINE = re.compile(r"visibility API over https on port (\d+)")
PATH = "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cq/pendingworkloads"


def visibility_port(proc) -> int:
    while True:
        line = proc.stdout.readline().decode()
        assert line, "the controller ended before it served the visibility API"
        found = LINE.search(line)
        if found:
            return int(found.group(1))


def test_the_running_controller_answers_kueues_pending_workloads_to_whom_may_see_them(cluster):
    viewer = "system:serviceaccount:team:viewer"
    nobody = "system:serviceaccount:team:nobody"
    cluster.api.users["viewer-token"] = {"username": viewer, "groups": []}
    cluster.api.users["nobody-token"] = {"username": nobody, "groups": []}
    cluster.api.rbac[viewer] = [
        *BASIC_USER,
        {"apiGroups": ["visibility.kueue.x-k8s.io"], "resources": ["clusterqueues/pendingworkloads"],
         "verbs": ["get"]},
    ]  # fmt: skip
    cluster.api.rbac[nobody] = list(BASIC_USER)
    cluster.apply(flavor("pool-a"), cluster_queue("cq", 1), local_queue("user-queue", "cq"))
    proc = controller_process(cluster, "--no-leader-elect", "--visibility-address", "127.0.0.1:0")
    try:
        port = visibility_port(proc)
        for i in range(3):
            cluster.job(f"j{i}", "1", duration="600s")

        def two_pending() -> dict | None:
            status, body = get_https(port, PATH, token="viewer-token")
            assert status == 200, body
            answer = json.loads(body)
            return answer if len(answer["items"]) == 2 else None

        answer = eventually(two_pending, timeout=20, what="two pending workloads listed")
        assert answer["kind"] == "PendingWorkloadsSummary"
        assert [i["positionInClusterQueue"] for i in answer["items"]] == [0, 1]
        assert {i["localQueueName"] for i in answer["items"]} == {"user-queue"}
        status, body = get_https(port, PATH, token="nobody-token")
        assert status == 403, body
        assert nobody in json.loads(body)["message"]
        assert get_https(port, PATH, token=None)[0] == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
