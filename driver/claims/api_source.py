"""ClaimSource backed by the API server, over the official kubernetes client's
connection pool and credentials."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from driver.claims.errors import ClaimError, ClaimNotFound
from driver.core.textlimits import clip
from driver.kube import status_parts, status_text

if TYPE_CHECKING:
    from kubernetes import client

# Well inside the kubelet's 45 s NodePrepareResources deadline, so a hung API server
# turns into a per-claim error instead of a cancelled call. The claims of one call are
# read in parallel, all within prepare_planner.FETCH_DEADLINE_S (25 s).
DEFAULT_TIMEOUT_S = 20.0
CLAIM_PATH = "/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"


class ApiClaimSource:
    """Reads ResourceClaims (resource.k8s.io/v1) as raw JSON dicts.

    Raw JSON rather than the client's model objects: the parser ignores unknown fields,
    while model deserialization would drop or reject fields newer than the client. And
    one GET on the client's own connection pool with its credentials (a bearer token is
    asked for per call, so a refreshed token is used) rather than its generated method:
    that method's argument validation and request building cost more CPU than the
    read itself.
    """

    def __init__(self, api_client: client.ApiClient, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        import urllib3

        self._config = api_client.configuration
        self._pool = api_client.rest_client.pool_manager
        self._timeout = urllib3.Timeout(total=timeout_s)
        self._headers = {**api_client.default_headers, "Accept": "application/json"}

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        """The claim `namespace/name`; ClaimNotFound on 404, ClaimReadError (one line:
        status, reason, message) for any other answer of the API server."""
        path = CLAIM_PATH.format(namespace=quote(namespace, safe=""), name=quote(name, safe=""))
        response = self._pool.request("GET", self._config.host + path, headers=self._auth(),
                                      timeout=self._timeout)
        where = f"claim {clip(namespace)}/{clip(name)}"
        if response.status == 404:
            raise ClaimNotFound(f"{where}: not found in the API server (deleted?)")
        if not 200 <= response.status < 300:
            parts = status_parts(response.status, response.reason or "", response.data)
            raise ClaimReadError(f"{where}: read from the API server: {status_text(*parts)}",
                                 parts[0])
        claim = response.json()
        if not isinstance(claim, dict):
            raise ValueError(f"{where}: the API server sent a non-object")
        return claim

    def _auth(self) -> dict[str, str]:
        """The request headers with the credentials the client would send."""
        headers = dict(self._headers)
        for setting in self._config.auth_settings().values():
            if setting["in"] == "header":
                headers[setting["key"]] = setting["value"]
        return headers


class DeferredClaimSource:
    """An ApiClaimSource over a client that is still being built (`ApiClientLoader`):
    the first read waits for it, later reads go straight through."""

    def __init__(self, client_of: Callable[[], client.ApiClient]) -> None:
        self._client_of = client_of
        self._source: ApiClaimSource | None = None

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        """As ApiClaimSource.get, once the client exists."""
        if self._source is None:
            self._source = ApiClaimSource(self._client_of())
        return self._source.get(namespace, name)


class ClaimReadError(ClaimError):
    """The API server answered a claim read with an error other than 404."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status
