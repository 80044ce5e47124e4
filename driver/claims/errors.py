"""Errors about one claim; their text goes verbatim into the kubelet's per-claim answer."""

from __future__ import annotations

from fractions import Fraction

from driver.core.quantity import QuantityError, format_quantity
from driver.core.textlimits import clip


class ClaimError(Exception):
    """Something is wrong with one claim; the message names the claim and the problem."""


class ClaimNotFound(ClaimError):
    """The ResourceClaim does not exist (any more) in the API server."""


def claim_label(namespace: str, name: str, uid: str) -> str:
    """How every message names a claim: `ns/name (uid U)`, each value clipped (they come
    from the kubelet or the API server and may be anything)."""
    return f"claim {clip(namespace)}/{clip(name)} (uid {clip(uid)})"


def quantity_text(amount: Fraction) -> str:
    """An exact amount as a quantity ("10G", "1500m"), or "n/d" below milli precision."""
    try:
        return format_quantity(amount)
    except QuantityError:
        return str(amount)
