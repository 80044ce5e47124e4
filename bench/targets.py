"""The rows every node-scale bench prints: a figure, its unit, its target and whether
the run met it. One shape, so `node_targets_bench.py` can print all of them as one table."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    """One line of a targets table: what, the figure, its unit, the target, and whether
    met (None: informational, no target)."""

    label: str
    value: float
    unit: str
    target: str = ""
    passed: bool | None = None

    def render(self) -> str:
        """The row as one printed line."""
        verdict = "" if self.passed is None else ("PASS" if self.passed else "MISS")
        return f"{self.label:<56} {self.value:>9.2f} {self.unit:<5} {self.target:<10} {verdict}"


def table(title: str, rows: Iterable[Row]) -> str:
    """A titled block of rows, ready to print."""
    return "\n".join([title, *(row.render() for row in rows)])
