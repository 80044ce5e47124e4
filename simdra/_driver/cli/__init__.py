"""The `simdra` command line: `run`, `demo`, `usage`, `fault`, `kinds` and `deviceclasses`,
each a module here that registers its sub-command on one parser (errors are one line,
exit status 2) and handles it. `main` is the console script."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from simdra._driver.cli.parser import OneLineParser, SubParsers, UsageError

__all__ = ["console_main", "main"]

# The sub-commands, in the order `simdra --help` lists them: each a module here with an
# `add_parser`.
COMMANDS = ("run", "fault", "usage", "demo", "kinds", "deviceclasses", "fleet")
DESCRIPTION = ("simdra, a Kubernetes DRA kubelet plugin: simulated or sysfs devices, shared "
               "capacity, CDI specs, state that survives crashes.")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `simdra` console script; returns the exit status."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser = _parser(words[0] if words and words[0] in COMMANDS else None)
    try:
        args, extra = parser.parse_known_args(words)
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


def console_main() -> NoReturn:
    """The `simdra` console script and `python -m simdra`: `main`, then end the process
    at once. When `main` returns, the work is done (a stopped plugin has stopped its
    parts, its files are durable); what is left, tearing down the interpreter's modules
    (the Kubernetes client's thousands of classes, gRPC's), took about half a second of
    every SIGTERM. Output is flushed first; nothing else is left to run at exit."""
    code = main()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nobody to tell
            stream.flush()
    os._exit(code)


def _parser(only: str | None = None) -> OneLineParser:
    """The command line parser; with `only`, of that sub-command alone: the modules of
    the others are not imported (`simdra run` serves the kubelet sooner)."""
    parser = OneLineParser(prog="simdra", description=DESCRIPTION)
    parser.add_argument("--version", action=_VersionAction)
    commands: SubParsers = parser.add_subparsers(dest="command", metavar="COMMAND",
                                                 parser_class=OneLineParser)
    for name in (only,) if only else COMMANDS:
        _add_parser(name)(commands)
    return parser


def _add_parser(name: str) -> Callable[[SubParsers], None]:
    """The `add_parser` of sub-command `name`, importing its module alone."""
    match name:
        case "run":
            from simdra._driver.cli.run import add_parser
        case "fault":
            from simdra._driver.cli.fault import add_parser
        case "usage":
            from simdra._driver.cli.usage import add_parser
        case "demo":
            from simdra._driver.cli.demo import add_parser
        case "kinds":
            from simdra._driver.cli.kinds import add_parser
        case "deviceclasses":
            from simdra._driver.cli.deviceclasses import add_parser
        case _:
            from simdra._driver.cli.fleet import add_parser
    return add_parser


class _VersionAction(argparse.Action):
    """`--version`: argparse's own action wants the text when the parser is built; this
    one looks the version up only when asked."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        sys.stdout.write(f"simdra {_version()}\n")
        parser.exit()


def _version() -> str:
    """The installed package's version (pyproject.toml is the only place it is written)."""
    from importlib import metadata  # only for --version: a fiftieth of a second at start

    try:
        return metadata.version("simdra")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown (not installed)"
