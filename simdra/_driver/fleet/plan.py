"""Which nodes this replica plays and what each holds (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simdra._driver.fleet.mix import Mix, Shape, node_names
from simdra._driver.fleet.shard import Shard


@dataclass(frozen=True)
class PlannedNode:
    """A node of the fleet: its name and shape."""

    name: str
    shape: Shape


def fleet_nodes(names: Sequence[str], mix: Mix, seed: int) -> list[PlannedNode]:
    """Node i of `names` gets the mix's draw for (seed, i)."""
    return [PlannedNode(name, mix.shape_of(index, seed)) for index, name in enumerate(names)]


def created_fleet(prefix: str, count: int, mix: Mix, seed: int) -> list[PlannedNode]:
    """The nodes a fleet of `count` creates: `<prefix>-<i>`."""
    return fleet_nodes(node_names(prefix, count), mix, seed)


def owned(nodes: Sequence[PlannedNode], shard: Shard) -> list[PlannedNode]:
    """The nodes replica `shard` plays."""
    return [node for node in nodes if shard.owns(node.name)]


def to_prune(existing: Sequence[str], wanted: Sequence[PlannedNode], shard: Shard) -> list[str]:
    """Nodes of ours (by label) this replica owns that the fleet no longer has."""
    keep = {node.name for node in wanted}
    return sorted(name for name in existing if shard.owns(name) and name not in keep)
