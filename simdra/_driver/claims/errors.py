"""Errors about one claim; their text goes verbatim into the kubelet's per-claim answer."""

from __future__ import annotations

from simdra._driver.core.textlimits import one_line


class ClaimError(Exception):
    """Something is wrong with one claim; the message names the claim and the problem."""


class ClaimNotFound(ClaimError):
    """The ResourceClaim does not exist (any more) in the API server."""


def claim_label(namespace: str, name: str, uid: str) -> str:
    """How every message names a claim: `ns/name (uid U)`, each value clipped (they come
    from the kubelet or the API server and may be anything) and on one line."""
    return f"claim {one_line(namespace)}/{one_line(name)} (uid {one_line(uid)})"
