"""Inventory files (`--device-profile path/to/inventory.yaml`) are outside input: often a
ConfigMap anyone with access to the namespace edits, re-read on every change while the
plugin runs. Whatever the file holds, loading it gives an inventory or an
InventoryFileError that lists each problem on its own bounded line, and writes nothing."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from simdra._driver.devices.inventory_file import InventoryFileError, load_inventory_file

from .strategies import PATHS, hostile_text, json_values, mutated, tree_snapshot

NIC = {
    "name": "nic-0",
    "allowMultipleAllocations": True,
    "attributes": {"type": {"string": "nic"}, "model": {"string": "x"},
                   "index": {"int": 0}, "up": {"bool": True}, "fw": {"version": "1.2.3"}},
    "capacity": {"bandwidth": {"value": "10G", "requestPolicy": {
        "default": "1M", "validRange": {"min": "1M", "step": "8"}}}},
    "consumesCounters": [{"counterSet": "mem", "counters": {"memory": {"value": "1Gi"}}}],
    "taints": [{"key": "example.com/bad", "value": "yes", "effect": "NoSchedule"}],
}
VALID: dict[str, Any] = {"pools": [
    {"name": "{node}-nics", "devices": [NIC, {"name": "gpu-0"}],
     "sharedCounters": [{"name": "mem", "counters": {"memory": {"value": "8Gi"}}}],
     "skipNodeOperations": ["*"], "partitionTypeAttribute": "{driver}/type"},
    {"name": "rack-1", "devices": []},
]}

LINE_LIMIT = 2_000  # characters of one problem line, the value shown in it included

_RAW_YAML = [
    "[" * 5_000 + "]" * 5_000,
    "pools:\n" + "- " * 3_000 + "x\n",
    "pools: &a [*a]\n",  # a list that holds itself
    "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\npools: [{name: p, devices: [*c, *c, *c]}]\n",
    "pools: [{name: p, devices: &d [{name: gpu-0, attributes: {a: *d}}]}]\n",
    "!!python/object/apply:os.system [echo hi]\n",
    "pools: [{name: p, devices: [{name: gpu-0, attributes: {n: {int: " + "9" * 5_000 + "}}}]}]\n",
    "pools: [{name: p, devices: [{name: gpu-0, capacity: {m: {value: 1e999999}}}]}]\n",
    "\ufeffpools: []\n",
    "pools:\n\t- name: p\n",
    "pools: [{name: p, devices: [{name: gpu-0, attributes: {? [a, b] : 1}}]}]\n",
    "%YAML 9.9\n---\npools: []\n",
    "pools: []\n---\npools: []\n",
    "pools: [{name: !!binary aGVsbG8=, devices: []}]\n",
    "pools: [{name: 2026-01-01, devices: []}]\n",
]


def _as_yaml(value: Any) -> str:
    try:
        return yaml.safe_dump(value, allow_unicode=True)
    except (RecursionError, yaml.YAMLError):
        return json.dumps(value) if not isinstance(value, list) else "[]"


@st.composite
def _named(draw: st.DrawFn) -> dict[str, Any]:
    """The valid file with pool and device names that lead out of any directory, forge
    lines or cost memory."""
    doc = json.loads(json.dumps(VALID))
    where = draw(st.sampled_from(["pool", "device", "attribute", "counter"]))
    name = draw(st.one_of(st.sampled_from(PATHS), hostile_text))
    if where == "pool":
        doc["pools"][0]["name"] = name
    elif where == "device":
        doc["pools"][0]["devices"][1]["name"] = name
    elif where == "attribute":
        doc["pools"][0]["devices"][0]["attributes"][name] = {"string": name}
    else:
        doc["pools"][0]["sharedCounters"][0]["name"] = name
    return doc


inventory_files = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
    json_values().map(_as_yaml).map(str.encode),
    mutated(VALID).map(_as_yaml).map(str.encode),
    _named().map(_as_yaml).map(str.encode),
    st.sampled_from(_RAW_YAML).map(str.encode),
)


def _check_error(text: str, path: Path) -> None:
    """The error names the file; each problem is one line of at most LINE_LIMIT
    characters, with no control character a value could have brought in."""
    first, *rest = text.split("\n")
    assert str(path) in first
    for line in [first, *rest]:
        assert len(line) <= LINE_LIMIT, f"a line of {len(line)} characters: {line[:200]!r}"
        assert not any(c < " " or c in "\x7f\x85\u2028\u2029" for c in line), repr(line[:300])
    for line in rest:
        assert line.startswith("  "), f"a line the file forged: {line[:200]!r}"


def test_an_inventory_file_loads_or_gives_an_inventory_file_error(tmp_path: Path) -> None:
    """load_inventory_file: an Inventory, or InventoryFileError (never YAML's or
    Python's own exceptions) whose problems are each one bounded line; nothing is
    written."""

    @settings(max_examples=60)  # YAML is parsed in pure Python: slow
    @given(data=inventory_files)
    def check(data: bytes) -> None:
        path = Path(tempfile.mkdtemp(dir=tmp_path)) / "inventory.yaml"
        path.write_bytes(data)
        before = tree_snapshot(tmp_path)
        try:
            inventory = load_inventory_file(path, "node-1", "gpu.example.com")
        except InventoryFileError as err:
            _check_error(str(err), path)
        else:
            for pool in inventory.pools:
                assert pool.name and all(d.name for d in pool.devices)
        assert tree_snapshot(tmp_path) == before

    check()
