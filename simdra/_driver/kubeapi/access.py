"""Where the API server is and how to prove who we are: `ClusterAccess`, and the
credentials that put a bearer token on each request."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


class Credentials(Protocol):
    """Headers that authenticate one request (asked for per request, so that a token
    that changes is used as soon as it does)."""

    def headers(self) -> dict[str, str]:
        """The authentication headers to send now ({} for none)."""
        ...


class NoCredentials:
    """No authentication headers (client certificates only, or an open server)."""

    def headers(self) -> dict[str, str]:
        """{}."""
        return {}


@dataclass(frozen=True)
class StaticToken:
    """A bearer token given once (a kubeconfig's `token`)."""

    token: str

    def headers(self) -> dict[str, str]:
        """The Authorization header with the token."""
        return {"Authorization": f"Bearer {self.token}"}


class TokenFile:
    """A bearer token read from a file, read again whenever the file changes.

    A pod's ServiceAccount token is bound and rotated by the kubelet (atomically, by a
    symlink swap), so the file is looked at (one stat) on every request. When a read
    fails after a token was read once, the last token is kept: the API server judges it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._token = ""
        self.read()

    def read(self) -> str:
        """The token, read again if the file changed; OSError or ValueError (an empty
        file) when there is none yet."""
        stat = os.stat(self.path)
        seen = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        with self._lock:
            if seen != self._seen:
                token = self.path.read_text().strip()
                if not token:
                    raise ValueError(f"{self.path}: empty token file")
                self._seen, self._token = seen, token
            return self._token

    def headers(self) -> dict[str, str]:
        """The Authorization header with the file's current token."""
        try:
            token = self.read()
        except (OSError, ValueError):
            if not self._token:
                raise
            token = self._token
        return {"Authorization": f"Bearer {token}"}


@dataclass(frozen=True)
class ClusterAccess:
    """The API server's address, how to trust it, and our credentials.

    PEM `*_data` and file paths are alternatives (data wins, as kubectl has it);
    `tls_server_name` is the name its certificate is checked against (and sent as
    SNI) instead of the host in `server`.
    """

    server: str
    ca_file: str | None = None
    ca_data: bytes | None = None
    cert_file: str | None = None
    cert_data: bytes | None = None
    key_file: str | None = None
    key_data: bytes | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    credentials: Credentials = field(default_factory=NoCredentials)
