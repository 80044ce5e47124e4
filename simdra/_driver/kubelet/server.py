"""A gRPC server on one unix socket that it owns.

Lifecycle rules (api-facts 1.4 and 8):

- the parent directory is created when missing (mode 0750);
- a stale socket left at the path by a dead process is removed; anything else at the
  path (a regular file, a directory) is refused, never deleted;
- temporary sockets (below) that a server killed between bind and rename left in the
  directory are removed when nothing listens on them;
- the socket's mode is 0660, whatever the umask;
- the socket is bound under a hidden temporary name and renamed into place once the
  server is serving, so the path only ever shows a socket that answers (the kubelet
  ignores names starting with ".");
- stop removes the socket only while the path still holds the socket this server made,
  so an instance never deletes the socket of another one that replaced it.

The rename also matters for the last rule: gRPC unlinks the path it bound when it shuts
down, whoever owns the path by then; with the rename, that path is the private
temporary name.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

from simdra._driver.atomicfile import make_directory
from simdra._driver.kubelet.sockets import GRPC_UNIX_PATH_MAX, path_bytes
from simdra._driver.kubelet.stale_sockets import (
    TEMP_SOCKET_PREFIX,
    remove_stale_temp_sockets,
    socket_identity,
)

log = logging.getLogger(__name__)

# Sockets: the kubelet (root) connects; nobody else needs to. Connecting to a unix
# socket takes write permission on it, so this keeps other users out, whatever the umask.
SOCKET_MODE = 0o660
SOCKET_DIR_MODE = 0o750  # for socket directories this server has to create


class SocketPathError(RuntimeError):
    """The socket path cannot be used (too long, or occupied by something not a socket)."""


def check_socket_path(path: str) -> None:
    """Raise SocketPathError if gRPC cannot bind a unix socket at this absolute path."""
    if not os.path.isabs(path):
        raise SocketPathError(f"socket path {path!r} must be absolute")
    size = path_bytes(path)
    if size > GRPC_UNIX_PATH_MAX:
        raise SocketPathError(
            f"socket path {path} is {size} bytes; unix sockets allow at most "
            f"{GRPC_UNIX_PATH_MAX} (shorten the directory or the driver name)"
        )


def remove_stale_socket(path: str) -> None:
    """Remove a leftover socket at path; refuse to touch anything that is not a socket."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise SocketPathError(
            f"cannot serve on {path}: it exists and is not a unix socket "
            f"({stat.filemode(mode)}); remove it or choose another path"
        )
    log.info("removing stale socket %s", path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _temporary_bind_path(path: str) -> str | None:
    """A hidden sibling name to bind first, or None when it would not fit the limit."""
    name = f"{TEMP_SOCKET_PREFIX}{secrets.token_hex(4)}.sock"
    candidate = os.path.join(os.path.dirname(path), name)
    return candidate if path_bytes(candidate) <= GRPC_UNIX_PATH_MAX else None


class _Socket:
    """One unix socket path a server listens on, and the rules above for it."""

    def __init__(self, path: str, name: str) -> None:
        self.path = os.path.abspath(path)
        check_socket_path(self.path)
        self.name = name
        self._bind_path: str | None = None
        self._identity: tuple[int, int] | None = None

    def bind(self, server: grpc.Server) -> None:
        """Listen under a hidden temporary name in the socket's directory."""
        directory = os.path.dirname(self.path)
        make_directory(directory, SOCKET_DIR_MODE)
        remove_stale_temp_sockets(directory)
        remove_stale_socket(self.path)
        self._bind_path = _temporary_bind_path(self.path) or self.path
        try:
            bound = server.add_insecure_port(f"unix:{self._bind_path}")
        except RuntimeError as err:
            raise SocketPathError(f"cannot bind {self.name} socket {self.path}: {err}") from err
        if not bound:
            raise SocketPathError(f"cannot bind {self.name} socket {self.path}")
        # Before the rename, so the socket never shows at its path with looser modes.
        os.chmod(self._bind_path, SOCKET_MODE)

    def publish(self) -> None:
        """Rename the serving socket to its path."""
        if self._bind_path is not None and self._bind_path != self.path:
            os.rename(self._bind_path, self.path)
        self._identity = socket_identity(self.path)
        log.info("%s server listening on %s", self.name, self.path)

    def remove(self) -> None:
        """Remove the path while it holds this socket; idempotent."""
        if self._identity is not None and socket_identity(self.path) == self._identity:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            log.info("%s server stopped, removed %s", self.name, self.path)
        elif self._identity is not None:
            log.info("%s server stopped; %s now belongs to another server", self.name, self.path)
        self._identity = None
        # Only left behind when start failed between bind and rename.
        if self._bind_path and self._bind_path != self.path:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._bind_path)


class UnixSocketServer:
    """A running grpc.Server that listens on `path` and owns that socket file.

    One socket per server: a server answers every service it has on every port it
    listens on, so sockets that must serve different services need servers of their own.
    """

    def __init__(
        self,
        path: str,
        register: Callable[[grpc.Server], None],
        *,
        max_workers: int = 8,
        name: str = "grpc",
        interceptors: Sequence[grpc.ServerInterceptor] = (),
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        """Start serving; see `start_unix_server`."""
        self._socket = _Socket(path, name)
        self.path = self._socket.path
        self._executor = ThreadPoolExecutor(max_workers, thread_name_prefix=f"simdra-{name}")
        self._server = grpc.server(self._executor, interceptors=list(interceptors) or None,
                                   options=list(options) or None)
        try:
            register(self._server)
            self._socket.bind(self._server)
            self._server.start()
            self._socket.publish()
        except BaseException:
            self._shutdown(grace=None)
            raise

    def remove_socket(self) -> None:
        """Take the socket's path away before the server stops (the kubelet deregisters
        a plugin whose registration socket is gone); calls in flight still finish."""
        self._socket.remove()

    def stop(self, grace: float | None = 1.0) -> None:
        """Stop serving (in-flight calls get `grace` seconds) and remove our own socket.

        Idempotent. A socket at the path that another server created is left alone.
        """
        self._shutdown(grace)

    def _shutdown(self, grace: float | None) -> None:
        self._server.stop(grace).wait()
        self._executor.shutdown(wait=True)
        self._socket.remove()


def start_unix_server(
    path: str,
    register: Callable[[grpc.Server], None],
    *,
    max_workers: int = 8,
    name: str = "grpc",
    interceptors: Sequence[grpc.ServerInterceptor] = (),
    options: Sequence[tuple[str, Any]] = (),
) -> UnixSocketServer:
    """Start a gRPC server on the unix socket `path`.

    `register` adds the servicers to the grpc.Server before it starts; `interceptors`
    see every call (`simdra._driver.kubelet.call_counts`); `options` are gRPC channel arguments
    (("grpc.max_receive_message_length", n)). Creates the parent directories, replaces
    a stale socket, refuses a non-socket file at `path` (SocketPathError) and returns
    once the socket at `path` accepts calls.
    """
    return UnixSocketServer(path, register, max_workers=max_workers, name=name,
                            interceptors=interceptors, options=options)
