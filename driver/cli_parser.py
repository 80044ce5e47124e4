"""The argument parser of every `simdra` command: a bad command line is one line."""

from __future__ import annotations

import argparse
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad command line prints one line and exits 2 instead of the usage
    text followed by the error (`--help` still shows everything)."""

    def error(self, message: str) -> NoReturn:
        """Print `<prog>: <message> (see <prog> --help)` and exit with status 2."""
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")
