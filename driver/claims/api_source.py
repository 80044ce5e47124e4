"""ClaimSource backed by the API server through the official kubernetes client."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from driver.claims.errors import ClaimError, ClaimNotFound
from driver.core.textlimits import clip
from driver.kube import api_exception_parts, api_exception_text

# Well inside the kubelet's 45 s NodePrepareResources deadline, so a hung API server
# turns into a per-claim error instead of a cancelled call.
DEFAULT_TIMEOUT_S = 20.0


class ApiClaimSource:
    """Reads ResourceClaims (resource.k8s.io/v1) as raw JSON dicts.

    Raw JSON rather than the client's model objects: the parser ignores unknown fields,
    while model deserialization would drop or reject fields newer than the client.
    """

    def __init__(self, api_client: client.ApiClient, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._api = client.ResourceV1Api(api_client)
        self._timeout_s = timeout_s

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        """The claim `namespace/name`; ClaimNotFound on 404, ClaimReadError (one line:
        status, reason, message) for any other answer of the API server."""
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
        claim = json.loads(response.data)
        if not isinstance(claim, dict):
            raise ValueError(
                f"claim {clip(namespace)}/{clip(name)}: the API server sent a non-object"
            )
        return claim


class ClaimReadError(ClaimError):
    """The API server answered a claim read with an error other than 404."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status
