"""ClaimSource backed by the API server through the official kubernetes client."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from driver.claims.errors import ClaimError, ClaimNotFound
from driver.core.textlimits import clip
from driver.kube import api_exception_parts, api_exception_text, response_json

if TYPE_CHECKING:
    from kubernetes import client

# Well inside the kubelet's 45 s NodePrepareResources deadline, so a hung API server
# turns into a per-claim error instead of a cancelled call. The claims of one call are
# read in parallel, all within prepare_planner.FETCH_DEADLINE_S (25 s).
DEFAULT_TIMEOUT_S = 20.0


class ApiClaimSource:
    """Reads ResourceClaims (resource.k8s.io/v1) as raw JSON dicts.

    Raw JSON rather than the client's model objects: the parser ignores unknown fields,
    while model deserialization would drop or reject fields newer than the client.
    """

    def __init__(self, api_client: client.ApiClient, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        from kubernetes import client

        self._api = client.ResourceV1Api(api_client)
        self._timeout_s = timeout_s

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        """The claim `namespace/name`; ClaimNotFound on 404, ClaimReadError (one line:
        status, reason, message) for any other answer of the API server."""
        from kubernetes.client.exceptions import ApiException

        try:
            response = self._api.read_namespaced_resource_claim(
                name, namespace, _preload_content=False, _request_timeout=self._timeout_s
            )
        except ApiException as exc:
            where = f"claim {clip(namespace)}/{clip(name)}"
            if exc.status == 404:
                raise ClaimNotFound(f"{where}: not found in the API server (deleted?)") from None
            raise ClaimReadError(
                f"{where}: read from the API server: {api_exception_text(exc)}",
                api_exception_parts(exc)[0],
            ) from None
        claim = response_json(response)
        if not isinstance(claim, dict):
            raise ValueError(
                f"claim {clip(namespace)}/{clip(name)}: the API server sent a non-object"
            )
        return claim


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
