"""With --pod-uid each instance has its own socket names: a killed instance's sockets are
removed when the next one starts, a live instance's never (real unix sockets)."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator

import pytest

from simdra._driver.kubelet import stale_sockets
from simdra._driver.kubelet.endpoints import KubeletPlugin
from simdra._driver.kubelet.sockets import (
    dra_socket_path,
    registration_socket_path,
    rolling_update_registration_names,
)
from simdra._driver.kubelet.stale_sockets import remove_stale_instance_sockets

from .fakes import DRIVER, Dirs

ME = "aaaaaaaa-0000-4000-8000-000000000001"
GONE = "bbbbbbbb-0000-4000-8000-000000000002"
ALIVE = "cccccccc-0000-4000-8000-000000000003"


def _dead(path: str) -> str:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(path)
    sock.close()  # the file stays, nobody listens
    return path


@pytest.fixture
def listening() -> Iterator[Callable[[str], str]]:
    held: list[socket.socket] = []

    def listen(path: str) -> str:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(path)
        sock.listen()
        held.append(sock)
        return path

    yield listen
    for sock in held:
        sock.close()


def _names(directory: str) -> set[str]:
    return set(os.listdir(directory))


def test_only_this_drivers_dead_sockets_of_other_instances_go(dirs: Dirs, listening) -> None:
    os.makedirs(dirs.data)
    os.makedirs(dirs.registry)
    mine = [dra_socket_path(dirs.data, ME), registration_socket_path(dirs.registry, DRIVER, ME)]
    for path in mine:
        _dead(path)  # ours (about to be bound again): not this function's to remove
    gone = [
        _dead(dra_socket_path(dirs.data, GONE)),
        _dead(dra_socket_path(dirs.data)),  # an instance started without --pod-uid
        *(_dead(f"{dirs.registry}/{name}")
          for name in rolling_update_registration_names(DRIVER, GONE)[:2]),
    ]
    kept = [
        listening(dra_socket_path(dirs.data, ALIVE)),  # a rolling update's other instance
        listening(registration_socket_path(dirs.registry, DRIVER, ALIVE)),
        _dead(registration_socket_path(dirs.registry, "other.example.com", GONE)),
        _dead(f"{dirs.registry}/{DRIVER}-extra-{GONE}-reg.sock"),  # another driver's name
        # hashes the driver name too: nothing says it is ours
        _dead(f"{dirs.registry}/{rolling_update_registration_names(DRIVER, GONE)[2]}"),
        _dead(f"{dirs.data}/other.sock"),
    ]
    not_a_socket = f"{dirs.data}/dra-dddddddd-0000-4000-8000-000000000004.sock"
    with open(not_a_socket, "w") as file:
        file.write("x")

    removed = remove_stale_instance_sockets(DRIVER, dirs.data, dirs.registry, mine, grace_s=0)

    assert sorted(removed) == sorted(gone)
    remaining = _names(dirs.data) | _names(dirs.registry)
    assert remaining == {os.path.basename(p) for p in [*mine, *kept, not_a_socket]}


def test_a_socket_just_created_is_kept(dirs: Dirs) -> None:
    """A starting server may bind at its real name a moment before it listens."""
    os.makedirs(dirs.data)
    fresh = _dead(dra_socket_path(dirs.data, GONE))
    assert remove_stale_instance_sockets(DRIVER, dirs.data, dirs.data, []) == []
    assert os.path.exists(fresh)


def test_starting_an_instance_removes_a_killed_ones_sockets_not_a_live_ones(
    dirs: Dirs, start_plugin: Callable[..., KubeletPlugin], monkeypatch
) -> None:
    monkeypatch.setattr(stale_sockets, "STARTING_GRACE_S", 0.0)
    alive = start_plugin(dra_socket=dra_socket_path(dirs.data, ALIVE),
                         registration_socket=registration_socket_path(dirs.registry, DRIVER, ALIVE))
    killed = [_dead(dra_socket_path(dirs.data, GONE)),
              _dead(registration_socket_path(dirs.registry, DRIVER, GONE))]
    me = start_plugin(dra_socket=dra_socket_path(dirs.data, ME),
                      registration_socket=registration_socket_path(dirs.registry, DRIVER, ME))
    assert not any(os.path.exists(p) for p in killed)
    for plugin in (alive, me):
        for path in (plugin.dra_socket, plugin.registration_socket):
            assert stale_sockets.listening(path), path
