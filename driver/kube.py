"""Connecting to the API server with the official kubernetes client, and what its
failures say in one line.

The client is the heaviest import of the plugin (about half a second of CPU), so it is
imported only where a client is built or an answer read: `check_cluster_config` makes
the cheap checks at once (exit 2 before anything starts), and `ApiClientLoader` builds
the client on a thread of its own once the kubelet's sockets serve.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from driver.core.textlimits import one_line

if TYPE_CHECKING:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

# Where a pod's ServiceAccount credentials are mounted (as the client's in-cluster loader
# reads them).
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# Connections to the API server kept open for reuse (as many as prepares in flight).
API_CONNECTIONS = 64


class ClusterConfigError(Exception):
    """No usable cluster configuration; the message is one line naming the flag."""


def check_cluster_config(kubeconfig: str | None) -> None:
    """The checks of `load_api_client` that need no client: the kubeconfig file is
    readable YAML with a mapping on top, or, without one, the pod's environment and
    ServiceAccount files are there. Raises ClusterConfigError (one line)."""
    if kubeconfig:
        _read_kubeconfig(kubeconfig)
        return
    missing = [v for v in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
               if not os.environ.get(v)]
    missing += [str(SERVICE_ACCOUNT_DIR / f) for f in ("token", "ca.crt")
                if not (SERVICE_ACCOUNT_DIR / f).is_file()]
    if missing:
        raise ClusterConfigError(
            "no cluster configuration: not running in a pod with a service account "
            f"(missing {', '.join(missing)}) and no --kubeconfig (env KUBECONFIG) given")


class ApiClientLoader:
    """Builds the ApiClient on a background thread; `get()` waits for it.

    Lets the plugin serve the kubelet before the client is imported: a prepare that
    comes first waits here, everything else has already started.
    """

    def __init__(self, kubeconfig: str | None,
                 on_error: Callable[[], None] | None = None) -> None:
        """on_error: called (on the loading thread) when loading failed."""
        self._kubeconfig = kubeconfig
        self._on_error = on_error
        self._done = threading.Event()
        self._client: client.ApiClient | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._load, name="api-client", daemon=True)

    def start(self) -> ApiClientLoader:
        """Start loading; returns self."""
        self._thread.start()
        return self

    def _load(self) -> None:
        try:
            self._client = load_api_client(self._kubeconfig)
        except BaseException as err:  # handed to whoever waits in get()
            self._error = err
        finally:
            self._done.set()
        if self._error is not None and self._on_error is not None:
            self._on_error()

    def get(self, timeout: float | None = None) -> client.ApiClient:
        """The client; re-raises what loading it raised, TimeoutError after `timeout`."""
        if not self._done.wait(timeout):
            raise TimeoutError("the Kubernetes API client is still loading")
        if self._error is not None:
            raise self._error
        assert self._client is not None
        return self._client

    def error(self) -> BaseException | None:
        """What loading raised, once it ended with an error; else None."""
        return self._error if self._done.is_set() else None

    def close(self) -> None:
        """Close the client if it was built (waits for a started load to end)."""
        if self._thread.ident is None:
            return
        self._done.wait()
        if self._client is not None:
            self._client.close()


def load_api_client(kubeconfig: str | None) -> client.ApiClient:
    """An ApiClient from a kubeconfig file, or from the pod's service account when None.

    Raises ClusterConfigError when neither works. The client's own (urllib3) retries are
    off: every caller retries with its own backoff and logs each attempt once, and a
    second retry layer underneath would multiply the attempts and the log lines.
    """
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    if kubeconfig:
        _load_kubeconfig(kubeconfig, configuration)
    else:
        try:
            config.load_incluster_config(client_configuration=configuration)
        except ConfigException as err:
            raise ClusterConfigError(
                "no cluster configuration: not running in a pod with a service account "
                f"({err}) and no --kubeconfig (env KUBECONFIG) given") from None
    configuration.retries = False
    # Concurrent prepares each read their claim: the default (5 per CPU) would open and
    # drop a connection per read beyond it, with a warning each time.
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize,
                                                API_CONNECTIONS)
    return client.ApiClient(configuration)


def _read_kubeconfig(path: str) -> None:
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
        raise ClusterConfigError(f"{where}: not valid YAML: {_first_line(err)}") from None
    if not isinstance(document, dict):
        raise ClusterConfigError(f"{where}: not a kubeconfig (no mapping at the top)")
    problem = _kubeconfig_problem(document)
    if problem:
        raise ClusterConfigError(f"{where}: not a usable kubeconfig: {problem}")


def _kubeconfig_problem(document: dict[str, Any]) -> str | None:
    """What the client's loader would refuse about the current context, found without
    it: the context, and the cluster it names with a server."""
    current = document.get("current-context")
    if not current:
        return "no current-context"
    context = _named(document.get("contexts"), current, "context")
    if context is None:
        return f"current-context {current!r} is not among the contexts"
    cluster = _named(document.get("clusters"), context.get("cluster"), "cluster")
    if cluster is None or not cluster.get("server"):
        return f"context {current!r} names no cluster with a server"
    return None


def _named(entries: object, name: object, key: str) -> dict[str, Any] | None:
    """The `key` mapping of the entry called `name` in a kubeconfig list, if any."""
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("name") == name:
            value = entry.get(key)
            return value if isinstance(value, dict) else None
    return None


def _load_kubeconfig(path: str, configuration: client.Configuration) -> None:
    from kubernetes import config
    from kubernetes.config.config_exception import ConfigException

    where = f"--kubeconfig={path!r}"
    _read_kubeconfig(path)
    try:
        # From the file (not the parsed dict): relative certificate paths are relative
        # to the file's directory.
        config.load_kube_config(config_file=path, client_configuration=configuration)
    except (ConfigException, ValueError, TypeError, KeyError, AttributeError) as err:
        raise ClusterConfigError(f"{where}: not a usable kubeconfig: {_first_line(err)}") \
            from None


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def api_exception_parts(exc: ApiException) -> tuple[int, str, str]:
    """(HTTP status, reason, message) of a failed call, bounded and one line each.

    The reason is the Status object's (`NotFound`, `AlreadyExists`) when the body is one,
    else the HTTP reason phrase; the message is the Status message, else the body.
    `str(exc)` is never used: it carries the response headers and the whole body.
    """
    return status_parts(int(exc.status or 0), str(exc.reason or ""), exc.body)


def status_parts(status: int, reason: str, body: object) -> tuple[int, str, str]:
    """(HTTP status, reason, message) of an error answer, as `api_exception_parts` says,
    from its status, reason phrase and body (bytes or text)."""
    message = ""
    if isinstance(body, bytes):
        body = body.decode(errors="replace")
    try:
        decoded = json.loads(str(body or "{}"))
        if not isinstance(decoded, dict):
            raise ValueError("not a Status object")
        reason = str(decoded.get("reason") or reason)
        message = str(decoded.get("message") or "")
    except ValueError:
        message = str(body or "")
    return status, one_line(reason), one_line(message)


def response_json(response: object) -> Any:
    """The decoded body of a generated API method's answer when it was called with
    `_preload_content=False`: then it returns the raw urllib3 response, although its
    annotations name the model class it would otherwise build."""
    import urllib3

    return json.loads(cast(urllib3.HTTPResponse, response).data)


def api_exception_text(exc: ApiException) -> str:
    """`<status> <reason>: <message>` of a failed call, in one bounded line."""
    return status_text(*api_exception_parts(exc))


def status_text(status: int, reason: str, message: str) -> str:
    """`<status> <reason>: <message>` from `status_parts`, in one line."""
    text = f"{status or 'no response'} {reason}".rstrip()
    return f"{text}: {message}" if message else text
