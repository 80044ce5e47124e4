"""The harness allocator allocates the corpus of `allocator_corpus.py` as a real
kube-scheduler did: the verdicts recorded from the real scheduler are the expected
answers (the e2e differential re-checks them against a live one)."""

from __future__ import annotations

import pytest

from tests.testing.allocator_corpus import (
    CORPUS,
    UNSCHEDULABLE,
    harness_disagreement,
    load_verdicts,
)

SERVER_VERSION, RECORDED = load_verdicts()
# The release after the modelled one, recorded from its pre-release.
NEXT_RELEASE = "1.38"
NEXT_VERSION, NEXT_RECORDED = load_verdicts(NEXT_RELEASE)


def test_every_case_has_a_recorded_real_verdict() -> None:
    assert sorted(RECORDED) == sorted(CORPUS), "re-record the allocator corpus verdicts"
    assert sorted(NEXT_RECORDED) == sorted(CORPUS), "re-record the allocator corpus verdicts"


def test_every_marked_departure_says_why() -> None:
    assert all(case.why for case in CORPUS.values() if case.harness is not None)


@pytest.mark.parametrize("name", list(CORPUS))
def test_harness_allocates_as_the_real_scheduler(name: str) -> None:
    problem = harness_disagreement(CORPUS[name], RECORDED[name])
    assert problem is None, f"{name} (kube-scheduler {SERVER_VERSION}): {problem}"


def test_the_next_release_differs_only_in_capacity_names() -> None:
    # 1.38 reads a capacity request `bw` and `<driver>/bw` as one name; 1.37 (which the
    # harness follows) looks the name up exactly.
    changed = sorted(n for n in CORPUS if NEXT_RECORDED[n] != RECORDED[n])
    assert changed == ["capacity name: plain request, qualified name published",
                       "capacity name: qualified request, plain name published"]


def test_corpus_has_allocations_and_refusals() -> None:
    refused = [n for n, v in RECORDED.items() if any(UNSCHEDULABLE in line for line in v)]
    shared = [n for n, v in RECORDED.items() if any(" share" in line for line in v)]
    assert refused and shared and len(refused) < len(RECORDED)
