"""Command line of the extender: `simulate`, `run` (the controller), `crds` and `fields`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from extender.gc_tuning import tune_for_scheduling
from extender.sim.engine import simulate
from extender.sim.loader import Loader, LoadError
from extender.sim.output import to_json, to_table


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m extender", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    sim = commands.add_parser(
        "simulate",
        help="replay Kueue manifests and Jobs through Tower's admission core in virtual time",
        description="Reads multi-document YAML (ResourceFlavor, ClusterQueue, Cohort, LocalQueue, "
        "WorkloadPriorityClass, PriorityClass, Namespace, Job, JobSet) as kubectl apply would, "
        "and prints when each Job is admitted, preempted and finished. Jobs may carry the "
        "annotations tower.dev/sim-arrival (default 0s) and tower.dev/sim-duration (default 60s).",
    )
    sim.add_argument("files", nargs="+", metavar="FILE", help="YAML manifests")
    sim.add_argument("--output", "-o", choices=("table", "json"), default="table")
    sim.add_argument("--seed", type=int, default=0, help="seed for generateName and uids")
    sim.add_argument(
        "--fair-sharing",
        action="store_true",
        help="order and preempt by weighted dominant resource share (Kueue's "
        "fairSharing configuration)",
    )
    run = commands.add_parser(
        "run",
        help="run the controller against a Kubernetes API server",
        description="Watches Jobs, JobSets, Workloads and Kueue's queues; admits queued Jobs "
        "against quota and starts them. Uses in-cluster configuration unless --kubeconfig.",
    )
    from extender.kube.flags import add_arguments

    add_arguments(run)
    crds = commands.add_parser("crds", help="write Kueue's CRDs (v1beta2 stored, v1beta1 served)")
    crds.add_argument("--out", required=True, metavar="DIR", help="directory for the YAML files")
    commands.add_parser(
        "fields", help="print docs/kueue-fields.md: every field of the API and what Tower does"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for bad input, as argparse does)."""
    args = _parser().parse_args(argv)
    if args.command == "run":
        from extender.kube.runtime import run

        return run(args)
    if args.command == "fields":
        from extender.kube.generators.api_fields import page

        sys.stdout.write(page())
        return 0
    if args.command == "crds":
        from pathlib import Path

        from extender.kube.generators.crds import rendered

        out = Path(args.out)
        try:
            out.mkdir(parents=True, exist_ok=True)
            for name, text in rendered().items():
                (out / name).write_text(text)
        except OSError as err:
            print(f"error: --out {out}: {err.strerror or err}", file=sys.stderr)
            return 2
        return 0
    if args.command == "simulate":
        loader = Loader(seed=args.seed)
        try:
            for path in args.files:
                scenario = loader.load(path)
            scenario.not_acted_on.extend(loader.incomplete_groups())
            tune_for_scheduling()
            sim, pending = simulate(scenario, fair_sharing=args.fair_sharing)
        except LoadError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        notes = scenario.not_acted_on
        sys.stdout.write(
            to_json(sim, pending, notes) + "\n"
            if args.output == "json"
            else to_table(sim, pending, notes)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
