"""Tables are aligned; colour only on a terminal and never with NO_COLOR."""

from __future__ import annotations

import io
import json

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


DOCUMENTS = [{}, [], "text", 5, None, 1.5, [float("nan")], {"a": [], "b": {}},
             {"kind": "X", "devices": [{"name": "é\n\"", "on": True, "off": False, "n": None,
                                        "count": -3, "list": [1, [2, []], ()], "map": {}}]},
             {1: "int", False: "bool", None: "none", 2.5: "float"}]


@pytest.mark.parametrize("data", DOCUMENTS)
def test_json_is_what_json_dumps_writes(data: object) -> None:
    assert render.document(data, "json") == json.dumps(data, indent=2) + "\n"


def test_an_iterator_is_written_as_a_list_item_by_item() -> None:
    out = io.StringIO()
    render.write_json(out, {"rows": ({"n": n} for n in range(5000)), "none": iter(())})
    rows = [{"n": n} for n in range(5000)]
    assert out.getvalue() == json.dumps({"rows": rows, "none": []}, indent=2) + "\n"


@pytest.mark.parametrize("data", [{"a": object()}, {(1, 2): "tuple key"}])
def test_what_json_refuses_is_refused(data: object) -> None:
    with pytest.raises(TypeError):
        render.document(data, "json")
