"""The stand-in answers the corpus of `apiserver_corpus.py` as a real kube-apiserver did:
the verdicts recorded from the real server are the expected answers (the e2e differential
re-checks them against a live one)."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from simdra._driver.testing.apiserver import APIServer
from tests.testing.apiserver_corpus import (
    CORPUS,
    MODELLED_RELEASE,
    PATHS,
    Verdict,
    body_of,
    disagreement,
    load_verdicts,
    verdict_of,
)

SERVER_VERSION, RECORDED = load_verdicts()
# The release after the modelled one, recorded from its pre-release: the stand-in given
# its version answers as it did.
NEXT_RELEASE = "1.38"
NEXT_VERSION, NEXT_RECORDED = load_verdicts(NEXT_RELEASE)
Call = Callable[[str, str, Any], tuple[int, dict[str, Any]]]


@pytest.fixture(scope="module")
def call() -> Iterator[Call]:
    """Plain HTTP to one stand-in for the whole corpus (every case has its own name)."""
    yield from _stand_in(MODELLED_RELEASE)


@pytest.fixture(scope="module")
def call_next() -> Iterator[Call]:
    """The same, answering as the next release (NEXT_RELEASE)."""
    yield from _stand_in(NEXT_RELEASE)


def _stand_in(release: str) -> Iterator[Call]:
    with APIServer(kubernetes_version=release) as server:

        def request(method: str, path: str, body: Any) -> tuple[int, dict[str, Any]]:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            try:
                headers = {"Content-Type": "application/json"}
                conn.request(method, path, body=json.dumps(body).encode(), headers=headers)
                response = conn.getresponse()
                return response.status, json.loads(response.read() or b"{}")
            finally:
                conn.close()

        yield request


def _create(call: Call, obj: dict[str, Any]) -> Verdict:
    return verdict_of(*call("POST", f"{PATHS[obj['kind']]}?fieldValidation=Strict", obj))


def test_every_case_has_a_recorded_real_verdict() -> None:
    assert sorted(RECORDED) == sorted(CORPUS), "re-record the corpus verdicts"


def test_recorded_verdicts_name_fields_only_for_422() -> None:
    wrong = {n: v for n, v in RECORDED.items() if bool(v.fields) != (v.code == 422)}
    assert not wrong


@pytest.mark.parametrize("name", list(CORPUS))
def test_stand_in_answers_as_the_real_server_did(name: str, call: Call) -> None:
    case = CORPUS[name]
    ours = _create(call, body_of(case))
    real = RECORDED[name]
    if case.stand_in is not None:
        assert ours == case.stand_in, f"{name}: stand-in {ours}, expected {case.stand_in}"
        assert ours != real, f"{name}: now agrees with kube-apiserver {SERVER_VERSION} ({real})"
        return
    problem = disagreement(real, ours)
    assert problem is None, f"{name} (kube-apiserver {SERVER_VERSION}): {problem}"


@pytest.mark.parametrize("name", list(CORPUS))
def test_stand_in_as_the_next_release_answers_as_it_did(name: str, call_next: Call) -> None:
    case = CORPUS[name]
    ours = _create(call_next, body_of(case))
    if case.stand_in is not None:
        assert ours == case.stand_in, f"{name}: stand-in {ours}, expected {case.stand_in}"
        return
    problem = disagreement(NEXT_RECORDED[name], ours)
    assert problem is None, f"{name} (kube-apiserver {NEXT_VERSION}): {problem}"


def test_the_next_release_differs_only_in_claim_capacity_checks() -> None:
    changed = sorted(n for n in CORPUS if NEXT_RECORDED[n] != RECORDED[n])
    assert changed == ["claim: 33 capacity requests", "claim: bad capacity name",
                       "claim: negative capacity request"]


def test_corpus_covers_rejects_of_every_kind() -> None:
    kinds = {body_of(c)["kind"] for n, c in CORPUS.items() if RECORDED[n].code == 422}
    assert kinds == set(PATHS)
    assert any(v.code == 400 for v in RECORDED.values())


# Where a slice's counter sets may go changed in 1.35; the stand-in serves either rule.
_COUNTER_PLACEMENT = ("slice: counters and devices together", "slice: counters only")


@pytest.mark.parametrize("release", ["1.34", "1.35", "1.37"])
def test_counter_placement_as_each_release_answered(release: str) -> None:
    _, recorded = load_verdicts(release)
    with APIServer(kubernetes_version=release) as server:
        for name in _COUNTER_PLACEMENT:
            obj = body_of(CORPUS[name])
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            try:
                conn.request("POST", f"{PATHS[obj['kind']]}?fieldValidation=Strict",
                             body=json.dumps(obj).encode(),
                             headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                ours = verdict_of(response.status, json.loads(response.read() or b"{}"))
            finally:
                conn.close()
            assert disagreement(recorded[name], ours) is None, (release, name, str(ours))
        client = server.rest_client()
        version = client.request("GET", "/version")
        client.close()
        assert (version["minor"], version["gitVersion"]) == (release.split(".")[1],
                                                              f"v{release}.0-simdra")
