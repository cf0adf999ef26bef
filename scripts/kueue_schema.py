"""Copy Kueue's published CRD schemas into tests/data, without their descriptions.

Usage: python scripts/kueue_schema.py KUEUE_CRD_DIR OUT_DIR
KUEUE_CRD_DIR holds kueue.x-k8s.io_<plural>.yaml as in Kueue's config/components/crd/bases/
at the release tag. What is kept is what a schema walk compares (names, versions, scope,
subresources, printer columns and every schema keyword); descriptions are dropped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

KINDS = (
    "resourceflavors",
    "clusterqueues",
    "cohorts",
    "localqueues",
    "workloads",
    "workloadpriorityclasses",
    "admissionchecks",
    "provisioningrequestconfigs",
    "topologies",
    "multikueueconfigs",
    "multikueueclusters",
)


def without_descriptions(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_descriptions(v) for k, v in value.items() if k != "description"}
    if isinstance(value, list):
        return [without_descriptions(v) for v in value]
    return value


def main(source: str, out: str) -> None:
    Path(out).mkdir(parents=True, exist_ok=True)
    for plural in KINDS:
        with open(Path(source) / f"kueue.x-k8s.io_{plural}.yaml") as f:
            crd = yaml.load(f, Loader=yaml.CSafeLoader)
        kept = {"kind": crd["kind"], "spec": without_descriptions(crd["spec"])}
        (Path(out) / f"{plural}.json").write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
