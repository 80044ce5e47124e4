"""Durable writes and safe file names (real files in a tmp dir)."""

from __future__ import annotations

import os
import stat
import time

import pytest

from simdra._driver.atomicfile import remove_durable, safe_child, write_atomic


def test_write_atomic_creates_and_replaces_without_leaving_temp_files(tmp_path):
    target = tmp_path / "spec.json"
    write_atomic(target, b"first")
    write_atomic(target, b"second", mode=0o600)
    assert target.read_bytes() == b"second"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["spec.json"]


def test_write_atomic_keeps_old_content_when_the_write_fails(tmp_path):
    target = tmp_path / "spec.json"
    write_atomic(target, b"old")
    with pytest.raises(TypeError):
        write_atomic(target, "not bytes")  # type: ignore[arg-type]
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["spec.json"]


def test_remove_durable_reports_whether_the_file_existed(tmp_path):
    target = tmp_path / "record.json"
    target.write_bytes(b"x")
    assert remove_durable(target) is True
    assert not target.exists()
    assert remove_durable(target) is False


@pytest.mark.parametrize(
    "name", ["0a1b2c3d-0000-4000-8000-000000000001.json", "k8s.x.example.com-device_u1.json"]
)
def test_safe_child_joins_a_single_component(tmp_path, name):
    assert safe_child(tmp_path, name) == tmp_path / name


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "../../etc", "a/b", "/etc/passwd", "a\x00b", ".hidden", "x" * 256, "ü", "a b"],
)
def test_safe_child_rejects_hostile_names_naming_them(tmp_path, name):
    with pytest.raises(ValueError, match="unsafe file name") as info:
        safe_child(tmp_path, name)
    assert repr(name)[:20] in str(info.value) or len(name) > 40


def test_only_stale_temp_files_of_our_own_writes_are_removed(tmp_path):
    from simdra._driver.atomicfile import STALE_TEMP_SECONDS, remove_stale_temps

    old = time.time() - STALE_TEMP_SECONDS - 60
    stale = tmp_path / ".faults.json.k2j4x9_q.tmp"  # what write_atomic leaves on a crash
    fresh = tmp_path / ".faults.json.a8b7c6d5.tmp"  # a write another process is making
    others = [tmp_path / name for name in (".bashrc.tmp", "faults.json", ".x.tmp.keep")]
    for path in (stale, fresh, *others):
        path.write_text("{")
    for path in (stale, *others):
        os.utime(path, (old, old))
    assert remove_stale_temps(tmp_path) == [stale]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [fresh.name, *(p.name for p in others)])


def test_a_staged_write_shows_nothing_until_committed_and_a_discard_leaves_nothing(tmp_path):
    from simdra._driver.atomicfile import StagedWrite, temp_target, write_staged

    target, other = tmp_path / "record.json", tmp_path / "other.json"
    target.write_bytes(b"old")
    staged, dropped = StagedWrite(target, b"new", 0o640), StagedWrite(other, b"never")
    assert os.listdir(tmp_path) == ["record.json"]  # nothing written before write_staged

    assert write_staged([staged, dropped]) == [None, None]
    assert target.read_bytes() == b"old" and not other.exists()
    temps = sorted(name for name in os.listdir(tmp_path) if name != "record.json")
    # Only temp files, each named as start-up recovery recognizes it.
    assert [temp_target(name) for name in temps] == ["other.json", "record.json"]
    staged.commit()
    dropped.discard()
    staged.discard()  # after the commit: nothing to remove, the target stays

    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert os.listdir(tmp_path) == ["record.json"]


def test_a_failed_fsync_fails_only_its_own_write_which_then_cannot_be_committed(
    tmp_path, monkeypatch
):
    from simdra._driver import atomicfile
    from simdra._driver.atomicfile import StagedWrite, write_staged

    writes = [StagedWrite(tmp_path / f"f{i}.json", b"data") for i in range(4)]
    real_fsync = os.fsync

    def fsync(fd):
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")).startswith(".f2.json."):
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(atomicfile.os, "fsync", fsync)
    errors = write_staged(writes)

    assert [e is None for e in errors] == [True, True, False, True]
    assert "Input/output error" in str(errors[2])
    # The failed write left no temp file behind; the others wait for their commit.
    assert sorted(name.split(".")[1] for name in os.listdir(tmp_path)) == ["f0", "f1", "f3"]
    with pytest.raises(ValueError, match="not synced"):
        writes[2].commit()
    writes[2].discard()
    for write in (writes[0], writes[1], writes[3]):
        write.commit()
    assert sorted(os.listdir(tmp_path)) == ["f0.json", "f1.json", "f3.json"]


def test_staged_writes_create_their_files_side_by_side(tmp_path, monkeypatch):
    """Creating a file can cost a millisecond of CPU (ext4 without a journal), and the
    batch's writer holds every other prepare meanwhile: the creates must not queue."""
    import threading

    from simdra._driver import atomicfile
    from simdra._driver.atomicfile import StagedWrite, write_staged

    count = 4
    all_creating = threading.Barrier(count, timeout=10)  # broken if they run in turn
    real_open = os.open

    def open_(path, flags, *args, **kwargs):
        if flags & os.O_CREAT:
            all_creating.wait()
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(atomicfile.os, "open", open_)
    writes = [StagedWrite(tmp_path / f"f{i}.json", b"data") for i in range(count)]
    assert write_staged(writes) == [None] * count
