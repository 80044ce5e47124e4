"""The plugin's state is never followed through a link: a symlink where the plugin keeps
the device metadata directory, a claim's metadata directory, a record or a CDI spec is
refused, left alone or unlinked itself, and what it points to is never read, written,
chmodded or removed; a record that names another device metadata root is not trusted.
Real files, a real Preparer over them."""

from __future__ import annotations

import json
import logging
import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from simdra._driver.claims.plan.metadata import HOST_SUBDIR
from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.claims.source import StaticClaimSource
from simdra._driver.claims.store.checkpoint import Checkpoint
from simdra._driver.claims.types import ClaimRef
from simdra._driver.kubelet import state_check
from simdra._driver.kubelet.state_check import StateError, check_state
from tests.claims.builders import RULES

from .builders import DRIVER, claim, inventory, result

A = "aaaaaaaa-0000-4000-8000-000000000001"
B = "bbbbbbbb-0000-4000-8000-000000000002"


class Node:
    """A data directory, a CDI directory, the claims the API server holds, and a
    directory of someone else's data that links point to."""

    def __init__(self, tmp_path: Path) -> None:
        self.cdi, self.data = tmp_path / "cdi", tmp_path / DRIVER
        self.source = StaticClaimSource()
        self.other = tmp_path / "other"
        (self.other / "keep").mkdir(parents=True)
        (self.other / "keep" / "data.txt").write_text("precious\n")
        (self.other / B).mkdir()  # named like a claim UID: the sweep's own kind of name
        (self.other / B / "data.txt").write_text("precious too\n")

    def add(self, uid: str) -> ClaimRef:
        raw = claim(uid, [result("gpus", "gpu-0")])
        self.source.put(raw)
        return ClaimRef("default", raw["metadata"]["name"], uid)

    def preparer(self, *, metadata: bool = True) -> Preparer:
        return Preparer(DRIVER, self.source, lambda: inventory(gpus=2, nics=1), self.cdi,
                        self.data, device_metadata=metadata, rules=RULES)

    @property
    def root(self) -> Path:
        return self.data.resolve() / HOST_SUBDIR

    def other_files(self) -> dict[str, str]:
        return {str(p.relative_to(self.other)): p.read_text()
                for p in sorted(self.other.rglob("*")) if p.is_file()}


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("metadata", [True, False])
def test_a_linked_metadata_directory_is_not_swept_and_says_one_line(node, caplog, metadata):
    node.data.mkdir(parents=True)
    (node.data / HOST_SUBDIR).symlink_to(node.other)
    before = node.other_files()

    with caplog.at_level(logging.WARNING):
        node.preparer(metadata=metadata)  # start-up: the orphan sweep

    assert node.other_files() == before
    [line] = [m for m in _warnings(caplog) if HOST_SUBDIR in m]
    assert "symlink" in line and "not swept" in line and "\n" not in line


def test_start_up_refuses_a_linked_metadata_directory_in_one_line(node):
    node.data.mkdir(parents=True)
    (node.data / HOST_SUBDIR).symlink_to(node.other)

    with pytest.raises(StateError) as refused:
        check_state(node.data, node.cdi)

    message = str(refused.value)
    assert str(node.data / HOST_SUBDIR) in message and "is a symlink (to " in message
    assert "\n" not in message
    assert (node.other / "keep" / "data.txt").exists()
    assert state_check.METADATA_DIR == HOST_SUBDIR


def test_symlinks_inside_the_metadata_directory_are_unlinked_never_followed(node, caplog):
    root = node.root
    root.mkdir(parents=True)
    (root / B).symlink_to(node.other / "keep")  # a link where a claim's directory goes
    c = "cccccccc-0000-4000-8000-000000000003"
    (root / c / "gpus").mkdir(parents=True)
    (root / c / "gpus" / "x").symlink_to(node.other / "keep" / "data.txt")
    (root / c / "gpus" / "up").symlink_to(node.other)
    (root / "not-a-uid").symlink_to(node.other)  # not a name the plugin writes
    before = node.other_files()

    with caplog.at_level(logging.WARNING):
        node.preparer()  # must not raise

    assert node.other_files() == before
    assert sorted(p.name for p in root.iterdir()) == ["not-a-uid"]
    lines = [m for m in _warnings(caplog) if "symlinks" in m]
    assert len(lines) == 2 and all("not followed" in m and "\n" not in m for m in lines)
    assert f"{B}" in lines[0] + lines[1] and "gpus/up" in lines[0] + lines[1]


def test_a_link_in_place_of_a_claims_metadata_directory_is_never_written_through(node, caplog):
    ref = node.add(A)
    node.preparer().prepare([ref])
    claim_dir = node.root / A
    for path in sorted(claim_dir.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    claim_dir.rmdir()
    claim_dir.symlink_to(node.other / "keep")
    before = node.other_files()

    with caplog.at_level(logging.ERROR):
        restarted = node.preparer()  # start-up restores the record's files
        answer = restarted.prepare([ref])[A]  # the kubelet's retry

    assert node.other_files() == before
    assert "symlink" in answer.error and "\n" not in answer.error


def test_a_record_naming_another_metadata_root_is_not_trusted(node, tmp_path, caplog):
    ref = node.add(A)
    elsewhere = Node(tmp_path / "elsewhere")
    elsewhere.source = node.source
    elsewhere.preparer().prepare([ref])  # a record whose root is another data dir's
    hostile = elsewhere.data / "claims" / f"{A}.json"
    for path in sorted(elsewhere.root.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (node.data / "claims").mkdir(parents=True)
    (node.data / "claims" / f"{A}.json").write_bytes(hostile.read_bytes())

    with caplog.at_level(logging.ERROR):
        restarted = node.preparer()

    assert list(elsewhere.root.rglob("*")) == []  # nothing written at the record's root
    [line] = [m for m in _warnings(caplog) if A in m]
    assert "device metadata root" in line and "not trusted" in line
    assert restarted.prepare([ref])[A].error != ""


def test_a_spec_that_mounts_from_elsewhere_is_not_trusted(node, caplog):
    ref = node.add(A)
    node.preparer().prepare([ref])
    checkpoint = Checkpoint(node.data)
    [recorded] = checkpoint.load_all()[0].values()
    spec = json.loads(json.dumps(recorded.cdi_spec))
    for device in spec["devices"]:
        for mount in device["containerEdits"].get("mounts", []):
            mount["hostPath"] = str(node.other)
    checkpoint.save(replace(recorded, cdi_spec=spec))

    with caplog.at_level(logging.ERROR):
        node.preparer()

    [line] = [m for m in _warnings(caplog) if A in m]
    assert "device metadata mounts" in line and "not trusted" in line


def test_a_record_of_a_file_mount_is_still_trusted_and_restored(node):
    # Prepared before directory mounts: its spec mounts the file, `metadata.json`.
    ref = node.add(A)
    node.preparer().prepare([ref])
    checkpoint = Checkpoint(node.data)
    [recorded] = checkpoint.load_all()[0].values()
    legacy = replace(recorded, metadata_dir_mount=False)
    mounts = legacy.metadata_devices(DRIVER)
    devices = [{**d, "containerEdits": mounts.get(d["name"], d["containerEdits"])}
               for d in recorded.cdi_spec["devices"]]
    checkpoint.save(replace(legacy, cdi_spec={**recorded.cdi_spec, "devices": devices}))

    restarted = node.preparer()

    assert restarted.prepare([ref])[A].error == ""
    [mount] = mounts[f"{A}_metadata_gpus"]["mounts"]
    assert mount["hostPath"] == str(node.root / A / "gpus" / "metadata.json")
    assert Path(mount["hostPath"]).is_file()


def test_a_linked_records_directory_is_refused_and_its_target_keeps_its_mode(node):
    node.data.mkdir(parents=True)
    node.other.chmod(0o755)
    (node.data / "claims").symlink_to(node.other)

    with pytest.raises(NotADirectoryError, match="symlink"):
        Checkpoint(node.data)

    assert stat.S_IMODE(node.other.stat().st_mode) == 0o755


def test_a_record_that_is_a_symlink_is_not_read_through(node):
    ref = node.add(A)
    node.preparer().prepare([ref])
    record = node.data / "claims" / f"{A}.json"
    outside = node.other / "record.json"
    outside.write_bytes(record.read_bytes())
    record.unlink()
    record.symlink_to(outside)

    records, problems = Checkpoint(node.data).load_all()

    assert records == {} and [p.uid for p in problems] == [A]
    assert "symlink" in problems[0].reason


def test_a_cdi_spec_that_is_a_symlink_is_replaced_not_trusted(node):
    ref = node.add(A)
    node.preparer().prepare([ref])
    [spec] = node.cdi.glob(f"*{A}*.json")
    outside = node.other / "spec.json"
    outside.write_bytes(spec.read_bytes())  # the very content the record holds
    spec.unlink()
    spec.symlink_to(outside)

    node.preparer()  # start-up restores the spec from the record

    assert not spec.is_symlink() and spec.read_bytes() == outside.read_bytes()
    assert os.stat(outside).st_nlink == 1
