"""The Configuration's multiKueue and admissionFairSharing sections, set field by field, reach
the controller's settings as `run --config` settles them (each field's behaviour is tested
where it acts: tests/controller/test_multikueue.py, test_admission_fair_sharing.py)."""

from __future__ import annotations

import argparse
import textwrap

from extender.core.admission.multikueue import MultiKueueSettings
from extender.core.scheduling.admission_fair_sharing import AfsConfig
from extender.kube.config_file import settle

HEAD = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"


def settled(tmp_path, body: str) -> argparse.Namespace:
    path = tmp_path / "kueue.yaml"
    path.write_text(HEAD + textwrap.dedent(body))
    args = argparse.Namespace(config=str(path))
    assert settle(args) == []  # acted on: nothing to warn about
    return args


def test_every_multikueue_field_reaches_the_check_controller(tmp_path):
    args = settled(
        tmp_path,
        """\
        multiKueue:
          gcInterval: 2m
          origin: team-manager
          workerLostTimeout: 10m
          dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-incremental
          incrementalDispatcherConfig: {stepSize: 2}
        """,
    )
    assert args.multikueue == MultiKueueSettings(
        origin="team-manager",
        worker_lost_timeout=600.0,
        gc_interval=120.0,
        dispatcher="kueue.x-k8s.io/multikueue-dispatcher-incremental",
        incremental_step=2,
    )


def test_every_admission_fair_sharing_field_reaches_the_scheduler(tmp_path):
    args = settled(
        tmp_path,
        """\
        admissionFairSharing:
          usageHalfLifeTime: 10m
          usageSamplingInterval: 30s
          resourceWeights: {cpu: 2.0, nvidia.com/gpu: 10}
        """,
    )
    assert args.admission_fair_sharing == AfsConfig(
        600.0, 30.0, {"cpu": 2.0, "nvidia.com/gpu": 10.0}
    )
