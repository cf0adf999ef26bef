"""The cluster-inventory API's secretreader exec credential plugin, played for the e2e suite.

Kueue's e2e mounts the plugin's binary (registry.k8s.io/cluster-inventory-api/secretreader)
into its manager; no image can be pulled here, so this does what its source
(plugins/secretreader/cmd/plugin/main.go) does: read the ExecCredential request from
KUBERNETES_EXEC_INFO, take `clusterName` from the cluster's exec extension config, read the
Secret of that name in the plugin's namespace (the current context's, from KUBECONFIG, else
"default") and answer its `token` key as the credential. Run as
`python tests/e2e/kueue/secretreader_plugin.py` by the manager's Tower."""

from __future__ import annotations

import base64
import json
import os
import sys

from kubernetes import client, config


def main() -> int:
    info = json.loads(os.environ.get("KUBERNETES_EXEC_INFO") or "{}")
    cluster = (info.get("spec") or {}).get("cluster") or {}
    name = (cluster.get("config") or {}).get("clusterName")
    if not name:
        print("missing clusterName in ExecCredential.Spec.Cluster.Config", file=sys.stderr)
        return 1
    api = config.new_client_from_config(config_file=os.environ.get("KUBECONFIG"))
    _, active = config.list_kube_config_contexts(config_file=os.environ.get("KUBECONFIG"))
    namespace = (active or {}).get("context", {}).get("namespace") or "default"
    secret = client.CoreV1Api(api).read_namespaced_secret(name, namespace)
    token = (secret.data or {}).get("token")
    if not token:
        print(f'secret {namespace}/{name} missing "token" key', file=sys.stderr)
        return 1
    print(json.dumps({
        "apiVersion": info.get("apiVersion") or "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": base64.b64decode(token).decode()},
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
