"""The `kubectl-dra` console script (`kubectl dra ...` once it is on PATH).

Exit status: 0, 1 for a failure (one line on stderr: no kubeconfig, access refused,
no resource.k8s.io/v1, the API server unreachable), 2 for a bad command line.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TextIO

from simdra._driver.cli.parser import OneLineParser
from simdra._driver.dra_cli.connect import CommandError, connect, error_line
from simdra._driver.dra_cli.gather import ListFailed
from simdra._driver.kubeapi.client import RestClient

PROG = "kubectl-dra"
Command = Callable[[argparse.Namespace, RestClient, TextIO], int]


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    """Run one command; returns the exit status."""
    out, err = out or sys.stdout, err or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exit_:  # --help (0) or a bad command line (2, one line printed)
        return int(exit_.code or 0)
    try:
        client = connect(args.kubeconfig)
        try:
            with collector_paused():
                status: int = args.run(args, client, out)
            return status
        finally:
            client.close()
    except CommandError as problem:
        err.write(f"{PROG}: {problem}\n")
        return problem.status
    except ListFailed as failed:
        err.write(f"{PROG}: {error_line(failed)}\n")
        return 1
    except KeyboardInterrupt:
        return 130


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a command runs. A command decodes about a
    million small objects (1,000 nodes x 8 GPUs, 3,000 claims) that all live until it
    ends, and the collector, started every 700 allocations, went through them again and
    again: half of the CPU time of `devices`. They form no cycles: reference counting
    frees them as before (`top --watch` collects between refreshes)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def console_main() -> None:
    """Entry point of the console script."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # `kubectl dra devices | head`
        code = 0
    sys.exit(code)


def build_parser() -> argparse.ArgumentParser:
    """The command line: devices, top, why."""
    common = OneLineParser(add_help=False)
    common.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, "
                        "~/.kube/config, then the pod's service account)")
    parser = OneLineParser(prog=PROG, description="DRA devices, allocations and why a "
                           "claim is not allocated, for every DRA driver (resource.k8s.io/v1).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    devices = sub.add_parser("devices", parents=[common], help="one row per device")
    devices.add_argument("--node", help="only devices of this node")
    devices.add_argument("--driver", help="only devices of this driver")
    devices.add_argument("--class", dest="device_class", metavar="CLASS",
                         help="only devices this DeviceClass's selectors match")
    devices.add_argument("-o", "--output", choices=("table", "wide", "json", "yaml"),
                         default="table")
    devices.set_defaults(run=_devices)
    top = sub.add_parser("top", parents=[common], help="allocated and total per group")
    top.add_argument("--by", choices=("node", "driver", "class"), default="node")
    top.add_argument("--watch", "-w", action="store_true", help="refresh until interrupted")
    top.add_argument("--interval", type=_seconds, default=2.0, help="seconds between refreshes")
    top.add_argument("--iterations", type=int, default=0, help=argparse.SUPPRESS)
    top.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    top.set_defaults(run=_top)
    why = sub.add_parser("why", parents=[common], help="why a pod's or claim's devices "
                         "are not allocated")
    why.add_argument("target", metavar="POD|CLAIM", help="NAME, pod/NAME or claim/NAME")
    why.add_argument("-n", "--namespace", default="default")
    why.add_argument("--max-devices", type=int, default=20,
                     help="devices listed per request (the rest are counted)")
    why.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text")
    why.set_defaults(run=_why)
    return parser


def _seconds(text: str) -> float:
    value = float(text)
    if not 0.1 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r}: between 0.1 and 3600 seconds")
    return value


def _devices(args: argparse.Namespace, client: RestClient, out: TextIO) -> int:
    from simdra._driver.dra_cli.commands import run_devices

    return run_devices(args, client, out)


def _top(args: argparse.Namespace, client: RestClient, out: TextIO) -> int:
    from simdra._driver.dra_cli.commands import run_top

    return run_top(args, client, out)


def _why(args: argparse.Namespace, client: RestClient, out: TextIO) -> int:
    from simdra._driver.dra_cli.why_cmd import run_why

    return run_why(args, client, out)
