"""What every `simdra` command parses with: a parser whose errors are one line, and the
checks that turn a flag's text into a value or a UsageError naming the flag."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn, TypeAlias

from simdra._driver.core.flag_values import FlagValueError, bounded_int, bounded_number

_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}

# What a sub-command module registers with `simdra`'s parser (generic only for typing).
if TYPE_CHECKING:
    SubParsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    SubParsers = argparse._SubParsersAction


class UsageError(Exception):
    """A flag has a bad value; the message names the flag and the problem."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad command line prints one line and exits 2 instead of the usage
    text followed by the error (`--help` still shows everything)."""

    def error(self, message: str) -> NoReturn:
        """Print `<prog>: <message> (see <prog> --help)` and exit with status 2."""
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def check(value: str, flag: str, ok: Callable[[str], bool], rule: str) -> str:
    """`value` if `ok(value)`, else UsageError `<flag>=<value>: <rule>`."""
    if not ok(value):
        raise UsageError(f"{flag}={value!r}: {rule}")
    return value


def integer(value: str, flag: str, low: int, high: int) -> int:
    """An integer in [low, high]."""
    try:
        return bounded_int(value, flag, low, high)
    except FlagValueError as err:
        raise UsageError(str(err)) from None


def number(value: str, flag: str, low: float, high: float) -> float:
    """A number in [low, high]."""
    try:
        return bounded_number(value, flag, low, high)
    except FlagValueError as err:
        raise UsageError(str(err)) from None


def boolean(value: str, flag: str) -> bool:
    """true/false (also 1/0, yes/no), any case."""
    try:
        return _BOOLEANS[str(value).strip().lower()]
    except KeyError:
        raise UsageError(f"{flag}={value!r}: must be true or false") from None


def driver_name(value: str, flag: str) -> str:
    """A DRA driver name, by the API server's rule (the one the slices are checked with)."""
    from simdra._driver.core.validation import driver_name_errors

    errors = driver_name_errors(value, flag)
    if errors:
        raise UsageError(f"{flag}={value!r}: {errors[0].message}")
    return value
