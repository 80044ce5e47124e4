"""Clusters `kubectl dra` cannot read, as small HTTP servers: one whose RBAC refuses some
resources (403 with the Status text the API server writes) and one that does not serve
resource.k8s.io/v1 (Kubernetes 1.33 and older answer 404 there). Everything else is
answered with an empty list, so the first refused or missing resource is what fails."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from simdra._driver.testing.kubeconfig import write_kubeconfig

USER = "viewer"


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
            "code": code, "message": message}


def forbidden_message(verb: str, plural: str, group: str, name: str, namespace: str) -> str:
    """The API server's text for an RBAC refusal (k8s.io/apiserver's NewForbidden)."""
    resource = f"{plural}.{group}" if group else plural
    subject = f'{resource} "{name}"' if name else resource
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    return (f'{subject} is forbidden: User "{USER}" cannot {verb} resource "{plural}" in '
            f'API group "{group}" {scope}')


class _Answer(BaseHTTPRequestHandler):
    refuse: frozenset[str] | None = None  # plurals answered 403; None: every one
    serves_dra = True  # whether resource.k8s.io/v1 is served

    def do_GET(self) -> None:
        parts = self.path.split("?")[0].strip("/").split("/")
        group = parts[1] if parts[0] == "apis" else ""
        rest = parts[3:] if parts[0] == "apis" else parts[2:]
        namespace = rest[1] if rest[0] == "namespaces" and len(rest) > 2 else ""
        plural, *name = rest[2:] if namespace else rest
        verb = "get" if name else "list"
        if self.refuse is None or plural in self.refuse:
            code, answer = 403, _status(403, "Forbidden", forbidden_message(
                verb, plural, group, "".join(name), namespace))
        elif group == "resource.k8s.io" and not self.serves_dra:
            code, answer = 404, _status(404, "NotFound",
                                        "the server could not find the requested resource")
        else:
            code, answer = 200, {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": []}
        data = json.dumps(answer).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def answering(kubeconfig: Path, *, refuse: frozenset[str] | None = frozenset(),
              serves_dra: bool = True) -> Iterator[Path]:
    """A server answering as told, and `kubeconfig` written for it."""
    handler = type("Handler", (_Answer,), {"refuse": refuse, "serves_dra": serves_dra})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield write_kubeconfig(kubeconfig, f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
