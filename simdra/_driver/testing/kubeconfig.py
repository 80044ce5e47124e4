"""Kubeconfig files for the API stand-in (or any server reachable without credentials)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

CONTEXT = "simdra"


def kubeconfig_document(
    server_url: str, namespace: str = "default", context: str = CONTEXT
) -> dict[str, Any]:
    """A kubeconfig with one cluster, one user without credentials, one current context."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server_url}}],
        "users": [{"name": context, "user": {}}],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": context, "user": context, "namespace": namespace},
            }
        ],
        "current-context": context,
        "preferences": {},
    }


def write_kubeconfig(
    path: str | Path, server_url: str, namespace: str = "default", context: str = CONTEXT
) -> Path:
    """Write a kubeconfig for `server_url` to `path` (mode 0600) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(kubeconfig_document(server_url, namespace, context), sort_keys=False)
    path.write_text(text)
    path.chmod(0o600)
    return path


def client_from_kubeconfig(path: str | Path, context: str | None = None) -> ApiClient:
    """An official-client `ApiClient` configured from the kubeconfig at `path`.

    The caller owns it: call `.close()` (or use it as a context manager) when done.
    """
    from kubernetes import config

    # The config loaders carry no annotations: what they return is Any to mypy.
    api_client: ApiClient = config.new_client_from_config(config_file=str(path), context=context)
    return api_client
