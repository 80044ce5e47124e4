"""The fault control file (`<data dir>/faults.json`) is outside input: `simdra fault`
writes it, but so can anyone with the data directory (CI scripts do). Whatever it holds,
the plugin's reader gives faults or a FaultError whose text is one bounded line, keeps
the last good faults in force, and writes nothing."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from simdra._driver.devices.faults import FaultError, FaultFile, FaultState, fault_file_path

from .strategies import (
    PATHS,
    assert_one_line,
    hostile_text,
    json_values,
    mutated,
    numbers,
    to_json_bytes,
    tree_snapshot,
)

VALID: dict[str, Any] = {
    "version": 1,
    "devices": {
        "gpu-0": {"health": "unhealthy", "message": "fan"},
        "node-a/gpu-1": {"removed": True,
                         "failPrepares": {"count": 2, "message": "boom"},
                         "slowPrepares": {"count": 1, "seconds": 0.5}},
    },
}

# The longest error the reader may give: the file's path, a target shown in 80
# characters, a field name and a value shown bounded.
ERROR_BOUND = 1_200


@st.composite
def _entries(draw: st.DrawFn) -> dict[str, Any]:
    """A valid file with one entry's fields set to hostile values of every type."""
    doc = json.loads(json.dumps(VALID))
    key = draw(st.one_of(st.sampled_from([*PATHS, "gpu-0", "pool/gpu-0"]), hostile_text))
    entry = {draw(st.sampled_from(["health", "message", "removed", "failPrepares",
                                   "slowPrepares"])): draw(json_values(6))}
    if draw(st.booleans()):
        entry["slowPrepares"] = {"count": draw(numbers), "seconds": draw(numbers)}
    if draw(st.booleans()):
        entry["failPrepares"] = {"count": draw(numbers), "message": draw(hostile_text)}
    doc["devices"][key] = entry
    return doc


fault_bytes = st.one_of(
    st.binary(max_size=200),
    json_values().map(to_json_bytes),
    mutated(VALID).map(to_json_bytes),
    _entries().map(to_json_bytes),
    st.sampled_from([
        b"[" * 100_000 + b"]" * 100_000,
        b'{"version": 1, "devices": ' + b"[" * 3_000 + b"]" * 3_000 + b"}",
        b'{"version": ' + b"1" * 5_000 + b"}",  # over Python's int digit limit
        b'{"version": 1, "devices": {"gpu-0": {"slowPrepares": {"count": 1, "seconds": '
        + b"9" * 400 + b"}}}}",
        b'{"version": 1, "devices": {"gpu-0": {"slowPrepares": {"count": 1, '
        b'"seconds": 1e999}}}}',
        b'{"version": 1, "devices": {"gpu-0": {"failPrepares": {"count": 1, '
        b'"message": ' + json.dumps(["x" * 50_000] * 20).encode() + b"}}}}",
        b"\xef\xbb\xbf" + to_json_bytes(VALID),
    ]),
)


@given(data=fault_bytes)
def test_a_fault_file_parses_or_gives_a_one_line_fault_error(data: bytes) -> None:
    """FaultState.from_bytes: faults, or FaultError on one bounded line; never another
    exception (the live-devices thread catches FaultError alone)."""
    try:
        state = FaultState.from_bytes(data, "/data/faults.json")
    except FaultError as err:
        assert_one_line(str(err), ERROR_BOUND)
        return
    for key, faults in state.entries.items():
        assert key and not faults.is_empty()


def test_the_plugin_keeps_its_last_good_faults_and_writes_nothing(tmp_path: Path) -> None:
    """FaultFile, as the plugin polls it: a hostile file never raises, the faults in
    force stay the last good ones, `error` says why on one line, and reading writes no
    file anywhere."""

    @given(data=fault_bytes)
    def check(data: bytes) -> None:
        data_dir = Path(tempfile.mkdtemp(dir=tmp_path))
        path = fault_file_path(data_dir)
        path.write_bytes(to_json_bytes(VALID))
        faults = FaultFile(path)
        good = faults.current()
        assert faults.error is None and good.get("gpu-0").unhealthy

        path.write_bytes(data)
        before = tree_snapshot(tmp_path)
        now = faults.current()
        faults.load_if_changed()
        assert tree_snapshot(tmp_path) == before
        if faults.error is not None:
            assert now == good
            assert_one_line(faults.error, ERROR_BOUND + 100)

    check()
