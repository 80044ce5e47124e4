"""The plugin process against hostile state: a corrupt record, crash leftovers, a
permissive umask."""

from __future__ import annotations

import copy
import os
import signal
import socket
import stat
import time

from simdra._driver.testing.allocation.builders import exactly
from simdra._driver.testing.cluster import LocalCluster

GPU_CLASS = "gpu.dra.example.com"


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_modes_do_not_depend_on_the_umask(cluster: LocalCluster) -> None:
    cluster.cdi_root.rmdir()  # the plugin creates it
    old = os.umask(0)
    try:
        cluster.start_plugin(num_devices=1)
    finally:
        os.umask(old)
    cluster.create_claim("c", exactly("gpu", GPU_CLASS))
    cluster.allocate("c")
    ref = cluster.claim_ref("c")
    assert cluster.prepare("c")[ref.uid]["error"] == ""

    data = cluster.data_dir
    (spec,) = cluster.cdi_root.iterdir()
    assert {
        "data dir": _mode(data),
        "claims dir": _mode(data / "claims"),
        "record": _mode(data / "claims" / f"{ref.uid}.json"),
        "lock": _mode(data / "serialize.lock"),
        "DRA socket": _mode(data / "dra.sock"),
        "registration socket": _mode(cluster.registration_socket()),
        "CDI root": _mode(cluster.cdi_root),
        "CDI spec": _mode(spec),
    } == {
        "data dir": 0o750,
        "claims dir": 0o700,
        "record": 0o600,
        "lock": 0o600,
        "DRA socket": 0o660,
        "registration socket": 0o660,
        "CDI root": 0o755,  # read by the container runtime; see simdra/_driver/claims/plan/cdi.py
        "CDI spec": 0o644,
    }
    for root in (data, cluster.cdi_root):
        for path in [root, *root.rglob("*")]:
            assert not _mode(path) & 0o002, path  # nothing world-writable


def _leave_dead_socket(path) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()


def test_a_corrupt_record_costs_one_claim_and_leftovers_are_cleaned(cluster: LocalCluster) -> None:
    plugin = cluster.start_plugin(num_devices=2)
    for name in ("bad", "good"):
        cluster.create_claim(name, exactly("gpu", GPU_CLASS))
        cluster.allocate(name)
    bad, good = cluster.claim_ref("bad"), cluster.claim_ref("good")
    answers = cluster.prepare("bad", "good")
    assert plugin.stop(signal.SIGKILL) == -signal.SIGKILL

    record = cluster.data_dir / "claims" / f"{bad.uid}.json"
    record.write_text("[" * 5000 + "]" * 5000)
    leftovers = [cluster.data_dir / ".simdra-0badf00d.sock",
                 cluster.registrar_dir / ".simdra-0badf00d.sock"]
    for path in leftovers:
        _leave_dead_socket(path)
    stale_temp = cluster.data_dir / ".faults.json.a1b2c3d4.tmp"
    stale_temp.write_text("{")
    os.utime(stale_temp, (time.time() - 3600, time.time() - 3600))

    restarted = cluster.start_plugin(num_devices=2)  # starts: one claim is set aside

    errors = [line for line in restarted.log().splitlines() if " ERROR " in line]
    assert len(errors) == 1, errors
    assert str(record) in errors[0] and bad.uid in errors[0]
    assert "reserves" in errors[0]
    assert cluster.prepare("good") == {good.uid: answers[good.uid]}
    assert "nested 5000 levels deep" in cluster.prepare("bad")[bad.uid]["error"]
    assert not any(path.exists() for path in [*leftovers, stale_temp])

    forged = cluster.create_claim("forged", exactly("gpu", GPU_CLASS))
    forged["status"] = copy.deepcopy(
        cluster.api.get_object("resourceclaims", "bad", "default")["status"])
    cluster.api.put_object("resourceclaims", forged)
    error = cluster.prepare("forged")[forged["metadata"]["uid"]]["error"]
    assert "reserved by an unreadable checkpoint record" in error

    assert cluster.unprepare(bad) == {bad.uid: {"error": ""}}
    assert cluster.prepare("forged")[forged["metadata"]["uid"]]["error"] == ""
