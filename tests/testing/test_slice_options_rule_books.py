"""The driver's client-side validator and the API stand-in judge the 1.37 slice fields
(`skipNodeOperations`, `compatibilityGroups`, `partitionTypeAttribute`) alike: the
corpus's 1.37 cases, whose real verdicts are recorded, through both rule books."""

from __future__ import annotations

import pytest

from simdra._driver.core.validation import validate_slice
from simdra._driver.testing.apiserver.validation import slice_errors
from tests.testing.apiserver_corpus import CORPUS, _cases_1_37, body_of

CASES = [case.name for case in _cases_1_37()]


@pytest.mark.parametrize("name", CASES)
def test_both_rule_books_name_the_same_fields(name: str) -> None:
    obj = body_of(CORPUS[name])
    client = sorted({e.field for e in validate_slice(obj)})
    server = sorted({e.field for e in slice_errors(obj)})
    assert client == server


def test_the_cases_hold_valid_and_invalid_slices() -> None:
    verdicts = {name: bool(slice_errors(body_of(CORPUS[name]))) for name in CASES}
    assert sum(verdicts.values()) == 10 and len(verdicts) - sum(verdicts.values()) == 4
