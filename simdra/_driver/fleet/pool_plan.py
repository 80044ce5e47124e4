"""A fleet node's Inventory, planned by the code `simdra run` plans it with.

`simdra run --device-profile P --num-devices N` on node X publishes
`scalar_attributes(backend.discover())` of the fake backend built from that
configuration (no faults injected, no --list-attributes); so does a fleet node of that
shape, which is why its slices are byte-for-byte the plugin's.
"""

from __future__ import annotations

from simdra._driver.api import Inventory, scalar_attributes
from simdra._driver.builtins import BUILTIN
from simdra._driver.config import Config
from simdra._driver.fleet.mix import Shape
from simdra._driver.plugin import make_backend


class PlanError(ValueError):
    """A shape the device backend refuses (an unreadable inventory file, a bad profile)."""


def plan_inventory(node_name: str, driver_name: str, shape: Shape) -> Inventory:
    """What `simdra run` with `shape` on `node_name` would publish."""
    config = Config(node_name=node_name, driver_name=driver_name, device_backend="fake",
                    device_profile=shape.profile, num_devices=shape.num_devices or 8)
    try:
        backend, _kinds = make_backend(config, BUILTIN)
        return scalar_attributes(backend.discover())
    except (OSError, ValueError) as err:
        raise PlanError(f"shape {shape.name!r}: {err}") from None
