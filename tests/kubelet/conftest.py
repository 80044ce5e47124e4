"""Fixtures for the kubelet-facing layer: short socket dirs, a fake preparer, a plugin
starter and the kubelet emulator."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from simdra._driver.kubelet.endpoints import KubeletPlugin, start_kubelet_plugin
from simdra._driver.testing.kubelet import KubeletEmulator

from .fakes import DRIVER, Dirs, FakePreparer


@pytest.fixture
def dirs() -> Iterator[Dirs]:
    root = tempfile.mkdtemp(dir="/tmp", prefix="sdk-")
    yield Dirs(root=root, data=f"{root}/plugins/{DRIVER}", registry=f"{root}/registry")
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def preparer() -> FakePreparer:
    return FakePreparer()


@pytest.fixture
def start_plugin(dirs: Dirs, preparer: FakePreparer) -> Iterator[Callable[..., KubeletPlugin]]:
    """start_plugin(**kwargs) starts a plugin for DRIVER in `dirs`; stopped at teardown."""
    started: list[KubeletPlugin] = []

    def start(**kwargs: Any) -> KubeletPlugin:
        plugin = start_kubelet_plugin(
            kwargs.pop("driver_name", DRIVER),
            kwargs.pop("dra_socket", dirs.dra_socket),
            kwargs.pop("registration_socket", dirs.registration_socket),
            kwargs.pop("preparer", preparer),
            **kwargs,
        )
        started.append(plugin)
        return plugin

    yield start
    for plugin in started:
        plugin.stop(grace=0)


@pytest.fixture
def kubelet(dirs: Dirs) -> Iterator[KubeletEmulator]:
    with KubeletEmulator(dirs.registry, dial_timeout=2.0) as emulator:
        yield emulator
