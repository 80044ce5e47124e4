"""Records of other format versions: older ones are read, newer ones we understand are
read, newer ones we do not keep their devices reserved; none is rewritten or lost.

The fixtures under tests/fixtures/records/ are one claim (A: gpu-0 whole, a share of
nic-0) in three formats: `v1-*` written by simdra 0.1.0 (format 1, checksum of the
payload alone); `v3-*` a later format that only adds fields (in the envelope, the
payload, its units and devices) and so keeps compatVersion 2; `v4-*` one that reshapes
the payload and so says compatVersion 4.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.claims.source import StaticClaimSource
from simdra._driver.claims.store.checkpoint import Checkpoint
from simdra._driver.claims.store.record import to_payload
from simdra._driver.claims.types import ClaimRef
from tests.claims.builders import RULES

from .builders import DRIVER, SHARE_1, claim, inventory, result

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "records"
A = "aaaaaaaa-0000-4000-8000-000000000001"
B = "bbbbbbbb-0000-4000-8000-000000000002"
V1, V3, V4 = "v1-gpu-and-nic-share.json", "v3-compatible-extra-fields.json", "v4-incompatible.json"


class Node:
    """The directories a previous driver left, with one record of claim A in them."""

    def __init__(self, tmp_path: Path, fixture: str) -> None:
        self.cdi, self.data = tmp_path / "cdi", tmp_path / DRIVER
        self.fixture = (FIXTURES / fixture).read_bytes()
        payload = json.loads(self.fixture)["payload"]
        self.cdi.mkdir(parents=True)
        (self.cdi / payload["cdiFile"]).write_text(json.dumps(payload["cdiSpec"]))
        self.record = Checkpoint(self.data).path_for(A)
        self.record.write_bytes(self.fixture)
        self.source = StaticClaimSource()
        share = result("net/sub", "nic-0", share=SHARE_1, consumed={"bandwidth": "1500m"})
        self.ref = self.add(A, result("gpus", "gpu-0"), share)

    def add(self, uid: str, *results: dict, name: str | None = None) -> ClaimRef:
        raw = claim(uid, list(results), name=name)
        self.source.put(raw)
        return ClaimRef("default", raw["metadata"]["name"], uid)

    def preparer(self) -> Preparer:
        return Preparer(DRIVER, self.source, lambda: inventory(gpus=2, nics=1), self.cdi, self.data,
                        rules=RULES)


def _loaded(tmp_path: Path, fixture: str):
    node = Node(tmp_path / fixture, fixture)
    records, problems = Checkpoint(node.data).load_all()
    assert problems == []
    return records[A]


def test_a_format_1_record_is_read_upgraded_in_memory_and_left_as_written(tmp_path):
    node = Node(tmp_path, V1)
    preparer = node.preparer()
    assert list(preparer.prepared()) == [A]
    # upgraded without losing or inventing anything (device metadata came later: off)
    assert to_payload(preparer.prepared()[A]) == {**json.loads(node.fixture)["payload"],
                                                  "deviceMetadata": None}
    answer = preparer.prepare([node.ref])[A]
    assert answer.error == "" and [d.device_name for d in answer.devices] == ["gpu-0", "nic-0"]
    other = node.add(B, result("gpus", "gpu-0"), name="other")
    assert "gpu-0" in preparer.prepare([other])[B].error  # its devices are still held
    assert node.record.read_bytes() == node.fixture  # read, never rewritten


def test_a_newer_record_that_only_adds_fields_is_read(tmp_path):
    newer = _loaded(tmp_path, V3)
    assert newer == _loaded(tmp_path, V1)  # the fields this driver does not know: ignored
    node = Node(tmp_path / "node", V3)
    answer = node.preparer().prepare([node.ref])[A]
    assert answer.error == "" and [d.device_name for d in answer.devices] == ["gpu-0", "nic-0"]
    assert node.record.read_bytes() == node.fixture


def test_a_record_only_a_newer_driver_reads_keeps_its_devices_with_one_clear_line(
    tmp_path, caplog
):
    node = Node(tmp_path, V4)
    with caplog.at_level(logging.ERROR):
        preparer = node.preparer()
    (line,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert f"claim uid {A}" in line and "\n" not in line
    assert "record format version 4 needs a driver that reads format 4 or later" in line
    assert "this driver reads formats 1 to 3" in line
    assert ("node-a", "gpu-0", A) in preparer.ledger.reserved()
    assert "format version 4" in preparer.prepare([node.ref])[A].error
    other = node.add(B, result("gpus", "gpu-0"), name="other")
    assert "reserved by an unreadable checkpoint record" in preparer.prepare([other])[B].error
    assert node.record.read_bytes() == node.fixture  # kept as it is for a newer driver


def test_unpreparing_a_newer_drivers_record_moves_it_aside_and_frees_its_devices(tmp_path):
    node = Node(tmp_path, V4)
    preparer = node.preparer()
    assert preparer.unprepare([node.ref])[A].error == ""
    assert preparer.ledger.reserved() == []
    (moved,) = node.record.parent.glob(f"{A}.json.corrupt*")
    assert moved.read_bytes() == node.fixture  # nothing lost


@pytest.mark.parametrize("fixture", [V1, V3, V4])
def test_the_fixtures_are_sealed(fixture):
    """Each fixture's checksum is valid: what the tests see is a version question,
    never a checksum mismatch."""
    from simdra._driver.claims.store.record import record_checksum

    record = json.loads((FIXTURES / fixture).read_bytes())
    assert record["checksum"] == record_checksum(record)
