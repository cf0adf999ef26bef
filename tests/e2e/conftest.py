"""The real-cluster suite: runs only against a cluster you name, skipped otherwise."""

import os

import pytest

KUBECONFIG = os.environ.get("TOWER_E2E_KUBECONFIG")
WEBHOOK_URL = os.environ.get("TOWER_E2E_WEBHOOK_URL")

REASON = (
    "no Kubernetes cluster here: set TOWER_E2E_KUBECONFIG to a cluster's kubeconfig and "
    "TOWER_E2E_WEBHOOK_URL to an https URL at which that cluster's API server reaches this "
    "machine (for kind: https://<docker bridge IP>:9443), then run `make e2e`"
)


def pytest_collection_modifyitems(config, items):
    if KUBECONFIG and WEBHOOK_URL:
        return
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=REASON))
