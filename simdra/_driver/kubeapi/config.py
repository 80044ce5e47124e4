"""A ClusterAccess from where a plugin finds its cluster: the pod's ServiceAccount
(in-cluster), or a kubeconfig file's current context.

Of a kubeconfig we read the cluster's server, certificate-authority(-data),
insecure-skip-tls-verify and tls-server-name, and the user's client-certificate(-data),
client-key(-data), token and tokenFile (re-read when it changes; it wins over token, as
in client-go). Users with exec, auth-provider or username/password are handed to the
official client's loader (`simdra._driver.kubeapi.fallback`); impersonation and proxy-url are
refused with one line naming the field. Every error is one ClusterConfigError line.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from simdra._driver.kubeapi.access import (
    ClusterAccess,
    Credentials,
    NoCredentials,
    StaticToken,
    TokenFile,
)
from simdra._driver.kubeapi.errors import ClusterConfigError

# Credentials we leave to the official client's loader.
FALLBACK_USER_FIELDS = ("exec", "auth-provider", "username", "password")
UNSUPPORTED = {
    "user": ("as", "as-uid", "as-groups", "as-user-extra"),
    "cluster": ("proxy-url",),
}
NO_CLUSTER = "no cluster configuration: not running in a pod with a service account"
NO_KUBECONFIG = "and no --kubeconfig (env KUBECONFIG) given"


def in_cluster_access(account_dir: Path, environ: Mapping[str, str] = os.environ) -> ClusterAccess:
    """The API server as a pod sees it: KUBERNETES_SERVICE_HOST/PORT, the mounted
    ServiceAccount token (re-read when the kubelet rotates it) and CA certificate."""
    missing = [v for v in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
               if not environ.get(v)]
    missing += [str(account_dir / f) for f in ("token", "ca.crt")
                if not (account_dir / f).is_file()]
    if missing:
        raise ClusterConfigError(f"{NO_CLUSTER} (missing {', '.join(missing)}) {NO_KUBECONFIG}")
    host = environ["KUBERNETES_SERVICE_HOST"]
    host = f"[{host}]" if ":" in host else host  # an IPv6 address
    try:
        token = TokenFile(account_dir / "token")
    except (OSError, ValueError) as err:
        raise ClusterConfigError(f"{NO_CLUSTER} ({error_text(err)}) {NO_KUBECONFIG}") from None
    return ClusterAccess(server=f"https://{host}:{environ['KUBERNETES_SERVICE_PORT']}",
                         ca_file=str(account_dir / "ca.crt"), credentials=token)


def kubeconfig_access(path: str) -> ClusterAccess:
    """The current context's cluster and user of the kubeconfig at `path` (relative
    file names in it are relative to its directory)."""
    where = f"--kubeconfig={path!r}"
    cluster, user = current_context(read_kubeconfig(path), where)
    for kind, entry in (("cluster", cluster), ("user", user)):
        refused = [f for f in UNSUPPORTED[kind] if f in entry]
        if refused:
            raise ClusterConfigError(f"{where}: {kind} field {refused[0]!r} is not supported")
    if any(f in user for f in FALLBACK_USER_FIELDS):
        from simdra._driver.kubeapi.fallback import official_access

        return official_access(path, where)
    try:
        return _access(cluster, user, Path(path).parent)
    except (OSError, ValueError) as err:
        raise ClusterConfigError(f"{where}: not a usable kubeconfig: {error_text(err)}") from None


def read_kubeconfig(path: str) -> dict[str, Any]:
    """The kubeconfig at `path` parsed, with a current context that names a cluster
    with a server; ClusterConfigError (one line) otherwise."""
    import yaml  # only with --kubeconfig: in a pod the plugin never parses YAML

    where = f"--kubeconfig={path!r}"
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else err
        raise ClusterConfigError(f"{where}: cannot read: {reason}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ClusterConfigError(f"{where}: not valid YAML: {error_text(err)}") from None
    if not isinstance(document, dict):
        raise ClusterConfigError(f"{where}: not a kubeconfig (no mapping at the top)")
    current_context(document, where)
    return document


def current_context(document: dict[str, Any], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(cluster, user) of the current context; a context without a user has {}."""
    current = document.get("current-context")
    if not current:
        raise _unusable(where, "no current-context")
    context = _named(document.get("contexts"), current, "context")
    if context is None:
        raise _unusable(where, f"current-context {current!r} is not among the contexts")
    cluster = _named(document.get("clusters"), context.get("cluster"), "cluster")
    if cluster is None or not cluster.get("server"):
        raise _unusable(where, f"context {current!r} names no cluster with a server")
    return cluster, _named(document.get("users"), context.get("user"), "user") or {}


def _unusable(where: str, problem: str) -> ClusterConfigError:
    return ClusterConfigError(f"{where}: not a usable kubeconfig: {problem}")


def _named(entries: object, name: object, key: str) -> dict[str, Any] | None:
    """The `key` mapping of the entry called `name` in a kubeconfig list, if any."""
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("name") == name:
            value = entry.get(key)
            return value if isinstance(value, dict) else None
    return None


def _access(cluster: dict[str, Any], user: dict[str, Any], base: Path) -> ClusterAccess:
    server = str(cluster["server"])
    return ClusterAccess(
        server=server if "://" in server else f"https://{server}",
        ca_file=_file(cluster, "certificate-authority", base),
        ca_data=_data(cluster, "certificate-authority-data"),
        cert_file=_file(user, "client-certificate", base),
        cert_data=_data(user, "client-certificate-data"),
        key_file=_file(user, "client-key", base),
        key_data=_data(user, "client-key-data"),
        insecure=cluster.get("insecure-skip-tls-verify") is True,
        tls_server_name=str(cluster["tls-server-name"]) if cluster.get("tls-server-name")
        else None,
        credentials=_credentials(user, base),
    )


def _credentials(user: dict[str, Any], base: Path) -> Credentials:
    token_file = _file(user, "tokenFile", base)
    if token_file:
        return TokenFile(Path(token_file))
    return StaticToken(str(user["token"])) if user.get("token") else NoCredentials()


def _file(entry: dict[str, Any], key: str, base: Path) -> str | None:
    value = entry.get(key)
    return str(base / str(value)) if value else None  # an absolute value stays as it is


def _data(entry: dict[str, Any], key: str) -> bytes | None:
    value = entry.get(key)
    if not value:
        return None
    try:
        return base64.b64decode(str(value), validate=True)
    except binascii.Error:
        raise ValueError(f"{key} is not base64") from None


def error_text(err: BaseException) -> str:
    """The first line of an error, with the file name an OSError names."""
    if isinstance(err, OSError) and err.strerror:
        return f"{err.filename}: {err.strerror}" if err.filename else err.strerror
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__
