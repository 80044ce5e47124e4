"""Shards (pure): `--shard i/n` splits a fleet between n replicas by node name.

A replica owns node k iff a stable hash of k's name modulo n is i: every node has
exactly one owner, the split needs no coordination, and a node's owner does not depend
on which other nodes exist (nodes joining or leaving move no other node).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


class ShardError(ValueError):
    """A `--shard` that cannot be used."""


@dataclass(frozen=True)
class Shard:
    """Replica `index` of `count` (0 <= index < count)."""

    index: int = 0
    count: int = 1

    def owns(self, node_name: str) -> bool:
        """True when this replica plays `node_name`."""
        return self.count == 1 or shard_of(node_name, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def shard_of(node_name: str, count: int) -> int:
    """The shard of `node_name` among `count`: sha256 of the name, not hash(), which
    differs between processes."""
    digest = hashlib.sha256(node_name.encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


def parse_shard(text: str) -> Shard:
    """`i/n` with 0 <= i < n and 1 <= n <= 10000."""
    index_text, sep, count_text = text.partition("/")
    if not sep or not index_text.isdigit() or not count_text.isdigit():
        raise ShardError(f"{text!r} is not i/n (e.g. 0/2)")
    index, count = int(index_text), int(count_text)
    if not 1 <= count <= 10_000:
        raise ShardError(f"{text!r}: n must be between 1 and 10000")
    if index >= count:
        raise ShardError(f"{text!r}: i must be below n (0 to {count - 1})")
    return Shard(index, count)
