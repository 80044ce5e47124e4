"""LiveDevices: inventory file changes reach the consumer (the publisher), once each."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from simdra._driver.builtins import builtin_kinds
from simdra._driver.devices.backend import FakeBackend
from simdra._driver.devices.live import LiveDevices, NodeView

DRIVER, NODE = "gpu.example.com", "node-1"


def write(path: Path, names: list[str], atomic: bool = True) -> None:
    text = yaml.safe_dump({"pools": [{"name": "edge", "devices": [{"name": n} for n in names]}]})
    if not atomic:
        path.write_text(text)
        return
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def names(view: NodeView) -> list[str]:
    return [d.name for _, d in view.published.devices()]


@pytest.fixture
def inventory_file(tmp_path: Path) -> Path:
    path = tmp_path / "inventory.yaml"
    write(path, ["a-0"])
    return path


def live_devices(path: Path, on_change, **options) -> LiveDevices:
    backend = FakeBackend(str(path), DRIVER, NODE, 0, kinds=builtin_kinds())
    # A long interval: only file changes trigger a rescan.
    return LiveDevices(backend, DRIVER, on_change=on_change, watched_file=path,
                       rescan_interval=3600, **options)


def test_replaced_edited_and_deleted_files(inventory_file: Path) -> None:
    seen: list[NodeView] = []
    live = live_devices(inventory_file, seen.append)
    write(inventory_file, ["a-0", "a-1"])  # atomic rename
    assert live.poll() and names(seen[-1]) == ["a-0", "a-1"]
    write(inventory_file, ["a-2"], atomic=False)  # edited in place
    assert live.poll() and names(seen[-1]) == ["a-2"]
    inventory_file.unlink()  # gone: keep the last good inventory
    assert not live.poll() and names(live.view) == ["a-2"]
    write(inventory_file, ["a-3"])
    assert live.poll() and names(seen[-1]) == ["a-3"]
    assert not live.poll() and len(seen) == 3


def test_a_change_the_consumer_failed_to_take_is_handed_on_at_the_next_poll(
    inventory_file: Path,
) -> None:
    seen: list[NodeView] = []
    failures = [RuntimeError("publisher hiccup")]

    def on_change(view: NodeView) -> None:
        if failures:
            raise failures.pop()
        seen.append(view)

    live = live_devices(inventory_file, on_change)
    write(inventory_file, ["a-0", "a-1"])
    with pytest.raises(RuntimeError):
        live.poll()
    assert live.poll()
    assert [names(v) for v in seen] == [["a-0", "a-1"]]


def test_a_change_found_by_a_round_that_failed_later_is_not_lost(inventory_file: Path) -> None:
    seen: list[NodeView] = []
    failures: list[Exception] = []

    def prepared() -> tuple[()]:
        if failures:
            raise failures.pop()
        return ()

    live = live_devices(inventory_file, seen.append, prepared=prepared)
    failures.append(RuntimeError("cannot list prepared claims"))  # after the rescan
    write(inventory_file, ["a-0", "a-1"])
    with pytest.raises(RuntimeError):
        live.poll()
    assert live.poll()
    assert [names(v) for v in seen] == [["a-0", "a-1"]]


def test_a_prepared_device_that_vanishes_is_reported_unhealthy_until_unprepared(
    inventory_file: Path,
) -> None:
    from simdra._driver.core.health import HealthStatus
    from simdra._driver.devices.live import VANISHED_MESSAGE

    write(inventory_file, ["a-0", "a-1"])
    prepared = {("edge", "a-0"), ("edge", "a-1")}
    seen: list[NodeView] = []
    live = live_devices(inventory_file, seen.append, prepared=lambda: frozenset(prepared))
    assert not live.poll()  # every prepared device is there

    def vanished(view: NodeView) -> list[str]:
        return [h.device_name for h in view.health
                if h.health == HealthStatus.UNHEALTHY and h.message == VANISHED_MESSAGE]

    write(inventory_file, ["a-1"])
    assert live.poll() and vanished(seen[-1]) == ["a-0"]
    assert not live.poll()  # reported once
    prepared.discard(("edge", "a-0"))  # unprepared: nothing left to report
    assert live.poll() and vanished(seen[-1]) == []
    prepared.add(("edge", "a-9"))  # prepared on a device the node never had
    assert live.poll() and vanished(seen[-1]) == ["a-9"]


def test_the_thread_wakes_up_for_a_file_change_not_for_a_timer(inventory_file: Path) -> None:
    """Idle costs no wake-ups: with a tick and a rescan interval of an hour, a change of
    the inventory file (an edit in place, then an atomic replace) is still handed on at
    once, and stop() does not wait for either."""
    import threading
    import time

    changed = threading.Event()
    seen: list[NodeView] = []

    def on_change(view: NodeView) -> None:
        seen.append(view)
        changed.set()

    live = live_devices(inventory_file, on_change, tick=3600)
    live.start()
    try:
        for expected, atomic in ((["a-1"], False), (["a-2", "a-3"], True)):
            changed.clear()
            write(inventory_file, expected, atomic=atomic)
            assert changed.wait(timeout=10), f"no change seen for {expected}"
            assert names(seen[-1]) == expected
    finally:
        start = time.monotonic()
        live.stop()
    assert time.monotonic() - start < 5
