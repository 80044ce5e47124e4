"""ResourceSlice names: an index prefix for priority and matching, then a stable body.

Naming scheme (our choice, documented in the publisher): a slice at position `index` of
pool `pool` is called

    <index hex, zero-padded to >= 5>-<driver>-<node>-<hash of driver, node, pool>

The index prefix is exactly the one the 1.36 Go helper uses, so the allocator's
"sort by name, first fit" order follows the slice order, and slices published by the
Go helper (which appends a random generateName suffix instead of our hash) are matched
by their prefix and adopted, not recreated.

Unlike the Go helper we do not use generateName: a deterministic name makes a create
idempotent. When the response to a create is lost (connection reset, timeout), the
retry gets 409 AlreadyExists instead of silently publishing a second copy of the same
devices, so no mutation cache with a TTL is needed to guard against duplicates.
"""

from __future__ import annotations

import hashlib

INDEX_MIN_WIDTH = 5
_MAX_NAME = 253
_HASH_LEN = 10


def index_width(slice_count: int) -> int:
    """Width of the hex index prefix for a pool of `slice_count` slices (at least 5)."""
    return max(INDEX_MIN_WIDTH, len(format(max(slice_count - 1, 0), "x")))


def encode_index(index: int, width: int) -> str:
    """`index` as zero-padded lower-case hex of `width` characters."""
    return format(index, f"0{width}x")


def decode_index(name: str, width: int) -> int | None:
    """The index encoded in the prefix of `name`, or None when it has no valid prefix.

    The prefix must be exactly `width` hex digits followed by '-', as the Go helper
    requires; a slice with another width (the pool grew past 16^width slices) is
    treated as unmatched and replaced.
    """
    if len(name) <= width or name[width] != "-":
        return None
    prefix = name[:width]
    if not all(c in "0123456789abcdef" for c in prefix):
        return None
    return int(prefix, 16)


def name_prefix(index: int, width: int, driver: str, node: str) -> str:
    """The generateName-style prefix the Go helper would use for this index."""
    return _fit(f"{encode_index(index, width)}-{driver}-{node}", _MAX_NAME - 6) + "-"


def slice_name(index: int, width: int, driver: str, node: str, pool: str) -> str:
    """The deterministic name of slice `index` of `pool` (a valid DNS subdomain)."""
    digest = hashlib.sha256(f"{driver}\0{node}\0{pool}".encode()).hexdigest()[:_HASH_LEN]
    head = _fit(f"{encode_index(index, width)}-{driver}-{node}", _MAX_NAME - _HASH_LEN - 1)
    return f"{head}-{digest}"


def _fit(text: str, limit: int) -> str:
    """`text` cut to `limit` characters without leaving a '-' or '.' at the end.

    A DNS subdomain is lower case and may not contain '.-' or '-.', so the joint must end
    alphanumeric (driver names are only validated after lower-casing, so may be mixed case).
    Truncation only happens for very long node names; the hash keeps names unique.
    """
    return text.lower()[:limit].rstrip("-.")
