"""Values from the kubelet and the claim that the API server would never accept: refused
per claim before they reach a file or a CDI spec, and echoed only in bounded form."""

from __future__ import annotations

import pytest

from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.claims.source import StaticClaimSource
from simdra._driver.claims.types import ClaimRef
from simdra._driver.core.textlimits import ERROR_LIMIT
from tests.claims.builders import RULES

from .builders import DRIVER, SHARE_1, claim, inventory, result

A = "aaaaaaaa-0000-4000-8000-000000000001"
B = "bbbbbbbb-0000-4000-8000-000000000002"


@pytest.fixture
def node(tmp_path):
    source = StaticClaimSource()
    preparer = Preparer(DRIVER, source, lambda: inventory(), tmp_path / "cdi", tmp_path / "data",
                        rules=RULES)
    return source, preparer, tmp_path


def _files(tmp_path):
    return sorted(p.name for p in (tmp_path / "cdi").iterdir()), sorted(
        p.name for p in (tmp_path / "data" / "claims").iterdir())


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("request", "gpus\x00", "a request name"),
        ("request", "GPUs", "a request name"),
        ("request", "a/b/c", "a request name"),
        ("pool", "node-a//x", "a pool name"),
        ("pool", "Node_A", "a pool name"),
        ("device", "gpu-0\nFORGED=1", "a DNS label"),
    ],
)
def test_bad_names_in_the_allocation_are_refused_per_claim(node, field, value, rule):
    source, preparer, tmp_path = node
    bad = result("gpus", "gpu-0")
    bad[field] = value
    source.put(claim(A, [bad]))
    source.put(claim(B, [result("gpus", "gpu-1")]))
    answers = preparer.prepare([ClaimRef("default", f"claim-{A[:8]}", A),
                                ClaimRef("default", f"claim-{B[:8]}", B)])
    assert f"is not {rule}" in answers[A].error and "[step: plan]" in answers[A].error
    assert answers[B].error == ""
    cdi, records = _files(tmp_path)
    assert A not in "".join(cdi + records)


def test_bad_capacity_names_are_refused(node):
    source, preparer, _ = node
    source.put(claim(A, [result("net", "nic-0", share=SHARE_1,
                                consumed={"band width\n": "1M"})]))
    error = preparer.prepare([ClaimRef("default", f"claim-{A[:8]}", A)])[A].error
    assert "consumedCapacity" in error and "is not a capacity name" in error


@pytest.mark.parametrize(
    "ref",
    [
        ClaimRef("Default", "c", A),
        ClaimRef("default\nFORGED", "c", A),
        ClaimRef("default", "c_1", A),
        ClaimRef("default", "c", "AAAAAAAA-0000-4000-8000-000000000001"),
        ClaimRef("default", "c", "not-a-uid"),
    ],
)
def test_bad_names_from_the_kubelet_are_refused_before_the_api_is_asked(node, ref):
    source, preparer, tmp_path = node
    raw = claim(ref.uid, [result("gpus", "gpu-0")], name=ref.name, namespace=ref.namespace)
    source.put(raw)
    error = preparer.prepare([ref])[ref.uid].error
    assert "refused: field" in error and "[step: check claim uid]" in error
    assert _files(tmp_path) == ([], [])


def test_a_100_kb_namespace_gives_a_bounded_one_line_error(node):
    _, preparer, _ = node
    huge = "n" * 100_000 + "\n2026-01-01T00:00:00.000Z INFO forged"
    ref = ClaimRef(huge, "c", A)
    error = preparer.prepare([ref])[A].error
    assert len(error.encode()) < ERROR_LIMIT
    assert "...[100037 chars]" in error


@pytest.mark.parametrize("where", ["request", "pool", "device", "shareID", "adminAccess"])
def test_every_per_claim_error_stays_under_4_kib(node, where):
    source, preparer, _ = node
    bad = result("gpus", "gpu-0")
    bad[where] = "x" * 100_000 if where != "adminAccess" else ["x" * 100_000]
    source.put(claim(A, [bad] * 20))
    error = preparer.prepare([ClaimRef("default", f"claim-{A[:8]}", A)])[A].error
    assert error and len(error.encode()) <= ERROR_LIMIT



def test_a_claim_ref_from_the_kubelet_prints_on_one_bounded_line():
    """Whatever names reach the DRA socket, a log line naming the claim stays one short
    line: values are clipped and control characters escaped."""
    ref = ClaimRef("ns\nFAKE LOG LINE", "n" * 100_000, "uid\r\x1b[2J")

    text = str(ref)

    assert "\n" not in text and "\r" not in text and "\x1b" not in text
    assert len(text) < 1000
