"""A pod's claims are read from the API server at once, not one after another, and a call
answers within the kubelet's deadline however slow the reads."""

from __future__ import annotations

import pytest

from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.claims.source import MAX_PARALLEL_FETCHES, ApiClaimSource, fetch_claims
from simdra._driver.claims.types import ClaimRef
from simdra._driver.testing.apiserver import APIServer
from tests.claims.builders import RULES

from .builders import DRIVER, ProfileCluster, wants

N = 4


@pytest.fixture
def server():
    with APIServer() as api:
        yield api


def _claims(server, cluster, count):
    refs = [cluster.allocate(f"c{i}", wants("net", "nic", bandwidth="100M")) for i in range(count)]
    for ref in refs:
        server.put_object("resourceclaims", cluster.allocated[ref.uid])
    return refs


def test_the_claims_of_one_call_are_read_at_once(server, tmp_path):
    cluster = ProfileCluster("nic")
    refs = _claims(server, cluster, N)
    # Each read waits up to 5 s unless all N are in flight together: read one after
    # another, they would never be (and the call would take N x 5 s).
    stall = server.stall("get", "resourceclaims", seconds=5, together=N)
    with server.rest_client() as api_client:
        preparer = Preparer(DRIVER, ApiClaimSource(api_client), lambda: cluster.inventory,
                            tmp_path / "cdi", tmp_path / "data", rules=RULES)
        answers = preparer.prepare(refs)
    assert [answers[r.uid].error for r in refs] == [""] * N
    assert stall.max_in_flight == N
    assert server.request_log.count("get", "resourceclaims") == N


def test_at_most_so_many_reads_are_in_flight(server):
    cluster = ProfileCluster("nic")
    count = MAX_PARALLEL_FETCHES + 4
    refs = _claims(server, cluster, count)
    # all go on once MAX_PARALLEL_FETCHES are in flight: more never are
    stall = server.stall("get", "resourceclaims", seconds=5, together=MAX_PARALLEL_FETCHES)
    with server.rest_client() as api_client:
        fetched = fetch_claims(ApiClaimSource(api_client), refs)
    assert all(isinstance(fetched[r.uid], dict) for r in refs)
    assert stall.max_in_flight == MAX_PARALLEL_FETCHES


def test_a_claim_not_read_by_the_deadline_is_that_claims_error(server):
    cluster = ProfileCluster("nic")
    refs = _claims(server, cluster, 2)
    server.stall("get", "resourceclaims", seconds=2, together=3)  # never 3: each waits 2 s
    with server.rest_client() as api_client:
        fetched = fetch_claims(ApiClaimSource(api_client), refs, deadline_s=0.1)
    for ref in refs:
        error = fetched[ref.uid]
        assert isinstance(error, Exception)
        assert f"claim default/{ref.name}: not read from the API server within 0.1 s" in str(error)


def test_a_single_claim_is_read_in_the_calling_thread(server):
    cluster = ProfileCluster("nic")
    (ref,) = _claims(server, cluster, 1)
    with server.rest_client() as api_client:
        source = ApiClaimSource(api_client)
        assert fetch_claims(source, [ref])[ref.uid]["metadata"]["uid"] == ref.uid
        missing = ClaimRef("default", "missing", "dddddddd-0000-4000-8000-000000000004")
        assert "not found" in str(fetch_claims(source, [ref, missing])[missing.uid])
