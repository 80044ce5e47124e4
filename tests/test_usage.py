"""`simdra usage`: per-device used vs hard from a plugin's data directory, read-only."""

from __future__ import annotations

import json

import pytest

from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.cli.usage import usage_main
from tests.claims.builders import DRIVER, RULES, ProfileCluster, request, wants, with_profile


def _snapshot(root):
    return sorted(
        (str(p.relative_to(root)), p.stat().st_mtime_ns, p.stat().st_size) for p in root.rglob("*")
    )


@pytest.fixture
def node(tmp_path):
    """A stopped plugin's directories: a NIC shared by two claims, an exclusive GPU, a
    partition of a partitioned GPU, and an admin-access watcher."""
    nics = ProfileCluster("gpu,nic")
    shared = [
        nics.allocate("web", wants("net", "nic", bandwidth="4G")),
        nics.allocate("db", wants("net", "nic", bandwidth="1500M"), request("gpu", "gpu")),
        nics.allocate("watch", request("gpu", "gpu", adminAccess=True), namespace="ops"),
    ]
    data_dir = tmp_path / "plugins" / DRIVER  # where `simdra run` keeps it by default
    preparer = Preparer(DRIVER, nics.source, lambda: nics.inventory, tmp_path / "cdi", data_dir,
                        rules=RULES)
    assert all(not a.error for a in preparer.prepare(shared).values())
    parts = ProfileCluster("gpu-partitioned")
    small = parts.allocate("small", with_profile("gpu", "2g.20gb"))
    parted = parts.preparer(tmp_path / "partitioned")
    assert not parted.prepare([small])[small.uid].error
    return tmp_path, {r.name: r for r in [*shared, small]}


def _json(capsys, *argv):
    assert usage_main([*argv, "--output", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_shows_used_hard_free_and_holders_per_device(node, capsys):
    root, refs = node
    report = _json(capsys, "--plugin-dir", str(root / "plugins" / DRIVER))
    devices = {d["device"]: d for d in report["devices"]}
    assert sorted(devices) == ["gpu-0", "nic-0"]
    nic = devices["nic-0"]
    assert (nic["mode"], nic["capacity"], nic["used"], nic["free"]) == (
        "shared",
        {"bandwidth": "10G"},
        {"bandwidth": "5500M"},
        {"bandwidth": "4500M"},
    )
    holders = {h["claim"]["name"]: h for h in nic["holders"]}
    assert holders["web"]["consumed"] == {"bandwidth": "4G"}
    assert holders["web"]["claim"] == {
        "namespace": "default",
        "name": "web",
        "uid": refs["web"].uid,
    }
    assert holders["web"]["shareID"] and holders["web"]["shareID"] != holders["db"]["shareID"]
    gpu = devices["gpu-0"]
    assert (gpu["mode"], gpu["used"], gpu["free"]) == (
        "exclusive",
        {"memory": "80Gi"},
        {"memory": "0"},
    )
    by_claim = {h["claim"]["name"]: h for h in gpu["holders"]}
    assert by_claim["watch"]["adminAccess"] and by_claim["watch"]["consumed"] == {}
    assert by_claim["db"]["consumed"] == {"memory": "80Gi"} and by_claim["db"]["shareID"] is None
    assert report["counterSets"] == [] and report["problems"] == []


def test_counter_sets_of_partitioned_gpus(node, capsys):
    root, _ = node
    report = _json(capsys, "--plugin-dir", str(root / "partitioned" / "data"))
    (counters,) = report["counterSets"]
    assert counters == {
        "pool": "node-a",
        "name": "gpu-0-counters",
        "total": {"memory": "80Gi", "slices": "7"},
        "used": {"memory": "20Gi", "slices": "2"},
        "free": {"memory": "60Gi", "slices": "5"},
        "devices": ["gpu-0-2g-0"],
    }


def test_table_lists_devices_holders_and_problems(node, capsys, monkeypatch):
    root, refs = node
    data = root / "plugins" / DRIVER
    (data / "claims" / f"{refs['web'].uid}.json").write_text('{"truncated')
    monkeypatch.setenv("KUBELET_PLUGINS_DIRECTORY_PATH", str(root / "plugins"))
    monkeypatch.setenv("DRIVER_NAME", DRIVER)
    assert usage_main([]) == 0  # the data dir derived like `simdra run` derives it
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "DEVICES"
    nic_row = next(line for line in lines if line.startswith("node-a/nic-0 ")).split()
    assert nic_row == ["node-a/nic-0", "nic", "shared", "bandwidth", "1500M", "10G", "8500M", "1"]
    assert any(line.startswith("node-a/gpu-0") and "admin access" in line for line in lines)
    problems = lines[lines.index("PROBLEMS") + 2 :]
    assert len(problems) == 1 and refs["web"].uid in problems[0]
    assert "not valid JSON" in problems[0]


def test_usage_changes_nothing_on_disk(node, capsys):
    root, _ = node
    before = _snapshot(root)
    plugins = str(root / "plugins")
    assert usage_main(["--kubelet-plugins-directory-path", plugins, "--driver-name", DRIVER]) == 0
    assert "node-a/nic-0" in capsys.readouterr().out
    _json(capsys, "--plugin-dir", str(root / "partitioned" / "data"))
    assert _snapshot(root) == before


def test_missing_data_dir_and_bad_arguments(tmp_path, capsys):
    assert usage_main(["--plugin-dir", str(tmp_path / "nope")]) == 1
    assert "no such plugin data directory" in capsys.readouterr().err
    assert usage_main(["--output", "yaml"]) == 2
    (tmp_path / "empty").mkdir()
    assert usage_main(["--plugin-dir", str(tmp_path / "empty")]) == 0
    assert capsys.readouterr().out == f"no prepared claims in {tmp_path / 'empty'}\n"
