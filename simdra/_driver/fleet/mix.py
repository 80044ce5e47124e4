"""Node shapes and the mix of them (pure): `--mix gpu8:70,nic2:20,partitioned:10`.

A shape is what `simdra run` would be started with on a node: a device profile (a
registered profile list, or an inventory file) and a device count. Node `i` of the
fleet gets its shape from a seeded draw, so the same seed gives the same fleet, and a
node keeps its shape when `--nodes` grows or shrinks (node `i`'s draw depends on `i`
and the seed only).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    """What one simulated node holds: `simdra run --device-profile P --num-devices N`."""

    name: str
    profile: str
    num_devices: int


# The named shapes; any other name in a mix must be an inventory file's path.
SHAPES: dict[str, Shape] = {
    shape.name: shape
    for shape in (
        Shape("gpu8", "gpu", 8),
        Shape("gpu4", "gpu", 4),
        Shape("gpu8-shared", "gpu-shared", 8),
        Shape("nic2", "nic", 2),
        Shape("partitioned", "gpu-partitioned", 8),
        Shape("gpu8-nic2", "gpu,nic", 8),
        Shape("cpu", "cpu", 2),
    )
}


class MixError(ValueError):
    """A `--mix` that cannot be used; the message says why, in one line."""


@dataclass(frozen=True)
class Mix:
    """Shapes with their percentages (adding up to 100), in the order given."""

    parts: tuple[tuple[Shape, int], ...]

    def shape_of(self, index: int, seed: int) -> Shape:
        """The shape of node `index`: a draw in [0, 100) from (seed, index), mapped
        onto the percentages' cumulative ranges."""
        draw = _draw(seed, index)
        for shape, percent in self.parts:
            if draw < percent:
                return shape
            draw -= percent
        return self.parts[-1][0]  # unreachable while the percentages add up to 100


def looks_like_path(name: str) -> bool:
    """An inventory file, as `simdra run --device-profile` tells one from profiles."""
    return "/" in name or name.endswith((".yaml", ".yml", ".json"))


def parse_mix(text: str) -> Mix:
    """`shape:percent,...` into a Mix; MixError when a part is malformed, a shape is
    unknown, a shape repeats or the percentages do not add up to 100."""
    parts: list[tuple[Shape, int]] = []
    for item in (part.strip() for part in text.split(",")):
        name, sep, percent_text = item.rpartition(":")
        if not sep or not name or not percent_text.strip().isdigit():
            raise MixError(f"{item!r} is not shape:percent")
        shape = _shape(name.strip())
        if any(known.name == shape.name for known, _ in parts):
            raise MixError(f"shape {shape.name!r} appears twice")
        parts.append((shape, int(percent_text)))
    total = sum(percent for _, percent in parts)
    if total != 100:
        raise MixError(f"the percentages add up to {total}, not 100")
    return Mix(tuple((shape, percent) for shape, percent in parts if percent > 0))


def _shape(name: str) -> Shape:
    if name in SHAPES:
        return SHAPES[name]
    if looks_like_path(name):
        return Shape(name, name, 0)  # the file says how many devices
    raise MixError(f"unknown shape {name!r} (known: {', '.join(SHAPES)}; or an inventory "
                   "file's path)")


def _draw(seed: int, index: int) -> int:
    """A stable number in [0, 100) for (seed, index), the same in every process and
    Python version (unlike hash() or random's internals)."""
    digest = hashlib.sha256(f"{seed}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100


def node_names(prefix: str, count: int) -> list[str]:
    """`<prefix>-<i>` for i in [0, count), zero-padded to at least 4 digits so that the
    names sort in index order at any fleet size we run."""
    width = max(4, len(str(count - 1)))
    return [f"{prefix}-{index:0{width}d}" for index in range(count)]
