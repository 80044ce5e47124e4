"""The driver's client-side validator and the API stand-in's own rule book judge the same
slices alike.

The two are written apart (an import-linter contract keeps the stand-in from importing
`simdra._driver.core.validation`), so a rule one of them gets wrong shows up here as a
disagreement rather than passing both. The slices are generated from the every-field
fixture (`tests/fixtures/slice_variants.py`): valid ones, and invalid ones each one step
away from a valid one. Both must accept, or both reject naming the same fields.
"""

from __future__ import annotations

from typing import Any

import pytest

from simdra._driver.core.validation import validate_slice
from simdra._driver.testing.apiserver.schema import schema_errors
from simdra._driver.testing.apiserver.validation import slice_errors
from tests.fixtures.slice_variants import invalid_slices, valid_slices

VALID = dict(valid_slices())
INVALID = dict(invalid_slices())


def _client(obj: dict[str, Any]) -> list[str]:
    return sorted({e.field for e in validate_slice(obj)})


def _server(obj: dict[str, Any]) -> list[str]:
    return sorted({e.field for e in slice_errors(obj)})


@pytest.mark.parametrize("name", list(VALID))
def test_both_accept_the_valid_slices(name: str) -> None:
    obj = VALID[name]
    assert schema_errors(obj) == []  # the rule books, not the schema, are compared
    assert _client(obj) == [] and _server(obj) == []


@pytest.mark.parametrize("name", list(INVALID))
def test_both_reject_the_invalid_slices_naming_the_same_fields(name: str) -> None:
    obj = INVALID[name]
    assert schema_errors(obj) == []
    server = _server(obj)
    assert server, f"the stand-in accepts {name}"
    assert _client(obj) == server


def test_the_generated_cases_cover_every_kind_of_breach() -> None:
    names = " ".join(INVALID)
    for kind in ("placeholder", "node choices", "two values", "items at"):
        assert kind in names
    assert len(INVALID) >= 20
