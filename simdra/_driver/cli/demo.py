"""`simdra demo`: the end-to-end demo (API stand-in, plugin, kubelet emulator, allocator).
The harness is imported only when the demo runs, so `simdra run` never loads it.

The harness (simdra._driver.testing) and what it needs beyond the plugin (the `demo` extra of
pyproject.toml) are optional: the plugin image has neither. Without them the demo stops
at once with one line saying what to install.

`--profile` picks the fake profiles the plugin simulates (default `gpu,nic`), `--kind`
registers more kinds in it: the demo claims one device of each kind the profiles name.
An unknown profile or a kind that cannot be registered is one line, exit status 2."""

from __future__ import annotations

import argparse
import importlib.util
from importlib import metadata

from simdra._driver.cli.kinds import add_kind_flag, kind_specs, registered
from simdra._driver.cli.parser import SubParsers, UsageError

HARNESS = "simdra._driver.testing"
# pyproject.toml [project.optional-dependencies] demo, by distribution name
# (tests/test_cli_errors.py keeps the two equal).
DEMO_DISTRIBUTIONS = ("kubernetes-validate", "cel-python")
INSTALL_HINT = ("install simdra with its `demo` extra from a source checkout: "
                "pip install '.[demo]' (the plugin image leaves the demo out)")
DEFAULT_PROFILE = "gpu,nic"


def add_parser(commands: SubParsers) -> None:
    """Register `demo` with `simdra`'s sub-commands."""
    demo = commands.add_parser("demo", help="end-to-end demo with an API stand-in and kubelet")
    demo.add_argument("--keep", action="store_true", help="keep the demo's temporary directory")
    demo.add_argument("--profile", default=DEFAULT_PROFILE,
                      help="fake devices: a comma list of the registered kinds' profiles "
                      f"(`simdra kinds` lists them) [default {DEFAULT_PROFILE}]")
    add_kind_flag(demo)
    demo.set_defaults(handler=handle, command_parser=demo)


def missing_parts() -> list[str]:
    """What the demo needs that is not installed: the harness package, the distributions
    of the `demo` extra."""
    missing = [] if _has_module(HARNESS) else [HARNESS]
    for name in DEMO_DISTRIBUTIONS:
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
    return missing


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # a finder that refuses the name
        return False


def handle(args: argparse.Namespace) -> int:
    """Run the demo; returns the exit status."""
    from simdra._driver.devices.profiles import parse_profiles

    kinds = registered(args.kind)
    try:
        parse_profiles(args.profile, kinds)
    except ValueError as err:
        raise UsageError(f"--profile={args.profile!r}: {err}") from None
    if missing := missing_parts():
        raise UsageError(f"not installed: {', '.join(missing)}; {INSTALL_HINT}")
    from simdra._driver.testing.demo import run_demo

    return run_demo(keep=args.keep, profile=args.profile, kinds=kind_specs(args.kind))
