"""Our own small client for the Kubernetes API: configuration (in-cluster or a
kubeconfig), one connection pool with TLS and a bearer token, JSON requests and watches.

Why not the official `kubernetes` client: importing it costs the plugin process about
47 MiB of RSS (a thousand generated model modules and pydantic), and the plugin uses
none of that: it reads and writes plain JSON. Only kubeconfig credentials we do not
implement (exec, auth-provider, username/password) load the official client, and then
only its configuration loader (`simdra._driver.kubeapi.fallback`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simdra._driver.kubeapi.access import ClusterAccess
from simdra._driver.kubeapi.config import in_cluster_access, kubeconfig_access
from simdra._driver.kubeapi.errors import (
    ApiStatusError,
    ClusterConfigError,
    status_parts,
    status_text,
)

if TYPE_CHECKING:
    from simdra._driver.kubeapi.client import RestClient, Watch


def __getattr__(name: str) -> Any:
    # The client (urllib3, ssl) loads on first use: `simdra run` checks its cluster
    # configuration (`config`) before it serves the kubelet, and must not pay for it then.
    if name in ("RestClient", "Watch"):
        from simdra._driver.kubeapi import client

        return getattr(client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "ApiStatusError",
    "ClusterAccess",
    "ClusterConfigError",
    "RestClient",
    "Watch",
    "in_cluster_access",
    "kubeconfig_access",
    "status_parts",
    "status_text",
]
