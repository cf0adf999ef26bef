"""`run --config FILE` with fairSharing.preemptionStrategies, resources.quotaCheckStrategy and
their feature gates: what the scheduler is told, and Kueue's refusals."""

from __future__ import annotations

import textwrap

import pytest

from extender.core.scheduling.preemption import FairPreemption
from extender.kube.config_file import ConfigFileError, settle
from tests.unit.kube.test_config_file import V1BETA1, V1BETA2, args_of, write

FINAL, INITIAL = "LessThanOrEqualToFinalShare", "LessThanInitialShare"


@pytest.mark.parametrize(
    ("text", "flags", "want_preemption", "want_ignore"),
    [
        pytest.param("", (), FairPreemption((FINAL, INITIAL), True), False, id="Kueue's defaults"),
        pytest.param(
            f"fairSharing: {{preemptionStrategies: [{FINAL}]}}\n",
            (),
            FairPreemption((FINAL,), True),
            False,
            id="one strategy",
        ),
        pytest.param(
            "",
            ("--feature-gates", "FairSharingPreemptWithinNominal=false"),
            FairPreemption((FINAL, INITIAL), False),
            False,
            id="within nominal off by the flag",
        ),
        pytest.param(
            "featureGates: {FairSharingPreemptWithinNominal: false}\n",
            (),
            FairPreemption((FINAL, INITIAL), False),
            False,
            id="within nominal off by the file",
        ),
        pytest.param(
            "resources: {quotaCheckStrategy: IgnoreUndeclared}\n",
            (),
            FairPreemption(),
            True,
            id="IgnoreUndeclared",
        ),
        pytest.param(
            "resources: {quotaCheckStrategy: BlockUndeclared}\n",
            (),
            FairPreemption(),
            False,
            id="BlockUndeclared",
        ),
        pytest.param(
            "resources: {quotaCheckStrategy: IgnoreUndeclared}\n",
            ("--feature-gates", "QuotaCheckStrategy=false"),
            FairPreemption(),
            False,
            id="IgnoreUndeclared, gate off: Kueue blocks as before",
        ),
    ],
)
def test_the_scheduler_is_told(tmp_path, text, flags, want_preemption, want_ignore):
    args = args_of("--config", write(tmp_path, V1BETA2 + text), *flags)
    warnings = settle(args)
    assert args.scheduling.fair_preemption == want_preemption
    assert args.scheduling.ignore_undeclared_resources is want_ignore
    assert not any("preemptionStrategies" in w or "quotaCheckStrategy" in w for w in warnings)


def test_without_a_file_the_gates_still_count():
    args = args_of("--feature-gates", "FairSharingPreemptWithinNominal=false")
    settle(args)
    assert args.scheduling.fair_preemption == FairPreemption((FINAL, INITIAL), False)


def test_v1beta1_fair_sharing_without_strategies_is_kueues_default(tmp_path):
    args = args_of("--config", write(tmp_path, V1BETA1 + "fairSharing: {enable: true}\n"))
    settle(args)
    assert args.scheduling.fair_preemption.strategies == (FINAL, INITIAL)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "resources: {quotaCheckStrategy: Lenient}\n",
            'resources.quotaCheckStrategy: Unsupported value: "Lenient": supported values: '
            '"IgnoreUndeclared", "BlockUndeclared"',
        ),
        (
            "resources: {quotaCheckStrategy: IgnoreUndeclared, excludeResourcePrefixes: [x/]}\n",
            'resources.quotaCheckStrategy: Invalid value: "IgnoreUndeclared": '
            "excludeResourcePrefixes is not allowed when quotaCheckStrategy is IgnoreUndeclared",
        ),
        (
            f"fairSharing: {{preemptionStrategies: [{INITIAL}, {FINAL}]}}\n",
            "fairSharing.preemptionStrategies: ['LessThanInitialShare', "
            "'LessThanOrEqualToFinalShare'] is not one of",
        ),
    ],
)
def test_kueues_refusals(tmp_path, text, message):
    with pytest.raises(ConfigFileError) as err:
        settle(args_of("--config", write(tmp_path, V1BETA2 + textwrap.dedent(text))))
    assert message in str(err.value)


def test_a_strategy_kueue_does_not_read_with_its_gate_off_is_not_refused(tmp_path):
    text = "resources: {quotaCheckStrategy: Lenient}\nfeatureGates: {QuotaCheckStrategy: false}\n"
    args = args_of("--config", write(tmp_path, V1BETA2 + text))
    settle(args)
    assert args.scheduling.ignore_undeclared_resources is False
