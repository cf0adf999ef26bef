"""`kubectl tower`: the plugin's command line (the console script `kubectl-tower`).

Tower's own questions (why, queue, forecast) and kueuectl's verbs (list, stop, resume,
create), each in its module; this one reads the command line, connects with the current
kubeconfig, runs the verb, and turns every failure into one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from extender.kube.api.client import ApiError, ConfigError, KubeError
from extender.kube.api.resources import KUEUE_GROUP, KUEUE_VERSION
from extender.kube.plugin import create, forecast, hold, listing, queue, takeover, why
from extender.kube.plugin.connect import Invocation, connect, kubeconfig_path
from extender.kube.plugin.output import CliError, one_line


class UsageError(Exception):
    """A command line argparse refused."""


class _Parser(argparse.ArgumentParser):
    """argparse, with kubectl's habits: no abbreviated flags, and one line when refused."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def _connection_flags(parser: argparse.ArgumentParser, *, leaf: bool) -> None:
    """The flags every command takes, before or after its name. A command's own copy sets
    nothing unless given, so it does not undo one given before the command."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if leaf else value

    parser.add_argument("--kubeconfig", default=default(None), help="the kubeconfig file")
    parser.add_argument("--context", default=default(None), help="the kubeconfig context")
    parser.add_argument(
        "-n", "--namespace", default=default(None), help="the namespace (else the context's)"
    )
    parser.add_argument(
        "-v", dest="verbose", action="count", default=default(0), help="say how it answered"
    )
    parser.add_argument("--v", dest="level", type=int, default=default(0), help="-v level")


def parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    _connection_flags(common, leaf=True)
    top = _Parser(
        prog="kubectl tower",
        description="Why is my job pending, where is it in line, and kueuectl's verbs.",
    )
    _connection_flags(top, leaf=False)
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for verb in (why, queue, forecast, listing, hold, create, takeover):
        verb.register(sub, common)
    return top


def main(argv: Sequence[str] | None = None, *, clock: Callable[[], float] = time.time) -> int:
    """Run one command; 0 when it answered, 1 with one line on stderr when it could not."""
    try:
        args = parser().parse_args(argv)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    try:
        client, context_namespace = connect(kubeconfig_path(args.kubeconfig), args.context)
        if not client.discover(f"{KUEUE_GROUP}/{KUEUE_VERSION}"):
            raise CliError(
                f"Kueue's CRDs are not installed: the API server does not serve "
                f"{KUEUE_GROUP}/{KUEUE_VERSION} (kubectl apply -f deploy/crds/)"
            )
        invocation = Invocation(
            client,
            args.namespace or context_namespace,
            namespace_given=bool(args.namespace),
            now=clock(),
            verbosity=max(args.verbose, args.level),
        )
        text = args.run(invocation, args)
    except (CliError, ConfigError) as err:
        print(f"error: {one_line(str(err))}", file=sys.stderr)
        return 1
    except ApiError as err:
        prefix = "no access: " if err.forbidden else ""
        print(f"error: {prefix}{one_line(str(err))}", file=sys.stderr)
        return 1
    except KubeError as err:
        print(f"error: cannot reach the API server: {one_line(str(err))}", file=sys.stderr)
        return 1
    if text:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
