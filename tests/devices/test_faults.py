"""Fault injection: `simdra fault` writes the control file, the plugin side obeys it."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest

from simdra._driver.cli.fault import fault_main
from simdra._driver.devices.faults import (
    FaultFile,
    InjectedFault,
    PrepareFaults,
    apply_removals,
    fault_file_path,
    health_of,
)
from simdra._driver.devices.model import Device, Inventory, Pool
from simdra._driver.kubelet.health import DeviceHealth, HealthStatus

INVENTORY = Inventory(pools=(
    Pool("node-1", (Device({"name": "gpu-0"}), Device({"name": "gpu-1"}))),
    Pool("node-1/nics", (Device({"name": "gpu-1"}), Device({"name": "nic-0"}))),
))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "plugins" / "dra.example.com"
    directory.mkdir(parents=True)
    return directory


@pytest.fixture
def faults(data_dir: Path) -> FaultFile:
    return FaultFile(fault_file_path(data_dir))


def fault(data_dir: Path, *words: str) -> int:
    return fault_main(["--plugin-dir", str(data_dir), *words])


def health(state_file: FaultFile) -> dict[tuple[str, str], tuple[HealthStatus, str]]:
    return {(h.pool_name, h.device_name): (h.health, h.message)
            for h in health_of(INVENTORY, state_file.current())}


# --- CLI round trips ------------------------------------------------------------------


def test_unhealthy_then_healthy_round_trip(data_dir: Path, faults: FaultFile,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert fault(data_dir, "gpu-1", "unhealthy", "--message", "fan stopped") == 0
    assert health(faults)[("node-1", "gpu-1")] == (HealthStatus.UNHEALTHY, "fan stopped")
    # A plain device name applies in every pool.
    assert health(faults)[("node-1/nics", "gpu-1")] == (HealthStatus.UNHEALTHY, "fan stopped")
    assert health(faults)[("node-1", "gpu-0")] == (HealthStatus.HEALTHY, "")
    assert "gpu-1: unhealthy (\"fan stopped\")" in capsys.readouterr().out

    assert fault(data_dir, "gpu-1", "healthy") == 0
    assert {status for status, _ in health(faults).values()} == {HealthStatus.HEALTHY}


def test_unhealthy_without_message_gets_a_default(data_dir: Path, faults: FaultFile) -> None:
    assert fault(data_dir, "gpu-0", "unhealthy") == 0
    status, message = health(faults)[("node-1", "gpu-0")]
    assert status == HealthStatus.UNHEALTHY
    assert "simdra fault" in message


def test_remove_and_add_back_one_pool(data_dir: Path, faults: FaultFile) -> None:
    assert fault(data_dir, "node-1/nics/gpu-1", "remove") == 0
    shown = apply_removals(INVENTORY, faults.current())
    assert [(p.name, d.name) for p, d in shown.devices()] == [
        ("node-1", "gpu-0"), ("node-1", "gpu-1"), ("node-1/nics", "nic-0")]
    assert ("node-1/nics", "gpu-1") not in health(faults)

    assert fault(data_dir, "node-1/nics/gpu-1", "add") == 0
    assert apply_removals(INVENTORY, faults.current()) == INVENTORY


def test_removing_every_device_of_a_pool_keeps_the_pool(data_dir: Path,
                                                        faults: FaultFile) -> None:
    for name in ("gpu-1", "nic-0"):
        assert fault(data_dir, name, "remove") == 0
    shown = apply_removals(INVENTORY, faults.current())
    assert [(p.name, [d.name for d in p.devices]) for p in shown.pools] == [
        ("node-1", ["gpu-0"]), ("node-1/nics", [])]


def test_list_shows_every_fault(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert fault(data_dir, "list") == 0
    assert capsys.readouterr().out == "no faults\n"
    assert fault(data_dir, "gpu-0", "fail-prepare", "--count", "3", "--message", "ECC") == 0
    assert fault(data_dir, "node-1/gpu-1", "slow-prepare", "--seconds", "2.5") == 0
    assert fault(data_dir, "nic-0", "remove") == 0
    capsys.readouterr()

    assert fault(data_dir, "list") == 0
    assert capsys.readouterr().out.splitlines() == [
        'gpu-0         fail-prepare x3 ("ECC")',
        "nic-0         removed",
        "node-1/gpu-1  slow-prepare x1 (2.5s)",
    ]
    assert fault(data_dir, "list", "--json") == 0
    assert json.loads(capsys.readouterr().out)["devices"] == {
        "gpu-0": {"failPrepares": {"count": 3, "message": "ECC"}},
        "nic-0": {"removed": True},
        "node-1/gpu-1": {"slowPrepares": {"count": 1, "seconds": 2.5}},
    }


def test_clear_and_reset(data_dir: Path, faults: FaultFile) -> None:
    assert fault(data_dir, "gpu-0", "unhealthy") == 0
    assert fault(data_dir, "node-1/gpu-0", "fail-prepare") == 0
    assert fault(data_dir, "nic-0", "remove") == 0
    # A plain name clears the device's entries in every pool.
    assert fault(data_dir, "gpu-0", "clear") == 0
    assert list(faults.current().entries) == ["nic-0"]
    assert fault(data_dir, "reset") == 0
    assert faults.current().entries == {}


def test_pool_entry_cannot_undo_an_all_pools_mark(data_dir: Path, faults: FaultFile,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert fault(data_dir, "gpu-1", "unhealthy") == 0
    before = faults.path.read_bytes()
    assert fault(data_dir, "node-1/gpu-1", "healthy") == 2
    err = capsys.readouterr().err
    assert "'gpu-1' for all pools" in err and err.count("\n") == 1
    assert faults.path.read_bytes() == before


def test_plugin_dir_from_kubelet_dir_and_driver_name(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "gpu.example.com").mkdir()
    monkeypatch.setenv("KUBELET_PLUGINS_DIRECTORY_PATH", str(tmp_path))
    monkeypatch.setenv("DRIVER_NAME", "gpu.example.com")
    assert fault_main(["gpu-0", "remove"]) == 0
    assert FaultFile(tmp_path / "gpu.example.com" / "faults.json").current().get(
        "gpu-0").removed
    # Flags win over the environment.
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "net.example.com").mkdir()
    assert fault_main(["--kubelet-plugins-directory-path", str(tmp_path / "other"),
                       "--driver-name", "net.example.com", "nic-0", "remove"]) == 0
    assert (tmp_path / "other" / "net.example.com" / "faults.json").exists()


# --- bad input: one line, exit 2, nothing written ---------------------------------------


@pytest.mark.parametrize("target", [
    "GPU-0", "gpu_0", "-gpu", "gpu-0-", "", "../../etc/passwd", "gpu-0/", "/gpu-0",
    "node-1//gpu-0", "gpu\n0", "x" * 64, "Node/gpu-0", "node-1/../gpu-0", "p" * 254 + "/gpu",
])
def test_hostile_device_names_are_refused(data_dir: Path, target: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert fault(data_dir, "--", target, "unhealthy") == 2  # `--`: "-gpu" is no option
    err = capsys.readouterr().err
    assert err.startswith("simdra fault: invalid ")
    assert err.count("\n") == 1
    assert list(data_dir.iterdir()) == []


@pytest.mark.parametrize(("words", "complaint"), [
    (["gpu-0", "explode"], "unknown action \"explode\""),
    (["gpu-0", "slow-prepare"], "needs --seconds"),
    (["gpu-0", "slow-prepare", "--seconds", "0"], "seconds must be more than 0"),
    (["gpu-0", "slow-prepare", "--seconds", "nan"], "seconds must be more than 0"),
    (["gpu-0", "fail-prepare", "--count", "-1"], "count must be 0 or more"),
    (["gpu-0", "remove", "--message", "x"], "remove does not take --message"),
    (["gpu-0", "unhealthy", "--message", "m" * 1025], "at most 1024"),
    (["list", "--count", "2"], "list does not take --count"),
    (["gpu-0"], "expected DEVICE ACTION"),
    (["gpu-0", "remove", "extra"], "expected DEVICE ACTION"),
])
def test_bad_requests_are_refused(data_dir: Path, words: list[str], complaint: str,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert fault(data_dir, *words) == 2
    err = capsys.readouterr().err
    assert complaint in err and err.count("\n") == 1
    assert list(data_dir.iterdir()) == []


def test_missing_plugin_dir_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert fault_main(["--plugin-dir", str(tmp_path / "nope"), "gpu-0", "remove"]) == 2
    assert f"plugin directory {tmp_path / 'nope'} does not exist" in capsys.readouterr().err
    assert not (tmp_path / "nope").exists()


# --- the prepare hook ---------------------------------------------------------------------


def test_fail_prepare_fails_exactly_n_prepares(data_dir: Path, faults: FaultFile) -> None:
    hook = PrepareFaults(faults)
    assert fault(data_dir, "gpu-0", "fail-prepare", "--count", "2", "--message", "ECC") == 0
    for left in (1, 0):
        with pytest.raises(InjectedFault) as info:
            hook.before_device("node-1", "gpu-0")
        assert "device node-1/gpu-0: ECC" in str(info.value)
        assert f"{left} more failing prepares" in str(info.value)
    hook.before_device("node-1", "gpu-0")  # the third one succeeds
    hook.before_device("node-1", "gpu-1")  # other devices were never affected
    assert faults.current().entries == {}


def test_slow_prepare_waits_then_succeeds(data_dir: Path, faults: FaultFile) -> None:
    waits: list[float] = []
    hook = PrepareFaults(faults, sleep=waits.append)
    assert fault(data_dir, "node-1/nics/gpu-1", "slow-prepare", "--count", "2",
                 "--seconds", "1.5") == 0
    hook.before_device("node-1", "gpu-1")  # other pool: not slow
    for _ in range(3):
        hook.before_device("node-1/nics", "gpu-1")
    assert waits == [1.5, 1.5]


def test_pool_entry_is_consumed_before_the_all_pools_entry(data_dir: Path,
                                                           faults: FaultFile) -> None:
    hook = PrepareFaults(faults)
    assert fault(data_dir, "gpu-0", "fail-prepare", "--message", "any pool") == 0
    assert fault(data_dir, "node-1/gpu-0", "fail-prepare", "--message", "this pool") == 0
    messages = []
    for _ in range(2):
        with pytest.raises(InjectedFault) as info:
            hook.before_device("node-1", "gpu-0")
        messages.append(str(info.value))
    assert ["this pool" in messages[0], "any pool" in messages[1]] == [True, True]
    hook.before_device("node-1", "gpu-0")


def test_cli_updates_are_never_lost_while_the_plugin_consumes(data_dir: Path,
                                                              faults: FaultFile) -> None:
    assert fault(data_dir, "gpu-0", "fail-prepare", "--count", "1000") == 0
    consumers, prepares, marks = 3, 40, 30
    failures = [0] * consumers

    def consume(index: int) -> None:
        hook = PrepareFaults(FaultFile(faults.path))  # each with its own cache and lock fd
        for _ in range(prepares):
            try:
                hook.before_device("node-1", "gpu-0")
            except InjectedFault:
                failures[index] += 1

    def cli() -> None:
        for i in range(marks):
            assert fault(data_dir, f"dev-{i}", "unhealthy", "--message", f"m{i}") == 0

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(consumers)]
    threads.append(threading.Thread(target=cli))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    state = faults.current()
    assert sum(failures) == consumers * prepares
    assert state.get("gpu-0").fail_prepares == 1000 - consumers * prepares
    assert [state.get(f"dev-{i}").message for i in range(marks)] == [f"m{i}" for i in range(marks)]


# --- the control file as the plugin reads it ----------------------------------------------


def test_load_if_changed_reports_each_change_once(data_dir: Path, faults: FaultFile) -> None:
    first = faults.load_if_changed()
    assert first is not None and first.entries == {}  # no file yet: no faults
    assert faults.load_if_changed() is None
    assert fault(data_dir, "gpu-0", "remove") == 0
    changed = faults.load_if_changed()
    assert changed is not None and changed.get("gpu-0").removed
    assert faults.load_if_changed() is None
    faults.path.unlink()  # removing the file removes the faults
    changed = faults.load_if_changed()
    assert changed is not None and changed.entries == {}


def test_corrupt_file_keeps_the_last_good_state(data_dir: Path, faults: FaultFile,
                                                caplog: pytest.LogCaptureFixture) -> None:
    assert fault(data_dir, "gpu-0", "unhealthy", "--message", "hot") == 0
    assert fault(data_dir, "gpu-1", "fail-prepare") == 0
    assert faults.load_if_changed() is not None
    faults.path.write_text('{"version": 1, "devices": {"gpu-0": {"health": "sick"}}')

    with caplog.at_level(logging.ERROR):
        assert faults.load_if_changed() is None
        assert health(faults)[("node-1", "gpu-0")] == (HealthStatus.UNHEALTHY, "hot")
        PrepareFaults(faults).before_device("node-1", "gpu-1")  # skipped, no crash
    logged = [r.getMessage() for r in caplog.records if str(faults.path) in r.getMessage()]
    assert len(logged) == 2  # once for the poller, once for the skipped prepare
    assert faults.error is not None and str(faults.path) in faults.error


@pytest.mark.parametrize("content", [
    "not json",
    '{"devices": {}}',
    '{"version": 1, "devices": {"gpu-0": {"removed": "yes"}}}',
    '{"version": 1, "devices": {"gpu-0": {"failPrepares": {"count": true}}}}',
    '{"version": 1, "devices": {"gpu-0": {"failPrepares": {"count": -2}}}}',
    '{"version": 1, "devices": {"gpu-0": {"slowPrepares": {"count": 1}}}}',
    '{"version": 1, "devices": {"gpu-0": {"broken": true}}}',
    '{"version": 1, "devices": {"../x": {"removed": true}}}',
])
def test_cli_refuses_a_corrupt_file_until_reset(data_dir: Path, faults: FaultFile, content: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    faults.path.write_text(content)
    assert fault(data_dir, "gpu-0", "remove") == 2
    assert fault(data_dir, "list") == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(f"fault file {faults.path}" in line for line in err)
    assert faults.path.read_text() == content

    assert fault(data_dir, "reset") == 0
    assert fault(data_dir, "gpu-0", "remove") == 0
    assert faults.current().get("gpu-0").removed


def test_health_of_lists_every_present_device(faults: FaultFile) -> None:
    assert health_of(INVENTORY, faults.current()) == [
        DeviceHealth("node-1", "gpu-0", HealthStatus.HEALTHY),
        DeviceHealth("node-1", "gpu-1", HealthStatus.HEALTHY),
        DeviceHealth("node-1/nics", "gpu-1", HealthStatus.HEALTHY),
        DeviceHealth("node-1/nics", "nic-0", HealthStatus.HEALTHY),
    ]
