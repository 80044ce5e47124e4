"""`simdra demo`: the end-to-end demo (API stand-in, plugin, kubelet emulator, allocator).
The harness is imported only when the demo runs, so `simdra run` never loads it."""

from __future__ import annotations

import argparse

from driver.cli.parser import SubParsers


def add_parser(commands: SubParsers) -> None:
    """Register `demo` with `simdra`'s sub-commands."""
    demo = commands.add_parser("demo", help="end-to-end demo with an API stand-in and kubelet")
    demo.add_argument("--keep", action="store_true", help="keep the demo's temporary directory")
    demo.set_defaults(handler=handle, command_parser=demo)


def handle(args: argparse.Namespace) -> int:
    """Run the demo; returns the exit status."""
    from driver.testing.demo import run_demo

    return run_demo(keep=args.keep)
