"""A bare HTTPS client of the real API server for the fleet bench: one keep-alive connection
per thread, JSON in and out, nothing else. The floor's requests go through it, so it must
cost no more than any client would (no models, no retries, no validation)."""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

JSON = dict[str, Any]


class ApiError(RuntimeError):
    """The server answered with an error status."""

    def __init__(self, status: int, method: str, path: str, text: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {text[:300]}")
        self.status = status


class Api:
    """Requests to https://host:port with a bearer token, one connection per thread."""

    def __init__(self, server: str, token: str, ca_file: Path) -> None:
        parsed = urllib.parse.urlparse(server)
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port or 443
        self.token = token
        self.context = ssl.create_default_context(cafile=str(ca_file))
        self.local = threading.local()

    def _connection(self) -> http.client.HTTPSConnection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self.context,
                                               timeout=120)
            self.local.conn = conn
        return conn

    def raw(self, method: str, path: str, body: JSON | None = None) -> bytes:
        """One request; the response body. Raises ApiError on a status >= 400."""
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn = self._connection()
        try:
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            payload = response.read()
        except (OSError, http.client.HTTPException):
            conn.close()  # a server-closed keep-alive connection: once more on a new one
            self.local.conn = None
            conn = self._connection()
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            payload = response.read()
        if response.status >= 400:
            raise ApiError(response.status, method, path, payload.decode(errors="replace"))
        return payload

    def call(self, method: str, path: str, body: JSON | None = None) -> JSON:
        """One request; the response as JSON."""
        return dict(json.loads(self.raw(method, path, body)))

    def items(self, path: str) -> list[JSON]:
        """Every item of a list (paged by the server's `continue`)."""
        out: list[JSON] = []
        token = ""
        while True:
            sep = "&" if "?" in path else "?"
            page = self.call("GET", f"{path}{sep}limit=500&continue={token}")
            out.extend(page.get("items", []))
            token = page.get("metadata", {}).get("continue", "")
            if not token:
                return out

    def watch(self, path: str, resource_version: str) -> Iterator[JSON]:
        """Watch events (each decoded) on a connection of its own, until the server ends it."""
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.context,
                                           timeout=600)
        sep = "&" if "?" in path else "?"
        conn.request("GET", f"{path}{sep}watch=1&resourceVersion={resource_version}"
                     "&allowWatchBookmarks=false",
                     headers={"Authorization": f"Bearer {self.token}"})
        response = conn.getresponse()
        if response.status >= 400:
            raise ApiError(response.status, "WATCH", path, response.read().decode())
        try:
            for line in response:
                if line.strip():
                    yield dict(json.loads(line))
        finally:
            conn.close()

    def metrics(self) -> str:
        """The server's /metrics text."""
        return self.raw("GET", "/metrics").decode()


def metric_sum(text: str, name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels` (Prometheus text)."""
    total = 0.0
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        head, _, value = line.rpartition(" ")
        if all(w in head for w in wanted):
            total += float(value)
    return total
