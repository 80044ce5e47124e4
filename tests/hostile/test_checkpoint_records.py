"""Checkpoint records (`<data dir>/claims/<uid>.json`) are outside input at start-up: a
disk can tear them, an operator can edit them, and a checksum is no signature (anyone
who can write the file can compute it). Whatever a record holds, reading it gives a
claim or a ValueError, the reason shown is one bounded line, and recovery writes
nothing outside the data directory and the CDI root."""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.claims.source import StaticClaimSource
from simdra._driver.claims.store.checkpoint import REASON_LIMIT, read_records
from simdra._driver.claims.store.record import decode_record, record_checksum
from simdra._driver.claims.types import ClaimRef
from tests.claims.builders import DRIVER, RULES, SHARE_1, claim, inventory, result

from .strategies import (
    PATHS,
    assert_one_line,
    inside,
    json_values,
    mutated,
    to_json_bytes,
    tree_snapshot,
)

A = "aaaaaaaa-0000-4000-8000-000000000001"
B = "bbbbbbbb-0000-4000-8000-000000000002"


# Device metadata on: its files are written at recovery, under a root the record names.
METADATA = True


def _prepared(root: Path, uid: str = A) -> tuple[Preparer, StaticClaimSource, ClaimRef]:
    source = StaticClaimSource()
    raw = claim(uid, [result("gpus", "gpu-0"),
                      result("net", "nic-0", share=SHARE_1, consumed={"bandwidth": "1M"})])
    source.put(raw)
    preparer = Preparer(DRIVER, source, lambda: inventory(), root / "cdi", root / "data",
                        device_metadata=METADATA, rules=RULES)
    ref = ClaimRef("default", raw["metadata"]["name"], uid)
    assert preparer.prepare([ref])[uid].error == ""
    return preparer, source, ref


def _valid_record() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as root:
        _prepared(Path(root))
        return json.loads((Path(root) / "data" / "claims" / f"{A}.json").read_text())


VALID = _valid_record()
VALID_BYTES = to_json_bytes(VALID)


def _signed(record: Any) -> bytes:
    """`record` with the checksum it needs to pass as untouched (what a hand-written
    record carries)."""
    if isinstance(record, dict):
        # too deep to sign: decode refuses it by its depth anyway
        with contextlib.suppress(RecursionError):
            record = {**record, "checksum": record_checksum(record)}
    return to_json_bytes(record)


# Stands for a directory outside the plugin's (the test's `outside`), in hostile records.
OUTSIDE = "@OUTSIDE@"

# Fields that name files or directories, with values that lead out of them.
_PATH_FIELDS = [("cdiFile",), ("deviceMetadata", "root"), ("deviceMetadata", "podClaimName"),
                ("claim", "uid"), ("claim", "name"), ("claim", "namespace")]


@st.composite
def _path_payloads(draw: st.DrawFn) -> dict[str, Any]:
    record = json.loads(VALID_BYTES)
    payload = record["payload"]
    if payload.get("deviceMetadata") is None:
        payload["deviceMetadata"] = {"root": "/tmp", "podClaimName": None}
    for field in draw(st.lists(st.sampled_from(_PATH_FIELDS), min_size=1, max_size=3)):
        *parents, key = field
        target = payload
        for parent in parents:
            target = target[parent]
        target[key] = draw(st.sampled_from([*PATHS, OUTSIDE, f"{OUTSIDE}/x", "../../../outside"]))
    if draw(st.booleans()):
        unit = payload["units"][draw(st.integers(0, len(payload["units"]) - 1))]
        unit["requests"] = [draw(st.sampled_from(PATHS))]
    return record


record_bytes = st.one_of(
    st.binary(max_size=200),
    json_values().map(to_json_bytes),
    mutated(VALID).map(to_json_bytes),  # checksum broken: a torn or edited file
    mutated(VALID).map(_signed),  # checksum fixed: a hand-written record
    mutated(VALID["payload"], 4).map(lambda p: _signed({**VALID, "payload": p})),
    _path_payloads().map(_signed),
    st.integers(1, len(VALID_BYTES) - 1).map(lambda n: VALID_BYTES[:n]),  # torn
    st.sampled_from([
        b"[" * 100_000 + b"]" * 100_000,
        b'{"version": ' + b"9" * 5_000 + b"}",  # over Python's int digit limit
        b'{"version": 1e999999}',
        b"\xff\xfe" + VALID_BYTES,
        VALID_BYTES.replace(b'"version":3', b'"version":true'),
    ]),
)


@given(data=record_bytes)
def test_a_record_decodes_to_its_claim_or_a_value_error(data: bytes) -> None:
    """decode_record: a PreparedClaim of the uid the file is named for, or ValueError
    (IncompatibleRecord among them), never TypeError, KeyError, RecursionError..."""
    try:
        prepared = decode_record(data, A)
    except ValueError:
        return
    assert prepared.claim.uid == A


@given(data=record_bytes)
def test_an_unreadable_record_is_reported_on_one_bounded_line(data: bytes) -> None:
    """read_records over a directory holding the record: it is read, or reported as a
    CorruptRecord whose reason is one line of at most REASON_LIMIT characters."""
    with tempfile.TemporaryDirectory() as root:
        directory = Path(root)
        (directory / f"{A}.json").write_bytes(data)
        records, problems = read_records(directory)
    assert len(records) + len(problems) == 1
    for problem in problems:
        assert_one_line(problem.reason, limit=4 * REASON_LIMIT)
        assert len(problem.reason) <= REASON_LIMIT + 20


def test_recovery_from_hostile_records_writes_only_in_its_directories(tmp_path: Path) -> None:
    """A plugin starting over a data directory whose records are hostile: start-up
    recovery (temp files, orphan specs, CDI specs and device metadata restored from
    the records) never fails and never writes outside the data directory and the CDI
    root; the node then still prepares a good claim."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.json").write_text("{}")

    @settings(max_examples=50)
    @given(data=st.one_of(_path_payloads().map(_signed), mutated(VALID).map(_signed),
                          mutated(VALID["payload"], 4).map(
                              lambda p: _signed({**VALID, "payload": p}))))
    def check(data: bytes) -> None:
        root = Path(tempfile.mkdtemp(dir=tmp_path))
        try:
            recover(root, data)
        finally:
            shutil.rmtree(root)

    def recover(root: Path, data: bytes) -> None:
        _prepared(root)
        if OUTSIDE.encode() in data:
            data = _signed(json.loads(data.replace(OUTSIDE.encode(), str(outside).encode())))
        (root / "data" / "claims" / f"{A}.json").write_bytes(data)
        owned = inside(root / "data", root / "cdi")
        before = tree_snapshot(tmp_path, owned)

        source = StaticClaimSource()
        raw = claim(B, [result("gpus", "gpu-1")])
        source.put(raw)
        preparer = Preparer(DRIVER, source, lambda: inventory(), root / "cdi", root / "data",
                            device_metadata=METADATA, rules=RULES)

        assert tree_snapshot(tmp_path, owned) == before
        answer = preparer.prepare([ClaimRef("default", raw["metadata"]["name"], B)])[B]
        assert answer.error == "" or "gpu-1" in answer.error  # kept reserved by A's spec
        assert tree_snapshot(tmp_path, owned) == before

    check()
