"""`simdra deviceclasses`: the DeviceClasses of device kinds, one per kind
(`<kind>.<driver name>`), as the YAML stream `kubectl apply -f -` takes; with
`--helm-values`, as the chart's `deviceClasses.classes` list instead. With `--kind`, the
classes of those kinds only (a driver's own; they are still checked against simdra's);
without, simdra's own.

deploy/base/deviceclasses.yaml and the chart's values are this command's output
(hack/gen-deviceclasses.sh); the classes themselves are `simdra._driver.devices.device_classes`.
"""

from __future__ import annotations

import argparse
import os
import sys

from simdra._driver.builtins import builtin_kinds
from simdra._driver.cli.kinds import add_kind_flag, kind_specs, registered
from simdra._driver.cli.parser import SubParsers, driver_name
from simdra._driver.devices.kind_registry import KindSet

DEFAULT_DRIVER_NAME = "dra.example.com"


def add_parser(commands: SubParsers) -> None:
    """Register `deviceclasses` with `simdra`'s sub-commands."""
    default = os.environ.get("DRIVER_NAME", DEFAULT_DRIVER_NAME)
    parser = commands.add_parser(
        "deviceclasses",
        help="print the DeviceClasses of the kinds --kind names (without: simdra's own)")
    parser.add_argument("--driver-name", default=default,
                        help=f"as for `simdra run` [env DRIVER_NAME; default {default}]")
    add_kind_flag(parser)
    parser.add_argument("--helm-values", action="store_true",
                        help="print the Helm chart's deviceClasses.classes list instead")
    parser.set_defaults(handler=handle, command_parser=parser)


def handle(args: argparse.Namespace) -> int:
    """Print the classes (or the chart's list of them); exit 2 for a bad flag or kind."""
    from simdra._driver.devices.device_classes import device_classes_yaml, helm_classes_yaml

    driver = driver_name(args.driver_name, "--driver-name")
    kinds = registered(args.kind)  # all of them, so that a clash is still refused
    if kind_specs(args.kind):
        kinds = KindSet(tuple(k for k in kinds.kinds if k not in builtin_kinds().kinds))
    if args.helm_values:
        sys.stdout.write(helm_classes_yaml(kinds))
    else:
        sys.stdout.write(device_classes_yaml(kinds, driver, command_line(driver, args.kind)))
    return 0


def command_line(driver: str, kind_values: list[str]) -> str:
    """The command that prints these classes again, whatever the environment says."""
    specs = kind_specs(kind_values)
    return " ".join(["simdra deviceclasses", "--driver-name", driver,
                     *(["--kind", ",".join(specs)] if specs else [])])
