"""Our denials and warnings have exactly the shape that reached users in the captures."""

from tests.fixtures import admission_review, load
from webhook.mutate import JOB, mutate
from webhook.reviews import deny
from webhook.settings import Settings


def test_a_denial_has_the_shape_kube_apiserver_turned_into_http_403():
    captured = load("admission/08-validate.job-CREATE-response-allowed-false-code-403.json")
    answer = captured["dumpServerResponse"]["body"]["response"]
    ours = deny(answer["uid"], "some reason")
    assert set(ours) == set(answer)
    assert set(ours["status"]) == set(answer["status"])
    assert (ours["status"]["code"], ours["status"]["reason"]) == (403, "Forbidden")
    # What the user saw for that answer:
    stderr = (load.__globals__["FIXTURES"] / "admission/kubectl-create-deny.stderr.txt").read_text()
    assert f"denied the request: {answer['status']['message']}" in stderr


def test_a_warning_has_the_shape_kubectl_printed():
    captured = load("admission/10-mutate.job-CREATE-response-with-warnings.json")
    answer = captured["dumpServerResponse"]["body"]["response"]
    request = admission_review("05-mutate.job-UPDATE-kubectl-patch-suspend-false")["request"]
    ours = mutate(request, Settings(), JOB)
    assert set(answer) == set(ours)  # uid, allowed, patchType, patch, warnings
    assert isinstance(ours["warnings"], list)
    stderr = (load.__globals__["FIXTURES"] / "admission/kubectl-create-warn.stderr.txt").read_text()
    assert f"Warning: {answer['warnings'][0]}" in stderr
