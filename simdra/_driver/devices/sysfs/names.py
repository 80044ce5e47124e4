"""Stable device names (DNS labels) from hardware identity, never enumeration order (pure).

A GPU is named after its PCI address (`gpu-0000-3b-00-0`), a NIC after its interface
name (`nic-eth0`): the same hardware gets the same name on every rescan and restart, and
a device appearing or disappearing never renames the others.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Sequence

MAX_LABEL = 63
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NOT_LABEL = re.compile(r"[^a-z0-9]+")


def label(prefix: str, ident: str) -> str:
    """`<prefix>-<ident>` as a DNS label.

    An `ident` that is already a label is used as is. Otherwise (upper case, `.`, `:`,
    `@`, ...) it is lower-cased with runs of other characters turned into `-`; unless it
    is a PCI address, whose fixed format keeps that mapping one-to-one, a short hash of
    the original is appended so that `Eth0` and `eth0`, or `a.b` and `a_b`, cannot meet.
    """
    if _LABEL.match(ident):
        return _fit(f"{prefix}-{ident}")
    body = _NOT_LABEL.sub("-", ident.lower()).strip("-")
    if not _is_pci_address(ident):
        digest = hashlib.sha256(ident.encode()).hexdigest()[:6]
        body = f"{body}-{digest}" if body else digest
    return _fit(f"{prefix}-{body}")


def unique_names(candidates: Sequence[tuple[str, str]]) -> list[str]:
    """Final names for `(name, identity)` pairs, in input order.

    Names are unique already in practice; should two devices still meet (a hash
    collision), the one with the smaller identity keeps the name and the others get
    `-2`, `-3`, ... in identity order, so the outcome does not depend on scan order.
    """
    by_name: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for index, (name, identity) in enumerate(candidates):
        by_name[name].append((identity, index))
    taken = set(by_name)
    result = [name for name, _ in candidates]
    for name, holders in by_name.items():
        for rank, (_, index) in enumerate(sorted(holders)[1:], start=2):
            result[index] = _free_suffix(name, rank, taken)
    return result


def _free_suffix(name: str, rank: int, taken: set[str]) -> str:
    while True:
        suffix = f"-{rank}"
        candidate = _fit(name[: MAX_LABEL - len(suffix)] + suffix)
        if candidate not in taken:
            taken.add(candidate)
            return candidate
        rank += 1


def _fit(name: str) -> str:
    """Cut to the 63-character label limit without leaving a trailing dash."""
    return name[:MAX_LABEL].rstrip("-")


def _is_pci_address(ident: str) -> bool:
    return re.fullmatch(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]", ident) is not None
