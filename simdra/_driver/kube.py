"""Connecting to the API server with our own client (`simdra._driver.kubeapi`), and what its
failures say in one line.

`check_cluster_config` makes the cheap checks at once (exit 2 before anything starts),
and `ApiClientLoader` builds the client on a thread of its own once the kubelet's
sockets serve (a kubeconfig with exec credentials loads the official client's loader,
the plugin's heaviest import).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from simdra._driver.kubeapi.config import (
    error_text,
    in_cluster_access,
    kubeconfig_access,
    read_kubeconfig,
)
from simdra._driver.kubeapi.errors import (
    ApiStatusError,
    ClusterConfigError,
    status_parts,
    status_text,
)

if TYPE_CHECKING:
    # The client itself (urllib3, ssl) loads on the loader's thread, once the kubelet's
    # sockets serve: `simdra run` imports this module before it serves them.
    from simdra._driver.kubeapi.client import RestClient

__all__ = ["ApiStatusError", "ClusterConfigError", "status_parts", "status_text"]

# Where a pod's ServiceAccount credentials are mounted.
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# Connections to the API server kept open for reuse (as many as prepares in flight).
API_CONNECTIONS = 64


def check_cluster_config(kubeconfig: str | None) -> None:
    """The checks of `load_api_client` that need no connection: the kubeconfig file is
    readable YAML with a usable current context, or, without one, the pod's environment
    and ServiceAccount files are there. Raises ClusterConfigError (one line)."""
    if kubeconfig:
        read_kubeconfig(kubeconfig)
    else:
        in_cluster_access(SERVICE_ACCOUNT_DIR)


class ApiClientLoader:
    """Builds the API client on a background thread; `get()` waits for it.

    Lets the plugin serve the kubelet before the client is imported and its TLS set up
    (or an exec credential plugin run): a prepare that comes first waits here,
    everything else has already started.
    """

    def __init__(self, kubeconfig: str | None,
                 on_error: Callable[[], None] | None = None) -> None:
        """on_error: called (on the loading thread) when loading failed."""
        self._kubeconfig = kubeconfig
        self._on_error = on_error
        self._done = threading.Event()
        self._client: RestClient | None = None
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

    def get(self, timeout: float | None = None) -> RestClient:
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


def load_api_client(kubeconfig: str | None) -> RestClient:
    """A client from a kubeconfig file, or from the pod's service account when None,
    with API_CONNECTIONS connections (as many as prepares in flight).

    Raises ClusterConfigError (one line) when neither works.
    """
    if kubeconfig:
        access, where = kubeconfig_access(kubeconfig), f"--kubeconfig={kubeconfig!r}"
    else:
        access, where = in_cluster_access(SERVICE_ACCOUNT_DIR), str(SERVICE_ACCOUNT_DIR)
    import ssl

    from simdra._driver.kubeapi.client import RestClient

    try:
        return RestClient(access, connections=API_CONNECTIONS)
    except (OSError, ssl.SSLError, ValueError) as err:
        raise ClusterConfigError(f"{where}: TLS setup failed: {error_text(err)}") from None


def api_exception_parts(exc: ApiStatusError) -> tuple[int, str, str]:
    """(HTTP status, reason, message) of a failed call, bounded and one line each.

    The reason is the Status object's (`NotFound`, `AlreadyExists`) when the body is one,
    else the HTTP reason phrase; the message is the Status message, else the body.
    """
    return exc.parts()


def api_exception_text(exc: ApiStatusError) -> str:
    """`<status> <reason>: <message>` of a failed call, in one bounded line."""
    return status_text(*exc.parts())


def response_json(response: object) -> Any:
    """The decoded body of an official client's generated API method's answer when it
    was called with `_preload_content=False` (the test harness calls them so): then it
    returns the raw urllib3 response, although its annotations name the model class."""
    import urllib3

    return json.loads(cast(urllib3.HTTPResponse, response).data)
