"""`--kind`, shared by the sub-commands that know device kinds, and `simdra kinds`, which
lists the registered kinds with their profiles, config kinds and DeviceClass.

A kind that cannot be registered (it fails to import, shares a name, a profile or a
config kind with another, declares a bad env key) is one line naming it, the other side
and the fix, and exit status 2: nothing is half-registered.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from simdra._driver.builtins import BUILTIN
from simdra._driver.cli.parser import SubParsers, UsageError
from simdra._driver.devices.kind_registry import (
    KindRegistrationError,
    KindSet,
    kind_spec,
    load_kinds,
)

# The sub-commands that take --kind (simdra.main adds its kinds to them).
TAKES_KIND = ("run", "demo", "kinds", "deviceclasses")
KIND_HELP = ("device kinds to register next to simdra's own: package.module:Class, a comma "
             "list or the flag repeated [env KINDS]")


def add_kind_flag(parser: argparse.ArgumentParser) -> None:
    """`--kind` on a sub-command; its values start from env KINDS."""
    start = [os.environ["KINDS"]] if os.environ.get("KINDS") else []
    parser.add_argument("--kind", action="append", default=start, metavar="MODULE:CLASS",
                        help=KIND_HELP)


def kind_specs(values: Sequence[str]) -> tuple[str, ...]:
    """The `package.module:Class` specs of the --kind values (comma lists, repeated)."""
    specs = (spec.strip() for value in values for spec in value.split(","))
    return tuple(dict.fromkeys(spec for spec in specs if spec))


def registered(values: Sequence[str]) -> KindSet:
    """simdra's kinds (its catalog's) plus those --kind names; UsageError (exit 2) when
    they cannot all be registered."""
    try:
        return load_kinds(BUILTIN.kinds, kind_specs(values))
    except KindRegistrationError as err:
        raise UsageError(f"--kind: {err}") from None


def with_kinds(argv: Sequence[str] | None, kinds: Sequence[type]) -> list[str] | None:
    """`argv` with `--kind` for each class in `kinds` after a sub-command that takes it
    (`simdra.main(kinds=...)`); unchanged without kinds."""
    if not kinds:
        return None if argv is None else list(argv)
    import sys

    words = list(sys.argv[1:] if argv is None else argv)
    if not words or words[0] not in TAKES_KIND:
        return words
    return [words[0], "--kind", ",".join(kind_spec(kind) for kind in kinds), *words[1:]]


def add_parser(commands: SubParsers) -> None:
    """Register `kinds` with `simdra`'s sub-commands."""
    kinds = commands.add_parser("kinds", help="list the registered device kinds")
    add_kind_flag(kinds)
    kinds.set_defaults(handler=handle, command_parser=kinds)


def handle(args: argparse.Namespace) -> int:
    """Print one block per registered kind."""
    for kind in registered(args.kind).kinds:
        print(f"{kind.name}  ({kind_spec(kind)})")
        if kind.description():
            print(f"  {kind.description()}")
        for profile in kind.profiles:
            print(f"  profile {profile.name}: {profile.description}".rstrip(": "))
        for handler in kind.config_handlers:
            print(f"  config {handler.api_version} {handler.kind}")
        if kind.env_attributes:
            pairs = ", ".join(f"{a}->{k}" for a, k in kind.env_attributes.items())
            print(f"  env {pairs}")
    return 0
