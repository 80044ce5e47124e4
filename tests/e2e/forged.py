"""Requests sent to the real API server as one of our ServiceAccounts, with its own token
or as cluster-admin impersonating it, to see what RBAC and our admission policies let it
do."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simdra._driver.testing.cluster import wait_until

from .controlplane import ADMIN_TOKEN, ControlPlane

JSON = dict[str, Any]
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
NODES = "/api/v1/nodes"
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class Caller:
    """Who sends: a bearer token, or cluster-admin impersonating `user` (a ServiceAccount
    user gets its groups, as with its own token)."""

    cp: ControlPlane
    token: str = ""
    user: str = ""

    def headers(self) -> dict[str, str]:
        if self.token:
            return {"Authorization": f"Bearer {self.token}"}
        return {"Authorization": f"Bearer {ADMIN_TOKEN}", "Impersonate-User": self.user}

    def send(self, method: str, path: str, body: JSON | None = None, *,
             content_type: str = "application/json") -> tuple[int, str]:
        """(HTTP status, answer text); dryRun=All, so that nothing a test lets through
        is stored."""
        separator = "&" if "?" in path else "?"
        request = urllib.request.Request(
            f"{self.cp.server}{path}{separator}dryRun=All", method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={**self.headers(), "Content-Type": content_type})
        context = ssl.create_default_context(cafile=str(self.cp.certs.ca_cert))
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as err:
            return int(err.code), err.read().decode()

    def refused(self, method: str, path: str, body: JSON | None = None, *,
                content_type: str = "application/json") -> tuple[int, str]:
        """The answer once the request is refused. The API server enforces a policy a
        moment after `kubectl apply` (its informer, then the type check): a write may
        pass until then."""
        def answer() -> tuple[int, str] | None:
            status, text = self.send(method, path, body, content_type=content_type)
            return None if status < 300 else (status, text)
        return wait_until(answer, 30, f"{method} {path} refused (the policy in effect)")


def slice_body(name: str, driver: str, node: str) -> JSON:
    """A ResourceSlice with no devices: what admission sees is all that matters."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": []}}


def node_body(name: str, labels: Mapping[str, str] | None = None) -> JSON:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": dict(labels or {})}}


def denied(answer: tuple[int, str], message: str) -> bool:
    """A ValidatingAdmissionPolicy's denial (422 Invalid: ours name no reason) with
    `message` in it."""
    status, text = answer
    return status == 422 and message in text
