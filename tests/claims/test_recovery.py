"""A corrupt record costs its claim, never the node, and never frees its devices."""

from __future__ import annotations

import copy
import json
import logging
import os
import uuid

import pytest

from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.claims.source import StaticClaimSource
from simdra._driver.claims.store.record import record_checksum
from simdra._driver.claims.types import ClaimRef
from simdra._driver.cli.usage import usage_main
from tests.claims.builders import RULES

from .builders import DRIVER, ProfileCluster, claim, inventory, result, with_profile

A = "aaaaaaaa-0000-4000-8000-000000000001"
B = "bbbbbbbb-0000-4000-8000-000000000002"
C = "cccccccc-0000-4000-8000-000000000003"


class Node:
    def __init__(self, tmp_path):
        self.root = tmp_path
        self.cdi = tmp_path / "cdi"
        self.data = tmp_path / DRIVER  # the data dir is named for the driver, as in a pod
        self.source = StaticClaimSource()
        self.inventory = inventory(gpus=2, nics=1)

    def add(self, uid, *results, name=None):
        raw = claim(uid, list(results), name=name)
        self.source.put(raw)
        return ClaimRef("default", raw["metadata"]["name"], uid)

    def preparer(self):
        return Preparer(DRIVER, self.source, lambda: self.inventory, self.cdi, self.data,
                        rules=RULES)

    def record(self, uid):
        return self.data / "claims" / f"{uid}.json"

    def spec(self, uid):
        return self.cdi / f"k8s.{DRIVER}-device_{uid}.json"


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path)


def _nested(path):
    path.write_text("[" * 5000 + "]" * 5000)


def _cdi_file_outside(path):
    record = json.loads(path.read_text())
    record["payload"]["cdiFile"] = "../../etc/passwd"
    record["checksum"] = record_checksum(record)  # a valid checksum: still untrusted
    path.write_text(json.dumps(record))


def _other_claims_cdi_file(path):
    record = json.loads(path.read_text())
    record["payload"]["cdiFile"] = f"k8s.{DRIVER}-device_{B}.json"
    record["checksum"] = record_checksum(record)
    path.write_text(json.dumps(record))


def _huge(path):
    path.write_bytes(b" " * 5 * 2**20 + b"{}")  # 5 MiB, over the 4 MiB limit


def _unreadable(path):
    path.unlink()
    path.mkdir()  # reading it raises IsADirectoryError


def _binary(path):
    path.write_bytes(b"\xff\xfe\x00garbage")


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (_nested, "nested 5000 levels deep"),
        (_cdi_file_outside, "cdiFile '../../etc/passwd' is not the CDI spec file"),
        (_other_claims_cdi_file, "is not the CDI spec file of this claim"),
        (_huge, "more than the limit"),
        (_unreadable, "IsADirectoryError"),
        (_binary, "not valid JSON"),
    ],
)
def test_any_bad_record_sets_aside_one_claim_and_the_node_starts(node, caplog, damage, reason):
    bad, good = node.add(A, result("gpus", "gpu-0")), node.add(C, result("gpus", "gpu-1"))
    node.preparer().prepare([bad, good])
    damage(node.record(A))

    with caplog.at_level(logging.ERROR, logger="simdra._driver.claims.prepare"):
        restarted = node.preparer()  # must not raise

    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert str(node.record(A)) in line and f"claim uid {A}" in line and reason in line
    assert "\n" not in line
    assert list(restarted.prepared()) == [C]
    assert restarted.prepare([good])[C].error == ""
    error = restarted.prepare([bad])[A].error
    assert reason in error and "not preparing it again" in error
    assert node.spec(A).exists()  # the spec of a set-aside claim is never taken away


def test_a_record_prepare_could_not_read_back_is_never_written(node):
    long_env = {"deviceNodes": [{"path": "/dev/x"}], "env": [f"E{i}={'v' * 1000}"
                                                           for i in range(5000)]}
    node.inventory.pools[0].devices[0].container_edits.update(long_env)
    ref = node.add(A, result("gpus", "gpu-0"))
    error = node.preparer().prepare([ref])[A].error
    assert "the limits are" in error and "write checkpoint" in error
    assert not node.record(A).exists() and not node.spec(A).exists()


def test_a_set_aside_record_keeps_its_devices_reserved_until_unprepared(node):
    first = node.add(A, result("gpus", "gpu-0"))
    assert node.preparer().prepare([first])[A].error == ""
    node.record(A).write_text("{torn")
    restarted = node.preparer()
    assert restarted.ledger.reserved() == [("node-a", "gpu-0", A)]

    forged = node.add(B, result("gpus", "gpu-0"), name="forged")
    error = restarted.prepare([forged])[B].error
    assert f"device node-a/gpu-0 is reserved by an unreadable checkpoint record of claim {A}" in (
        error
    )
    assert not node.spec(B).exists() and not node.record(B).exists()

    assert restarted.unprepare([first])[A].error == ""  # the kubelet unprepares the claim
    assert restarted.ledger.reserved() == []
    assert restarted.prepare([forged])[B].error == ""


def test_an_operator_removing_the_record_releases_the_devices(node):
    first = node.add(A, result("gpus", "gpu-0"))
    assert node.preparer().prepare([first])[A].error == ""
    node.record(A).write_text("{torn")
    preparer = node.preparer()
    forged = node.add(B, result("gpus", "gpu-0"), name="forged")
    assert "reserved by an unreadable" in preparer.prepare([forged])[B].error
    node.record(A).unlink()
    node.spec(A).unlink()
    # The removal changes the directory's timestamps; a hand edit comes well after the
    # plugin's last write, which the file system's clock tick cannot tell apart in a test.
    info = (node.data / "claims").stat()
    os.utime(node.data / "claims", ns=(info.st_atime_ns, info.st_mtime_ns + 10**9))
    assert preparer.prepare([forged])[B].error == ""


def test_without_a_readable_cdi_spec_nothing_is_reserved_and_the_log_says_so(node, caplog):
    first = node.add(A, result("gpus", "gpu-0"))
    node.preparer().prepare([first])
    node.record(A).write_text("{torn")
    node.spec(A).write_text("[" * 100 + "]" * 100)
    with caplog.at_level(logging.ERROR):
        restarted = node.preparer()
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert "its devices are unknown" in line and "unreadable" in line
    assert restarted.ledger.reserved() == []


def test_a_reserved_partition_keeps_its_counters_so_the_whole_gpu_is_refused(tmp_path):
    cluster = ProfileCluster("gpu-partitioned")
    part = cluster.allocate("part", with_profile("gpu", "3g.40gb"))
    assert cluster.preparer(tmp_path).prepare([part])[part.uid].error == ""
    (tmp_path / "data" / "claims" / f"{part.uid}.json").write_text("{torn")
    restarted = cluster.preparer(tmp_path)

    raw = copy.deepcopy(cluster.allocated[part.uid])
    raw["metadata"].update(name="whole", uid=str(uuid.uuid4()))
    raw["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-0"
    whole = cluster.put(raw)
    error = restarted.prepare([whole])[whole.uid].error
    assert "counter set gpu-0-counters counter slices: total 7, used 3 by device(s) gpu-0-3g-0" \
        in error


def test_usage_reports_a_bad_record_in_one_line_and_its_reserved_devices(node, capsys):
    first = node.add(A, result("gpus", "gpu-0"))
    other = node.add(C, result("gpus", "gpu-1"))
    node.preparer().prepare([first, other])
    _nested(node.record(A))

    args = ["--plugin-dir", str(node.data), "--cdi-root", str(node.cdi)]
    assert usage_main(args) == 0
    table = capsys.readouterr().out
    (problem,) = [line for line in table.splitlines() if line.startswith(A)]
    assert "nested 5000 levels deep" in problem and "reserves node-a/gpu-0" in problem
    assert "reserved by an unreadable record" in table
    assert "Traceback" not in table

    assert usage_main([*args, "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    devices = {d["device"]: d for d in report["devices"]}
    assert devices["gpu-0"]["reservedByUnreadableRecords"] == [A]
    assert devices["gpu-0"]["mode"] == "reserved"
    assert [h["claim"]["uid"] for h in devices["gpu-1"]["holders"]] == [C]
    (problem,) = report["problems"]
    assert problem["reserves"] == ["node-a/gpu-0"]


def test_usage_keeps_a_record_with_a_hostile_file_name_on_one_line(node, capsys):
    node.preparer()
    (node.data / "claims" / "evil\n2026 forged.json").write_text("{}")
    assert usage_main(["--plugin-dir", str(node.data), "--cdi-root", str(node.cdi)]) == 0
    table = capsys.readouterr().out
    (line,) = [line for line in table.splitlines() if "evil" in line]
    assert "evil\\n2026 forged" in line
