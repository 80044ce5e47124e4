"""Declarative inventory files (`--device-profile path/to/inventory.yaml`).

Format::

    pools:
      - name: <pool name>          # "{node}" is replaced by the node name
        sharedCounters: [...]      # optional, v1 CounterSet list
        devices: [...]             # each exactly a resource.k8s.io/v1 spec.devices[] entry
        skipNodeOperations: ["*"]  # optional: the devices need no node-side work
        partitionTypeAttribute: <domain/name>  # optional: the partitions' type attribute;
                                   # "{driver}/<name>" names one in the driver's domain

What a user writes is what gets published, so the file is validated with the same rules
the API server applies; an invalid file fails at start with the device and the rule.
Pool names must be unique across the cluster for one driver, so a file shared by a
DaemonSet's nodes (a ConfigMap) names its pools with the `{node}` placeholder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from simdra._driver.core.textlimits import clip, escape_controls
from simdra._driver.core.validation import (
    invalid,
    pool_name_errors,
    qualified_name_errors,
    validate_device,
)
from simdra._driver.core.validation.slice_options import skip_node_operations_errors
from simdra._driver.devices.model import Device, Inventory, Pool

# A file may hold anything (it is often a ConfigMap): one problem is shown in at most
# this many characters, and a document nested deeper or holding more values than these
# (YAML aliases can repeat a value without end, or make it hold itself) is refused
# before any rule walks it.
PROBLEM_CHARS = 1000
MAX_DEPTH = 64
MAX_VALUES = 1_000_000


class InventoryFileError(ValueError):
    """The inventory file is unreadable or breaks a ResourceSlice rule."""


def load_inventory_file(path: str | Path, node_name: str = "",
                        driver_name: str = "") -> Inventory:
    """Read and validate an inventory file; raises InventoryFileError naming every problem.
    `{node}` in pool names becomes `node_name`, `{driver}` in a partition type attribute
    `driver_name`."""
    path = Path(path)
    try:
        document = yaml.safe_load(path.read_text())
    # ValueError: not UTF-8, or an integer of more digits than Python converts;
    # RecursionError: nested deeper than YAML's (recursive) parser goes.
    except (OSError, ValueError, RecursionError, yaml.YAMLError) as err:
        raise InventoryFileError(f"inventory file {path}: cannot read: {_line(err)}") from None
    _check_size(document, str(path))
    return parse_inventory(document, source=str(path), node_name=node_name,
                           driver_name=driver_name)


def parse_inventory(document: Any, source: str = "<inventory>", node_name: str = "",
                    driver_name: str = "") -> Inventory:
    """Build an Inventory from a parsed inventory document (pure); `{node}` in a pool
    name becomes `node_name`."""
    if not isinstance(document, dict) or not isinstance(document.get("pools"), list):
        raise InventoryFileError(f"inventory file {source}: top level must be a map with 'pools'")
    problems: list[str] = []
    pools = [_parse_pool(entry, f"pools[{i}]", problems, node_name, driver_name)
             for i, entry in enumerate(document["pools"])]
    names = [p.name for p in pools]
    problems += [f"pools: duplicate pool name {n!r}" for n in sorted(set(names))
                 if names.count(n) > 1]
    if problems:
        listing = "\n  ".join(map(_line, problems))
        raise InventoryFileError(f"inventory file {source} is invalid:\n  {listing}")
    return Inventory(pools=tuple(pools))


def _line(problem: object) -> str:
    """A problem as one line of at most PROBLEM_CHARS characters (plus the marker)."""
    return clip(escape_controls(str(problem)), PROBLEM_CHARS)


def _check_size(document: Any, source: str) -> None:
    """InventoryFileError when `document` nests deeper than MAX_DEPTH or holds more than
    MAX_VALUES values, aliases counted each time they are used (without recursion)."""
    stack = [(document, 0)]
    count = 0
    while stack:
        value, depth = stack.pop()
        count += 1
        if depth > MAX_DEPTH or count > MAX_VALUES:
            raise InventoryFileError(
                f"inventory file {source}: nested more than {MAX_DEPTH} levels deep or more "
                f"than {MAX_VALUES} values (YAML aliases counted each time they are used)")
        if isinstance(value, dict):
            stack.extend((child, depth + 1) for child in value.values())
        elif isinstance(value, list):
            stack.extend((child, depth + 1) for child in value)


def _parse_pool(entry: Any, path: str, problems: list[str], node_name: str,
                driver_name: str = "") -> Pool:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        problems.append(f"{path}: a pool needs a string 'name'")
        return Pool(name=f"<invalid {path}>", devices=())
    entry = {**entry, "name": entry["name"].replace("{node}", node_name)}
    problems += [f"{path}: {err}" for err in pool_name_errors(entry["name"], f"{path}.name")]
    unknown = sorted(set(entry) - {"name", "devices", "sharedCounters", *_OPTIONS})
    if unknown:
        problems.append(f"{path} ({entry['name']}): unknown keys {unknown}")
    devices = entry.get("devices") or []
    counters = entry.get("sharedCounters") or []
    if not isinstance(devices, list) or not isinstance(counters, list):
        problems.append(f"{path} ({entry['name']}): 'devices' and 'sharedCounters' must be lists")
        return Pool(name=entry["name"], devices=())
    seen: set[str] = set()
    for i, device in enumerate(devices):
        where = f"{path}.devices[{i}]"
        if not isinstance(device, dict):
            problems.append(f"{where}: a device must be a map")
            continue
        label = f"device {device.get('name', '?')!r}"
        problems += [f"{label}: {err}" for err in validate_device(device, where)]
        if device.get("name") in seen:
            problems.append(f"{where}: {label}: duplicate device name in pool {entry['name']!r}")
        seen.add(str(device.get("name")))
    skip, partition_type = _pool_options(entry, path, problems, driver_name)
    return Pool(
        name=entry["name"],
        devices=tuple(Device(spec=d, skip_node_operations=skip)
                      for d in devices if isinstance(d, dict)),
        shared_counters=tuple(counters),
        partition_type_attribute=partition_type,
    )


# Pool keys that become ResourceSlice spec fields of the pool's slices (Kubernetes 1.37).
_OPTIONS = ("skipNodeOperations", "partitionTypeAttribute")


def _pool_options(entry: dict[str, Any], path: str, problems: list[str],
                  driver_name: str) -> tuple[tuple[str, ...], str | None]:
    """The pool's `skipNodeOperations` (for each of its devices) and
    `partitionTypeAttribute` (`{driver}` replaced, so that one file serves any driver
    name), checked as the API server checks the slice fields."""
    skip = entry.get("skipNodeOperations")
    errors = skip_node_operations_errors(skip, f"{path}.skipNodeOperations")
    partition_type = entry.get("partitionTypeAttribute")
    if isinstance(partition_type, str):
        partition_type = partition_type.replace("{driver}", driver_name)
    if partition_type is not None:
        where = f"{path}.partitionTypeAttribute"
        errors += qualified_name_errors(partition_type, where)
        if "/" not in str(partition_type):
            errors.append(invalid(where, partition_type, "must be <domain>/<name>"))
    problems += [f"{path} ({entry['name']}): {err}" for err in errors]
    if errors:
        return (), None
    return tuple(skip or ()), partition_type
