"""ClaimSource backed by the API server, over our client's connection pool and
credentials (`simdra._driver.kubeapi`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from simdra._driver.claims.errors import ClaimError, ClaimNotFound
from simdra._driver.core.textlimits import clip
from simdra._driver.kubeapi import ApiStatusError, RestClient, status_text

# Well inside the kubelet's 45 s NodePrepareResources deadline, so a hung API server
# turns into a per-claim error instead of a cancelled call. The claims of one call are
# read in parallel, all within prepare_planner.FETCH_DEADLINE_S (25 s).
DEFAULT_TIMEOUT_S = 20.0
CLAIM_PATH = "/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"


class ApiClaimSource:
    """Reads ResourceClaims (resource.k8s.io/v1) as raw JSON dicts.

    Raw JSON rather than model objects: the parser ignores unknown fields, while model
    deserialization would drop or reject fields newer than the client.
    """

    def __init__(self, api_client: RestClient, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._client = api_client
        self._timeout = timeout_s

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        """The claim `namespace/name`; ClaimNotFound only when the API server says that
        this claim does not exist (`names_missing_claim`), ClaimReadError (one line:
        status, reason, message) for any other error answer, a 404 of another kind
        included."""
        path = CLAIM_PATH.format(namespace=quote(namespace, safe=""), name=quote(name, safe=""))
        where = f"claim {clip(namespace)}/{clip(name)}"
        try:
            claim = self._client.request("GET", path, timeout=self._timeout)
        except ApiStatusError as err:
            if names_missing_claim(err.status, err.body, name):
                raise ClaimNotFound(f"{where}: not found in the API server (deleted?)") from None
            raise ClaimReadError(f"{where}: read from the API server: "
                                 f"{status_text(*err.parts())}", err.status) from None
        if not isinstance(claim, dict):
            raise ValueError(f"{where}: the API server sent a non-object")
        return claim


def names_missing_claim(status: int, body: bytes, name: str) -> bool:
    """True only for the API server's word that claim `name` does not exist: a 404
    whose Status has reason NotFound and details naming this claim (group
    resource.k8s.io, kind resourceclaims). A 404 for a group/version not served, a
    proxy's page or a Status about something else is no evidence that the claim is gone:
    reconciliation would free a device in use on it."""
    if status != 404:
        return False
    try:
        decoded = json.loads(body or b"{}")
    except (ValueError, RecursionError):  # not JSON, or nested deeper than it parses
        return False
    details = decoded.get("details") if isinstance(decoded, dict) else None
    return (
        isinstance(details, dict)
        and decoded.get("reason") == "NotFound"
        and details.get("name") == name
        and details.get("kind") == "resourceclaims"
        and details.get("group") == "resource.k8s.io"
    )


class DeferredClaimSource:
    """An ApiClaimSource over a client that is still being built (`ApiClientLoader`):
    the first read waits for it, later reads go straight through."""

    def __init__(self, client_of: Callable[[], RestClient]) -> None:
        self._client_of = client_of
        self._source: ApiClaimSource | None = None

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        """As ApiClaimSource.get, once the client exists."""
        if self._source is None:
            self._source = ApiClaimSource(self._client_of())
        return self._source.get(namespace, name)


class ClaimReadError(ClaimError):
    """The API server answered a claim read with an error other than "this claim does
    not exist"."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status
