"""Where the preparer reads ResourceClaims from: a small seam over the API server."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Protocol

from simdra._driver.claims.errors import ClaimNotFound


class ClaimSource(Protocol):
    """Reads one ResourceClaim as raw resource.k8s.io/v1 JSON."""

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        """The claim `namespace/name`; raises ClaimNotFound when it does not exist, and
        any other exception when it cannot be read right now."""
        ...


class StaticClaimSource:
    """A ClaimSource over an in-memory map `(namespace, name) -> claim JSON`."""

    def __init__(self, claims: Mapping[tuple[str, str], dict[str, Any]] | None = None) -> None:
        self.claims: dict[tuple[str, str], dict[str, Any]] = dict(claims or {})

    def put(self, claim: dict[str, Any]) -> None:
        """Add or replace a claim, keyed by its metadata namespace and name."""
        meta = claim["metadata"]
        self.claims[(meta["namespace"], meta["name"])] = claim

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        """A deep copy of the stored claim, so callers cannot change the store."""
        try:
            return copy.deepcopy(self.claims[(namespace, name)])
        except KeyError:
            raise ClaimNotFound(f"claim {namespace}/{name}: not found") from None
