"""The API client `kubectl dra` reads with (the plugin's own, `simdra._driver.kube`), where its
kubeconfig comes from, and every failure as the one line the command prints."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from simdra._driver.dra_cli.gather import ListFailed
from simdra._driver.kube import SERVICE_ACCOUNT_DIR, load_api_client
from simdra._driver.kubeapi.client import RestClient
from simdra._driver.kubeapi.config import error_text
from simdra._driver.kubeapi.errors import ApiStatusError, ClusterConfigError

NO_CONFIG = ("no kubeconfig: give --kubeconfig, set KUBECONFIG or create ~/.kube/config "
             "(or run in a pod with a service account)")


class CommandError(Exception):
    """What the command prints as its one line on stderr, with the exit status."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def kubeconfig_path(flag: str | None, environ: Mapping[str, str] = os.environ,
                    home: Path | None = None) -> str | None:
    """The kubeconfig kubectl would read: --kubeconfig, else the first file of
    $KUBECONFIG that exists, else ~/.kube/config when it exists; None means in-cluster.
    CommandError when there is none and no pod environment either."""
    if flag:
        return flag
    for entry in (environ.get("KUBECONFIG") or "").split(os.pathsep):
        if entry and Path(entry).is_file():
            return entry
    default = (home or Path.home()) / ".kube" / "config"
    if default.is_file():
        return str(default)
    if environ.get("KUBERNETES_SERVICE_HOST") and SERVICE_ACCOUNT_DIR.is_dir():
        return None
    raise CommandError(NO_CONFIG)


def connect(flag: str | None) -> RestClient:
    """The client for the kubeconfig (or in-cluster config); CommandError when unusable."""
    path = kubeconfig_path(flag)
    try:
        return load_api_client(path)
    except ClusterConfigError as err:
        raise CommandError(str(err)) from None


def error_line(err: ListFailed) -> str:
    """One line for a failed request: the refused RBAC verb and resource for a 403, the
    missing API group for a 404, the server unreachable otherwise."""
    cause = err.cause
    if isinstance(cause, ApiStatusError):
        status, reason, message = cause.parts()
        if status == 403:
            return (f"forbidden: cannot {err.verb} {err.resource} (RBAC verb {err.verb!r} on "
                    f"{err.resource!r} refused): {message or reason}")
        if status == 401:
            return f"unauthorized: the cluster refused the credentials: {message or reason}"
        if status == 404 and "resource.k8s.io" in err.path:
            return ("this cluster does not serve resource.k8s.io/v1 (404 for "
                    f"{err.resource}): DRA needs Kubernetes 1.34 or later")
        return f"{err.verb} {err.resource}: {status} {reason}: {message}".rstrip(": ")
    return f"cannot reach the API server ({err.verb} {err.resource}): {error_text(cause)}"
