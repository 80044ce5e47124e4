"""Server-side apply (`application/apply-patch+yaml`), pure: field ownership per manager.

What the stand-in models, as the API server does it: every field an apply sets is
owned by its field manager (`metadata.managedFields`, FieldsV1 text); a field another
manager owns with a different value is a conflict (409) unless `force`, which moves it
to the applier; a field the manager applied before and omits now is removed unless
another manager owns it. Lists are atomic except the `listType=map` lists in LIST_MAPS,
whose items are merged and owned by their keys (`k:{"device":…,"driver":…,"pool":…}`).

Simplified: only applies are recorded (an object gets managedFields on its first
apply); fields written by updates and merge patches are owned by nobody, so no apply
conflicts with them or removes them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from simdra._driver.testing.apiserver import lifecycle
from simdra._driver.testing.apiserver.errors import APIError

JSON = dict[str, Any]
Path = tuple[str, ...]
APPLY = "application/apply-patch+yaml"
# resource -> path of a listType=map list -> its listMapKeys (the API's +listMapKey)
LIST_MAPS: dict[str, dict[Path, tuple[str, ...]]] = {
    "resourceclaims": {
        ("status", "devices"): ("driver", "device", "pool", "shareID"),
        ("status", "reservedFor"): ("uid",),
    },
}


def parse_config(body: bytes) -> Any:
    """An apply configuration: YAML (JSON is YAML too); 400 when it is not."""
    try:
        return yaml.safe_load(body or b"null")
    except yaml.YAMLError as exc:
        raise APIError(400, "BadRequest", f"the apply configuration is not valid YAML: "
                       f"{' '.join(str(exc).split())}") from None


def server_side_apply(
    plural: str, current: JSON, config: Any, manager: str, *, force: bool, subresource: str | None
) -> JSON:
    """`current` with `config` applied by `manager`, its managedFields updated."""
    if not manager:
        raise APIError(400, "BadRequest", "PATCH with apply requires a fieldManager")
    if not isinstance(config, dict) or not config.get("apiVersion") or not config.get("kind"):
        raise APIError(400, "BadRequest", "an apply configuration needs apiVersion and kind")
    uid = (config.get("metadata") or {}).get("uid")
    if uid and uid != current["metadata"].get("uid"):
        raise APIError(409, "Conflict", f"Precondition failed: UID in precondition: {uid}, "
                       f"UID in object meta: {current['metadata'].get('uid')}")
    maps = LIST_MAPS.get(plural, {})
    part = ("f:status",) if subresource == "status" else ()
    applied_config = {k: v for k, v in config.items() if k in ("spec", "status")}
    if subresource == "status":
        applied_config = {"status": config.get("status") or {}}
    owners = _owners(current)
    before = copy.deepcopy(owners)
    key = (manager, subresource or "")
    applied = set(_paths(applied_config, (), maps))
    conflicts = _conflicts(current, applied_config, applied, owners, key, maps)
    if conflicts and not force:
        raise APIError(409, "Conflict", f"Apply failed with {len(conflicts)} conflicts: "
                       + "; ".join(conflicts))
    result = copy.deepcopy(current)
    _merge(result, applied_config, (), maps)
    for other, paths in owners.items():
        if other != key:
            paths -= {p for p in applied if _value(result, p, maps) != _value(current, p, maps)}
    previous = owners.get(key, set())
    owners[key] = applied
    # whole items first: removing their key fields first would lose track of them
    for path in sorted(previous - applied, key=lambda p: (p[-1] != ".", len(p))):
        if path[: len(part)] == part and not _owned(path, owners):
            _remove(result, path, maps)
    if result == current and owners == before:
        return current  # a no-op apply changes nothing, not even managedFields' times
    result["metadata"] = {**result["metadata"], "managedFields": _managed_fields(owners, config)}
    return result


# --- field paths ---------------------------------------------------------------------


def _item_key(item: Any, keys: tuple[str, ...]) -> str:
    present = {k: item[k] for k in sorted(keys) if isinstance(item, dict) and k in item}
    return "k:" + json.dumps(present, sort_keys=True, separators=(",", ":"))


def _paths(value: Any, at: Path, maps: Mapping[Path, tuple[str, ...]]) -> Iterator[Path]:
    """The owned paths of an applied value: leaves, and each list-map item ('.')."""
    if isinstance(value, dict):  # an empty one sets nothing
        for name, child in value.items():
            yield from _paths(child, (*at, f"f:{name}"), maps)
    elif isinstance(value, list) and _plain(at) in maps:
        for item in value:
            item_at = (*at, _item_key(item, maps[_plain(at)]))
            yield (*item_at, ".")
            yield from _paths(item, item_at, maps)
    else:
        yield at


def _plain(at: Path) -> Path:
    """The schema path of a field path (item keys dropped)."""
    return tuple(p[2:] for p in at if p.startswith("f:"))


def _owned(path: Path, owners: Mapping[tuple[str, str], set[Path]]) -> bool:
    """True when some manager owns `path` or, for an item, anything inside it."""
    inside = path[:-1] if path[-1] == "." else path
    return any(p[: len(inside)] == inside for paths in owners.values() for p in paths)


def _value(obj: Any, path: Path, maps: Mapping[Path, tuple[str, ...]]) -> Any:
    node = obj
    for i, part in enumerate(path):
        if part == ".":
            return True
        if part.startswith("f:"):
            node = node.get(part[2:]) if isinstance(node, dict) else None
        else:
            keys = maps[_plain(path[:i])]
            node = next((x for x in node or [] if _item_key(x, keys) == part), None)
        if node is None:
            return None
    return node


def _conflicts(current: JSON, config: JSON, applied: set[Path], owners: Any, key: Any,
               maps: Mapping[Path, tuple[str, ...]]) -> list[str]:
    found = []
    for (manager, subresource), paths in owners.items():
        if (manager, subresource) == key:
            continue
        for path in sorted(paths & applied):
            if path[-1] != "." and _value(current, path, maps) != _value(config, path, maps):
                found.append(f'conflict with "{manager}": .{".".join(p[2:] for p in path)}')
    return found


# --- changing the object --------------------------------------------------------------


def _merge(target: JSON, config: JSON, at: Path, maps: Mapping[Path, tuple[str, ...]]) -> None:
    for name, value in config.items():
        here = (*at, name)
        old = target.get(name)
        if isinstance(value, dict) and isinstance(old, dict):
            _merge(old, value, here, maps)
        elif isinstance(value, list) and here in maps and isinstance(old, list):
            keys = maps[here]
            for item in value:
                match = next((x for x in old if _item_key(x, keys) == _item_key(item, keys)), None)
                if isinstance(match, dict) and isinstance(item, dict):
                    _merge(match, item, here, maps)
                else:
                    old.append(copy.deepcopy(item))
        else:
            target[name] = copy.deepcopy(value)


def _remove(obj: JSON, path: Path, maps: Mapping[Path, tuple[str, ...]]) -> None:
    if path[-1] == ".":
        parent, keys = _value(obj, path[:-3], maps), maps[_plain(path[:-2])]
        field = path[-3][2:]
        items = parent.get(field) if isinstance(parent, dict) else None
        if isinstance(items, list):
            parent[field] = [x for x in items if _item_key(x, keys) != path[-2]]
            if not parent[field]:
                del parent[field]
        return
    parent = _value(obj, path[:-1], maps)
    if isinstance(parent, dict):
        parent.pop(path[-1][2:], None)


# --- managedFields ------------------------------------------------------------------


def _owners(obj: JSON) -> dict[tuple[str, str], set[Path]]:
    owners: dict[tuple[str, str], set[Path]] = {}
    for entry in obj.get("metadata", {}).get("managedFields") or []:
        if entry.get("operation") == "Apply":
            key = (entry.get("manager", ""), entry.get("subresource", ""))
            owners[key] = set(_from_fields(entry.get("fieldsV1") or {}, ()))
    return owners


def _from_fields(fields: JSON, at: Path) -> Iterator[Path]:
    for name, child in fields.items():
        if name == ".":
            yield (*at, ".")
        elif child:
            yield from _from_fields(child, (*at, name))
        else:
            yield (*at, name)


def _to_fields(paths: set[Path]) -> JSON:
    tree: JSON = {}
    for path in sorted(paths):
        node = tree
        for part in path:
            node = node.setdefault(part, {})
    return tree


def _managed_fields(owners: Mapping[tuple[str, str], set[Path]], config: JSON) -> list[JSON]:
    entries = []
    for (manager, subresource), paths in sorted(owners.items()):
        if not paths:
            continue
        entry = {"manager": manager, "operation": "Apply", "apiVersion": config["apiVersion"],
                 "time": lifecycle.now(), "fieldsType": "FieldsV1",
                 "fieldsV1": _to_fields(paths)}
        if subresource:
            entry["subresource"] = subresource
        entries.append(entry)
    return entries
