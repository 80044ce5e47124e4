"""Tables are aligned; colour only on a terminal and never with NO_COLOR."""

from __future__ import annotations

import io

import pytest

from simdra._driver.dra_cli import render


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_columns_align_and_the_last_is_not_padded() -> None:
    text = render.table(["A", "BB", "C"], [["long", "x", "y"], ["s", "yyy", "z"]])
    assert text.splitlines() == ["A     BB   C", "long  x    y", "s     yyy  z"]


def test_colour_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert not render.use_colour(io.StringIO())
    assert render.use_colour(_Terminal())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not render.use_colour(_Terminal())


def test_coloured_header_and_health() -> None:
    text = render.table(["HEALTH"], [["Unhealthy"]], colour=True)
    assert text.startswith(render.BOLD) and f"{render.RED}Unhealthy" in text
