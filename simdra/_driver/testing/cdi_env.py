"""What a container would see of a prepared claim: the SIMDRA_DEVICE_<ID>_<KEY> variables
of its CDI spec, read back by device, so that a test asserts on `KEY`s, not on the ID."""

from __future__ import annotations

import json
from pathlib import Path

PREFIX = "SIMDRA_DEVICE_"


def claim_device_env(cdi_root: Path, claim_uid: str) -> dict[str, dict[str, str]]:
    """Device name -> {KEY: value} of every CDI device the claim's spec holds (a shared
    device's share by its name too); {} when the claim has no spec (not prepared)."""
    found: dict[str, dict[str, str]] = {}
    for spec_file in sorted(cdi_root.glob(f"*_{claim_uid}.json")):
        for device in json.loads(spec_file.read_text()).get("devices") or []:
            keys = _keys(device.get("containerEdits", {}).get("env") or [])
            found[keys.get("NAME", device.get("name", ""))] = keys
    return found


def _keys(env: list[str]) -> dict[str, str]:
    """`SIMDRA_DEVICE_<ID>_<KEY>=v` -> {KEY: v}; the ID is one token (hex, no `_`)."""
    keys = {}
    for entry in env:
        name, _, value = entry.partition("=")
        if name.startswith(PREFIX):
            keys[name[len(PREFIX):].partition("_")[2]] = value
    return keys
