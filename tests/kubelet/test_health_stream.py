"""DRAResourceHealth streams (v1alpha1 and v1) from a HealthSource to the kubelet."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from simdra._driver.kubelet import health as health_module
from simdra._driver.kubelet.endpoints import KubeletPlugin
from simdra._driver.kubelet.health import DeviceHealth, HealthBoard, HealthStatus, clip_message
from simdra._driver.testing.kubelet import KubeletEmulator, KubeletError

from .fakes import DRIVER

StartPlugin = Callable[..., KubeletPlugin]

GPU0 = DeviceHealth("node-1", "gpu-0", HealthStatus.HEALTHY, last_updated=1700000000)
GPU1 = DeviceHealth(
    "node-1", "gpu-1", HealthStatus.UNHEALTHY, timeout_seconds=60, message="ECC errors"
)


class _Scripted:
    """A HealthSource that yields fixed lists, then waits for `stop`."""

    def __init__(self, *lists: Sequence[DeviceHealth]) -> None:
        self.lists = lists
        self.watching = threading.Event()
        self.stopped = threading.Event()

    def watch(self, stop: threading.Event) -> Iterator[Sequence[DeviceHealth]]:
        self.watching.set()
        try:
            yield from self.lists
            stop.wait()
        finally:  # ended by `stop` or closed by the servicer: either way, released
            self.stopped.set()


@pytest.mark.parametrize("version", ["v1alpha1", "v1"])
def test_stream_sends_full_device_lists(
    start_plugin: StartPlugin, kubelet: KubeletEmulator, version: str
) -> None:
    start_plugin(health=_Scripted([GPU0, GPU1], [GPU0]))
    kubelet.wait_for_plugin(DRIVER, timeout=5)
    first, second = kubelet.watch_health(version=version, messages=2)
    assert first[0] == {
        "pool_name": "node-1",
        "device_name": "gpu-0",
        "health": "Healthy",
        "last_updated_time": 1700000000,
        "health_check_timeout_seconds": 0,
        "message": "",
    }
    assert first[1]["health"] == "Unhealthy"
    assert first[1]["health_check_timeout_seconds"] == 60
    assert first[1]["message"] == "ECC errors"
    assert first[1]["last_updated_time"] > 0  # unset -> time of sending
    assert [d["device_name"] for d in second] == ["gpu-0"]


def test_a_resent_list_carries_fresh_times_and_a_new_list_its_own_content(
    start_plugin: StartPlugin, kubelet: KubeletEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keep-alive re-sends reuse the last message; the kubelet must still see each
    device as just updated (unless the source gave a time), and a change in full."""
    clock = iter(range(1000, 10**6, 1000))
    monkeypatch.setattr(health_module, "time", SimpleNamespace(time=lambda: next(clock)))
    same = (GPU0, GPU1)
    changed = (GPU0, DeviceHealth("node-1", "gpu-1", HealthStatus.HEALTHY))
    start_plugin(health=_Scripted(same, same, changed))
    kubelet.wait_for_plugin(DRIVER, timeout=5)
    first, second, third = kubelet.watch_health(messages=3)
    assert [d["last_updated_time"] for d in first] == [1700000000, 1000]
    assert [d["last_updated_time"] for d in second] == [1700000000, 2000]
    assert second[1]["message"] == "ECC errors"
    assert [(d["health"], d["message"]) for d in third] == [("Healthy", ""), ("Healthy", "")]
    assert third[1]["last_updated_time"] == 3000


def test_closing_the_stream_stops_the_source(
    start_plugin: StartPlugin, kubelet: KubeletEmulator
) -> None:
    source = _Scripted([GPU0])
    start_plugin(health=source)
    kubelet.wait_for_plugin(DRIVER, timeout=5)
    assert len(kubelet.watch_health(messages=1)) == 1
    assert source.stopped.wait(timeout=5)


def test_plugin_stop_ends_open_streams(start_plugin: StartPlugin, kubelet: KubeletEmulator) -> None:
    source = _Scripted([GPU0])
    plugin = start_plugin(health=source)
    kubelet.wait_for_plugin(DRIVER, timeout=5)
    outcome: list[Any] = []

    def watch() -> None:
        try:
            outcome.append(kubelet.watch_health(messages=5, timeout=30))
        except KubeletError as err:
            outcome.append(err)

    watcher = threading.Thread(target=watch)
    watcher.start()
    assert source.watching.wait(timeout=5)
    plugin.stop(grace=30)  # must not wait for the grace period: streams are ended
    watcher.join(timeout=10)
    assert not watcher.is_alive()
    assert source.stopped.is_set()
    assert outcome and not isinstance(outcome[0], KubeletError)
    assert len(outcome[0]) == 1


def test_health_board_sends_current_list_then_updates(
    start_plugin: StartPlugin, kubelet: KubeletEmulator
) -> None:
    board = HealthBoard([GPU0])
    start_plugin(health=board)
    kubelet.wait_for_plugin(DRIVER, timeout=5)
    updated = False

    def on_message(devices: list[dict[str, Any]]) -> None:
        nonlocal updated
        if not updated:  # the first message is the initial list; then change it
            updated = True
            board.update([GPU0, GPU1])

    first, second = kubelet.watch_health(messages=2, on_message=on_message)
    assert [d["device_name"] for d in first] == ["gpu-0"]
    assert [(d["device_name"], d["health"]) for d in second] == [
        ("gpu-0", "Healthy"),
        ("gpu-1", "Unhealthy"),
    ]


def test_health_board_resends_for_the_kubelet_timeout() -> None:
    board = HealthBoard([GPU0], resend_seconds=0.05)
    stop = threading.Event()
    stream = board.watch(stop)
    assert next(stream) == (GPU0,)
    assert next(stream) == (GPU0,)  # no update: the same list again after resend_seconds
    stop.set()
    assert list(stream) == []


def test_long_messages_are_clipped_like_the_kubelet_does() -> None:
    assert clip_message("x" * 1024) == "x" * 1024
    clipped = clip_message("y" * 2000)
    assert len(clipped) == 1024 and clipped.endswith("...")


def test_without_health_source_the_service_is_not_served(
    start_plugin: StartPlugin, kubelet: KubeletEmulator
) -> None:
    start_plugin()
    assert kubelet.wait_for_plugin(DRIVER, timeout=5).health_version is None
    with pytest.raises(KubeletError, match="UNIMPLEMENTED"):
        kubelet.watch_health()
