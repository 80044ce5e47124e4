"""The `simdra` command line: `run`, `demo`, `usage` and `fault`, each a module here that
registers its sub-command on one parser (errors are one line, exit status 2) and handles
it. `main` is the console script."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib import metadata

from driver.cli import demo, fault, run, usage
from driver.cli.parser import OneLineParser, UsageError

__all__ = ["main"]

DESCRIPTION = ("simdra, a Kubernetes DRA kubelet plugin: simulated or sysfs devices, shared "
               "capacity, CDI specs, state that survives crashes.")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `simdra` console script; returns the exit status."""
    parser = _parser()
    try:
        args, extra = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
        if extra:  # named by the sub-command whose line it is, not by `simdra`
            getattr(args, "command_parser", parser).error(
                f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exit_:  # --help, --version (0) or a bad command line (2)
        return int(exit_.code or 0)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return int(args.handler(args) or 0)
    except UsageError as err:
        print(f"simdra {args.command}: {err}", file=sys.stderr)
        return 2


def _parser() -> OneLineParser:
    parser = OneLineParser(prog="simdra", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"simdra {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND",
                                     parser_class=OneLineParser)
    for command in (run, fault, usage, demo):
        command.add_parser(commands)
    return parser


def _version() -> str:
    """The installed package's version (pyproject.toml is the only place it is written)."""
    try:
        return metadata.version("simdra")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown (not installed)"
