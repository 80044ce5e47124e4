"""Incremental rescans: a backend's change stamp decides whether a rescan discovers.

An idle node must not rebuild its inventory every interval; but a device that comes or
goes, an inventory file edit and an injected fault must still be seen.
"""

from __future__ import annotations

import os
from collections.abc import Hashable
from pathlib import Path

import yaml

from simdra._driver.builtins import builtin_kinds
from simdra._driver.cli.fault import fault_main
from simdra._driver.devices.backend import FakeBackend
from simdra._driver.devices.faults import FaultFile, fault_file_path
from simdra._driver.devices.live import LiveDevices, NodeView
from simdra._driver.devices.model import Device, Inventory, Pool
from simdra._driver.kinds.sysfs import SysfsBackend
from simdra._driver.kinds.sysfs.nvml import NoNvml
from tests.devices.sysfs_trees import SysfsTree, nic_node

DRIVER, NODE = "dra.example.com", "node-1"


class StampedBackend:
    """A backend whose stamp and devices the test sets; counts discovers."""

    def __init__(self, stamp: Hashable | None = 1) -> None:
        self.stamp = stamp
        self.names = ["dev-0"]
        self.discovers = 0
        self.fail = False

    def change_stamp(self) -> Hashable | None:
        return self.stamp

    def discover(self) -> Inventory:
        self.discovers += 1
        if self.fail:
            raise OSError("scan failed")
        return Inventory((Pool(NODE, tuple(Device({"name": n}) for n in self.names)),))


def names(view: NodeView) -> list[str]:
    return [d.name for _, d in view.published.devices()]


def every_poll_due(backend: object, **options: object) -> LiveDevices:
    """Every poll is a due rescan (interval 0)."""
    return LiveDevices(backend, DRIVER, on_change=lambda view: None,  # type: ignore[arg-type]
                       rescan_interval=0, **options)  # type: ignore[arg-type]


def test_an_unchanged_stamp_skips_the_discover() -> None:
    backend = StampedBackend()
    live = every_poll_due(backend)
    backend.names = ["dev-0", "dev-1"]  # invisible: the stamp says nothing changed
    for _ in range(5):
        assert not live.poll()
    assert backend.discovers == 1  # the one at start


def test_a_changed_stamp_discovers_and_publishes_the_change() -> None:
    backend = StampedBackend()
    live = every_poll_due(backend)
    backend.names, backend.stamp = ["dev-0", "dev-1"], 2
    assert live.poll() and names(live.view) == ["dev-0", "dev-1"]
    assert not live.poll() and backend.discovers == 2


def test_without_a_stamp_every_rescan_discovers() -> None:
    backend = StampedBackend(stamp=None)
    live = every_poll_due(backend)
    live.poll()
    live.poll()
    assert backend.discovers == 3


def test_a_full_rescan_still_runs_when_the_stamp_stays_the_same() -> None:
    backend = StampedBackend()
    live = every_poll_due(backend, full_rescan_interval=0)
    backend.names = ["dev-1"]  # e.g. a link speed: no stamp sees it
    assert live.poll() and names(live.view) == ["dev-1"]


def test_a_failed_discover_is_retried_although_the_stamp_is_unchanged_since() -> None:
    backend = StampedBackend()
    live = every_poll_due(backend)
    backend.names, backend.stamp, backend.fail = ["dev-1"], 2, True
    assert not live.poll() and names(live.view) == ["dev-0"]
    backend.fail = False
    assert live.poll() and names(live.view) == ["dev-1"]


def test_a_failing_stamp_falls_back_to_discovering() -> None:
    backend = StampedBackend()
    live = every_poll_due(backend)

    def broken() -> Hashable:
        raise OSError("no listing")

    backend.change_stamp = broken  # type: ignore[method-assign]
    backend.names = ["dev-1"]
    assert live.poll() and names(live.view) == ["dev-1"]


class CountingFake(FakeBackend):
    """The fake backend, counting discovers."""

    discovers = 0

    def discover(self) -> Inventory:
        self.discovers += 1
        return super().discover()


def test_built_in_profiles_are_discovered_once() -> None:
    backend = CountingFake("nic", DRIVER, NODE, 4, builtin_kinds())
    live = every_poll_due(backend)
    for _ in range(3):
        live.poll()
    assert backend.discovers == 1


def test_an_inventory_file_edit_is_picked_up_by_the_periodic_rescan(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yaml"

    def write(device_names: list[str]) -> None:
        pools = [{"name": "edge", "devices": [{"name": n} for n in device_names]}]
        path.write_text(yaml.safe_dump({"pools": pools}))

    write(["a-0"])
    backend = CountingFake(str(path), DRIVER, NODE, 0, builtin_kinds())
    live = every_poll_due(backend)  # no watched file: the stamp alone sees the edit
    assert not live.poll() and backend.discovers == 1
    write(["a-0", "a-1"])  # in place: a new size
    assert live.poll() and names(live.view) == ["a-0", "a-1"]
    os.utime(path, ns=(1, 1))  # same content, new mtime: discovered, nothing published
    assert not live.poll() and backend.discovers == 3


def test_faults_apply_without_any_discover(tmp_path: Path) -> None:
    backend = CountingFake("nic", DRIVER, NODE, 2, builtin_kinds())
    seen: list[NodeView] = []
    live = LiveDevices(backend, DRIVER, on_change=seen.append, rescan_interval=0,
                       faults=FaultFile(fault_file_path(tmp_path)))
    assert fault_main(["--plugin-dir", str(tmp_path), "nic-1", "unhealthy"]) == 0
    assert live.poll()
    tainted = seen[-1].published.device(NODE, "nic-1")
    assert tainted is not None and tainted.spec["taints"][0]["key"] == f"{DRIVER}/unhealthy"
    assert fault_main(["--plugin-dir", str(tmp_path), "nic-0", "remove"]) == 0
    assert live.poll() and names(seen[-1]) == ["nic-1"]
    assert backend.discovers == 1


def sysfs_backend(tree: SysfsTree) -> SysfsBackend:
    return SysfsBackend(tree.sys, tree.dev, node_name=NODE, driver_name=DRIVER, nvml=NoNvml())


def test_sysfs_stamp_changes_when_a_device_comes_or_its_driver_goes(tmp_path: Path) -> None:
    tree = nic_node(SysfsTree(tmp_path))
    backend = sysfs_backend(tree)
    first = backend.change_stamp()
    assert backend.change_stamp() == first
    tree.nic("enp9s0", address="0000:09:00.0", speed=25000)
    second = backend.change_stamp()
    assert second != first
    (tree.sys / "bus/pci/devices/0000:09:00.0/driver").unlink()  # unbound
    assert backend.change_stamp() != second


def test_sysfs_new_nic_is_published_by_the_next_rescan(tmp_path: Path) -> None:
    tree = nic_node(SysfsTree(tmp_path))
    live = every_poll_due(sysfs_backend(tree))
    assert not live.poll()
    tree.nic("enp9s0", address="0000:09:00.0", speed=25000)
    assert live.poll() and "enp9s0" in {d.attribute("interfaceName") for _, d in
                                        live.view.published.devices()}
