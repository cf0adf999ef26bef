"""Records kube-apiserver's TokenReview and SubjectAccessReview bytes into this folder (by hand).

Run against a real control plane (shared/realk8s/up.sh), with its run folder:
    python tests/data/delegated-auth/record.py $REALK8S_RUN
Each file is one raw HTTPS exchange, as the shared fixtures' raw captures are: the request
(method, path, headers, body) and the answer (status, headers, body and the body's exact text).
Bearer tokens are replaced by a placeholder in what is saved; nothing else is edited.
"""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
NS = "metrics-demo"


class Plane:
    def __init__(self, run: Path) -> None:
        self.run = run
        kubeconfig = (run / "admin.kubeconfig").read_text()
        self.port = int(kubeconfig.split("https://127.0.0.1:")[1].split("\n")[0])
        pki = run / "pki"
        self.context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        self.anonymous = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.tokens: dict[str, str] = {}

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = None,
        as_admin: bool = True,
    ) -> dict[str, Any]:
        context = self.context if as_admin and token is None else self.anonymous
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=context, timeout=10)
        headers = {"Accept": "application/json", "User-Agent": "tower-record/1.0"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        answer = conn.getresponse()
        raw = answer.read()
        conn.close()
        try:
            parsed: Any = json.loads(raw)
        except ValueError:
            parsed = None
        return {
            "request": {"method": method, "path": path, "headers": headers, "body": body},
            "response": {
                "status": answer.status,
                "reason": answer.reason,
                "headers": answer.getheaders(),
                "body": parsed,
                "rawBody": raw.decode(),
            },
        }

    def save(self, name: str, note: str, exchange: dict[str, Any]) -> dict[str, Any]:
        text = json.dumps({"note": note, **exchange}, indent=1)
        for who, token in self.tokens.items():
            text = text.replace(token, f"<{who}'s token, redacted>")
        (HERE / name).write_text(text + "\n")
        print(name, exchange["response"]["status"])
        return exchange

    def token(self, namespace: str, name: str) -> str:
        answer = self.call(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        )
        token = str(answer["response"]["body"]["status"]["token"])
        self.tokens[f"{namespace}/{name}"] = token
        return token


def kubectl(run: Path, manifest: str) -> None:
    subprocess.run(
        ["kubectl", "--kubeconfig", str(run / "admin.kubeconfig"), "apply", "-f", "-"],
        input=manifest.encode(),
        check=True,
    )


SETUP = f"""
apiVersion: v1
kind: Namespace
metadata: {{name: {NS}}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: tower-system}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: scraper, namespace: {NS}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: nobody, namespace: {NS}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: tower-controller, namespace: tower-system}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: demo-metrics-reader}}
rules:
- nonResourceURLs: ["/metrics"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: demo-metrics-reader}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: demo-metrics-reader}}
subjects:
- {{kind: ServiceAccount, name: scraper, namespace: {NS}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: demo-tower-auth-delegator}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:auth-delegator}}
subjects:
- {{kind: ServiceAccount, name: tower-controller, namespace: tower-system}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: demo-tower-auth-reader, namespace: kube-system}}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: extension-apiserver-authentication-reader
subjects:
- {{kind: ServiceAccount, name: tower-controller, namespace: tower-system}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: demo-pending-viewer, namespace: {NS}}}
rules:
- apiGroups: ["visibility.kueue.x-k8s.io"]
  resources: ["localqueues/pendingworkloads"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: demo-pending-viewer, namespace: {NS}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: demo-pending-viewer}}
subjects:
- {{kind: ServiceAccount, name: scraper, namespace: {NS}}}
"""


def main(run: Path) -> None:
    kubectl(run, SETUP)
    time.sleep(2)  # RBAC's informers see the new bindings
    plane = Plane(run)
    controller = plane.token("tower-system", "tower-controller")
    scraper = plane.token(NS, "scraper")
    nobody = plane.token(NS, "nobody")
    review = "/apis/authentication.k8s.io/v1/tokenreviews"
    access = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

    def token_review(token: str) -> dict[str, Any]:
        return {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }

    plane.save(
        "tokenreview-authenticated.json",
        "the controller's service account reviews the scraper's service-account token",
        plane.call("POST", review, token_review(scraper), token=controller),
    )
    user = plane.call("POST", review, token_review(scraper), token=controller)
    status = user["response"]["body"]["status"]["user"]
    plane.save(
        "tokenreview-unauthenticated.json",
        "a token kube-apiserver never issued",
        plane.call("POST", review, token_review("not-a-token"), token=controller),
    )
    plane.save(
        "tokenreview-forbidden.json",
        "a service account without system:auth-delegator may not create TokenReviews",
        plane.call("POST", review, token_review(scraper), token=nobody),
    )

    def access_review(who: dict[str, Any], **attributes: Any) -> dict[str, Any]:
        spec = {
            "user": who["username"],
            "uid": who.get("uid", ""),
            "groups": who.get("groups", []),
            "extra": who.get("extra", {}),
            **attributes,
        }
        return {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        }

    metrics = {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}
    plane.save(
        "subjectaccessreview-nonresource-allowed.json",
        "may the scraper (bound to a role with nonResourceURLs /metrics, get) get /metrics",
        plane.call("POST", access, access_review(status, **metrics), token=controller),
    )
    nobody_user = plane.call("POST", review, token_review(nobody), token=controller)
    nobody_status = nobody_user["response"]["body"]["status"]["user"]
    plane.save(
        "subjectaccessreview-nonresource-denied.json",
        "may a service account without the role get /metrics",
        plane.call("POST", access, access_review(nobody_status, **metrics), token=controller),
    )
    pending = {
        "resourceAttributes": {
            "namespace": NS,
            "verb": "get",
            "group": "visibility.kueue.x-k8s.io",
            "version": "v1beta2",
            "resource": "localqueues",
            "subresource": "pendingworkloads",
            "name": "user-queue",
        }
    }
    plane.save(
        "subjectaccessreview-resource-allowed.json",
        "may the scraper (a Role in its namespace) get localqueues/pendingworkloads there",
        plane.call("POST", access, access_review(status, **pending), token=controller),
    )
    elsewhere = json.loads(json.dumps(pending))
    elsewhere["resourceAttributes"]["namespace"] = "default"
    plane.save(
        "subjectaccessreview-resource-denied.json",
        "the same in a namespace where it has no Role",
        plane.call("POST", access, access_review(status, **elsewhere), token=controller),
    )
    proxy = {"username": "alice", "groups": ["team-a", "system:authenticated"]}
    plane.save(
        "subjectaccessreview-user-from-front-proxy.json",
        "a user named by the front proxy's headers, with no uid or extra",
        plane.call("POST", access, access_review(proxy, **metrics), token=controller),
    )
    plane.save(
        "subjectaccessreview-forbidden.json",
        "a service account without system:auth-delegator may not create SubjectAccessReviews",
        plane.call("POST", access, access_review(status, **metrics), token=nobody),
    )
    plane.save(
        "configmap-extension-apiserver-authentication.json",
        "what the controller reads to trust the front proxy (its Role in kube-system)",
        plane.call(
            "GET",
            "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication",
            token=controller,
        ),
    )
    plane.save(
        "apiserver-401-bad-token.json",
        "kube-apiserver's own answer to a token it does not know",
        plane.call("GET", "/metrics", token="not-a-token"),
    )
    plane.save(
        "apiserver-403-nonresource.json",
        "kube-apiserver's own answer to a non-resource path the user may not get",
        plane.call("GET", "/metrics", token=nobody),
    )
    plane.save(
        "apiserver-403-resource-subresource.json",
        "kube-apiserver's own answer to a namespaced subresource the user may not get",
        plane.call("GET", f"/api/v1/namespaces/{NS}/pods/p/log", token=nobody),
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
