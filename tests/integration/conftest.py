"""Fixtures for end-to-end tests: a LocalCluster (API stand-in over HTTP, the plugin as a
child process, the kubelet emulator over unix sockets) in a short temp dir."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from simdra._driver.testing.cluster import LocalCluster


def _short_dir(prefix: str) -> Path:
    # Unix socket paths must stay under 108 bytes; pytest's tmp_path can be longer.
    return Path(tempfile.mkdtemp(dir="/tmp", prefix=prefix))


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    """A fresh node with no plugin started yet."""
    workdir = _short_dir("sde-")
    with LocalCluster(workdir) as local:
        yield local
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def shared_cluster() -> Iterator[LocalCluster]:
    """One node running the plugin with 8 GPUs and 8 NICs, shared by a module's tests
    that only add their own claims."""
    workdir = _short_dir("sdm-")
    with LocalCluster(workdir) as local:
        local.start_plugin(profile="gpu,nic", num_devices=8)
        yield local
    shutil.rmtree(workdir, ignore_errors=True)
