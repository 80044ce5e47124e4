"""Durable writes and safe file names (real files in a tmp dir)."""

from __future__ import annotations

import os
import stat
import time

import pytest

from driver.atomicfile import remove_durable, safe_child, write_atomic


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
    from driver.atomicfile import STALE_TEMP_SECONDS, remove_stale_temps

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
