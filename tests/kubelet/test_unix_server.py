"""Socket lifecycle of the gRPC servers: stale sockets, foreign files, own-socket removal."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys

import grpc
import pytest

from simdra._driver.kubelet.gen import pluginregistration_v1_pb2 as regpb
from simdra._driver.kubelet.gen import pluginregistration_v1_pb2_grpc as regpb_grpc
from simdra._driver.kubelet.registration import RegistrationServicer
from simdra._driver.kubelet.server import SocketPathError, UnixSocketServer, start_unix_server

from .fakes import Dirs


def _serve(path: str, name: str) -> UnixSocketServer:
    servicer = RegistrationServicer(name, "/x/dra.sock", ["v1.DRAPlugin"])
    return start_unix_server(
        path, lambda s: regpb_grpc.add_RegistrationServicer_to_server(servicer, s)
    )


def _who_answers(path: str) -> str:
    with grpc.insecure_channel(f"unix:{path}") as channel:
        info = regpb_grpc.RegistrationStub(channel).GetInfo(regpb.InfoRequest(), timeout=5)
    return info.name


def _leave_stale_socket(path: str) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(path)
    sock.close()  # the file stays, nobody listens


def test_creates_parent_dir_and_serves(dirs: Dirs) -> None:
    path = f"{dirs.root}/a/b/reg.sock"
    server = _serve(path, "one")
    try:
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
        assert _who_answers(path) == "one"
    finally:
        server.stop(grace=0)


def test_stale_socket_is_replaced(dirs: Dirs) -> None:
    path = f"{dirs.root}/reg.sock"
    _leave_stale_socket(path)
    server = _serve(path, "fresh")
    try:
        assert _who_answers(path) == "fresh"
    finally:
        server.stop(grace=0)


@pytest.mark.parametrize("kind", ["file", "dir"])
def test_non_socket_at_path_is_refused_and_kept(dirs: Dirs, kind: str) -> None:
    path = f"{dirs.root}/reg.sock"
    if kind == "file":
        with open(path, "w") as f:
            f.write("precious")
    else:
        os.mkdir(path)
    with pytest.raises(SocketPathError, match="not a unix socket") as err:
        _serve(path, "x")
    assert path in str(err.value)
    if kind == "file":
        with open(path) as f:
            assert f.read() == "precious"
    else:
        assert os.path.isdir(path)
    assert os.listdir(dirs.root) == ["reg.sock"]  # no temporary socket left behind


def test_too_long_path_is_refused_with_its_length(dirs: Dirs) -> None:
    path = f"{dirs.root}/" + "x" * (107 - len(dirs.root))
    with pytest.raises(SocketPathError, match="108 bytes"):
        _serve(path, "x")
    assert os.listdir(dirs.root) == []


def test_stop_removes_own_socket_and_nothing_else(dirs: Dirs) -> None:
    path = f"{dirs.root}/reg.sock"
    neighbour = f"{dirs.root}/other.sock"
    _leave_stale_socket(neighbour)
    server = _serve(path, "one")
    server.stop(grace=0)
    assert not os.path.exists(path)
    assert stat.S_ISSOCK(os.lstat(neighbour).st_mode)
    server.stop(grace=0)  # idempotent


def test_stop_leaves_socket_of_the_instance_that_replaced_it(dirs: Dirs) -> None:
    path = f"{dirs.root}/reg.sock"
    old = _serve(path, "old")
    new = _serve(path, "new")  # treats the old socket as stale, as a restarted pod does
    try:
        old.stop(grace=0)
        assert _who_answers(path) == "new"
    finally:
        new.stop(grace=0)
    assert not os.path.exists(path)


def test_no_hidden_files_remain_while_serving_or_after(dirs: Dirs) -> None:
    path = f"{dirs.root}/reg.sock"
    server = _serve(path, "one")
    assert os.listdir(dirs.root) == ["reg.sock"]
    server.stop(grace=0)
    assert os.listdir(dirs.root) == []


_KILLED_BETWEEN_BIND_AND_RENAME = """
import os, signal, sys
from simdra._driver.kubelet import server
os.rename = lambda *a: os.kill(os.getpid(), signal.SIGKILL)
server.start_unix_server(sys.argv[1], lambda s: None)
"""


def _crash_between_bind_and_rename(path: str) -> None:
    done = subprocess.run([sys.executable, "-c", _KILLED_BETWEEN_BIND_AND_RENAME, path],
                          capture_output=True, timeout=60, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr


def test_temporary_sockets_of_servers_killed_before_the_rename_are_removed(dirs: Dirs) -> None:
    path = f"{dirs.root}/reg.sock"
    for _ in range(3):
        _crash_between_bind_and_rename(path)
    assert os.listdir(dirs.root)  # a hidden socket is left (one per crash, before the fix)
    server = _serve(path, "fresh")
    try:
        assert os.listdir(dirs.root) == ["reg.sock"]
        assert _who_answers(path) == "fresh"
    finally:
        server.stop(grace=0)


def test_live_temporary_sockets_and_other_hidden_files_are_kept(dirs: Dirs) -> None:
    path = f"{dirs.root}/reg.sock"
    _crash_between_bind_and_rename(path)
    (temp_name,) = os.listdir(dirs.root)
    os.unlink(f"{dirs.root}/{temp_name}")
    # Another instance's temporary socket, listening and about to be renamed.
    live = socket.socket(socket.AF_UNIX)
    live.bind(f"{dirs.root}/{temp_name}")
    live.listen()
    other = [".other.sock", ".a1b2c3d4.tmp"]
    for name in other:
        _leave_stale_socket(f"{dirs.root}/{name}")
    try:
        server = _serve(path, "fresh")
        server.stop(grace=0)
        assert sorted(os.listdir(dirs.root)) == sorted([temp_name, *other])
    finally:
        live.close()


def test_socket_and_created_directory_modes_do_not_depend_on_the_umask(dirs: Dirs) -> None:
    path = f"{dirs.root}/new/dir/reg.sock"
    old = os.umask(0)
    try:
        server = _serve(path, "one")
    finally:
        os.umask(old)
    try:
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o660
        for directory in (f"{dirs.root}/new", f"{dirs.root}/new/dir"):
            assert stat.S_IMODE(os.stat(directory).st_mode) == 0o750
    finally:
        server.stop(grace=0)
