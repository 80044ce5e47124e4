"""The publisher's view of our slices on the server: fed by list, watch and our own writes.

Our writes go into the cache from their responses at once (like client-go's mutation
cache), so the next plan never repeats a create; the watch event for the same write
then carries the same resourceVersion and is ignored. Events older than what we hold
are ignored, and an object we deleted cannot come back through a late event (its UID
is remembered). A relist keeps only the writes made while the list was under way: a
write made before it is in the list, or gone, even when the server's resourceVersions
went back (a restored etcd).

Memory: the cache would hold a second full copy of every device (parsed from the
server's JSON) next to the inventory. Once a pool is clean, `share_devices` swaps each
stored device entry that equals its desired spec for that very object, and a relist
keeps the stored object of a slice that did not change, so a large quiet node holds
each device once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

JSON = dict[str, Any]
_TOMBSTONES = 4096


def rv_newer(a: str | None, b: str | None) -> bool:
    """True when resourceVersion `a` is newer than `b` (opaque strings: any change is)."""
    if a is None or b is None:
        return a is not None
    if a.isdigit() and b.isdigit():
        return int(a) > int(b)
    return a != b


def pool_of(obj: Mapping[str, Any]) -> str:
    """The pool name of a slice object."""
    return str(((obj.get("spec") or {}).get("pool") or {}).get("name", ""))


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def well_formed(obj: Any) -> bool:
    """True when `obj` has the shape the cache relies on: a metadata object with a
    string name (and string uid and resourceVersion, when set), and a spec and its pool
    that are objects when set. Anything else from a list or a watch is ignored, so that
    a broken or hostile answer cannot stop the publisher."""
    if not isinstance(obj, Mapping):
        return False
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        return False
    if not all(isinstance(meta.get(k), str | None) for k in ("uid", "resourceVersion")):
        return False
    spec = obj.get("spec")
    if spec is None:
        return True
    return isinstance(spec, Mapping) and isinstance(spec.get("pool"), Mapping | None)


class SliceCache:
    """Thread-safe name -> slice map of what the server stores (as far as we know)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slices: dict[str, JSON] = {}
        self._deleted: OrderedDict[str, None] = OrderedDict()  # UIDs we deleted
        self._puts = 0  # our writes so far
        self._put_at: dict[str, int] = {}  # name -> number of our latest write of it

    def mark(self) -> int:
        """Where our writes stand; take it before a list and pass it to `replace`."""
        with self._lock:
            return self._puts

    def replace(self, items: Iterable[JSON], list_rv: str, since: int) -> set[str]:
        """Adopt a fresh list, keeping what our own writes since `since` (a `mark()` taken
        before the list was asked for) made newer than the list.

        Returns the pools whose slices changed.
        """
        with self._lock:
            fresh = {str(_meta(o)["name"]): o for o in items
                     if well_formed(o) and _meta(o).get("uid") not in self._deleted}
            for name, listed in fresh.items():
                if self._slices.get(name) == listed:
                    fresh[name] = self._slices[name]  # keep its shared device entries
            for name, mine in self._slices.items():
                if self._put_at.get(name, 0) <= since:
                    continue  # written before the list was asked for: the list knows better
                theirs = fresh.get(name)
                listed_rv = list_rv if theirs is None else _meta(theirs).get("resourceVersion")
                if rv_newer(_meta(mine).get("resourceVersion"), listed_rv):
                    fresh[name] = mine  # written by us after the list was taken
            changed = {pool_of(o) for n, o in fresh.items() if self._slices.get(n) != o}
            changed |= {pool_of(o) for n, o in self._slices.items() if n not in fresh}
            self._slices = fresh
            self._put_at = {n: at for n, at in self._put_at.items() if at > since}
        return changed

    def apply_event(self, kind: str, obj: JSON) -> str | None:
        """Apply a watch event; returns the pool it changed, or None when it was stale
        (or not a well-formed slice)."""
        if not well_formed(obj):
            return None
        meta = _meta(obj)
        name, uid = str(meta.get("name")), meta.get("uid")
        with self._lock:
            mine = self._slices.get(name)
            if kind == "DELETED":
                if mine is None or _meta(mine).get("uid") != uid:
                    return None
                del self._slices[name]
                return pool_of(obj)
            if uid in self._deleted:
                return None
            if mine is not None and _meta(mine).get("uid") == uid and not rv_newer(
                meta.get("resourceVersion"), _meta(mine).get("resourceVersion")
            ):
                return None
            self._slices[name] = obj
            return pool_of(obj)

    def put(self, obj: JSON) -> None:
        """Record an object a write of ours returned (ignored when not well-formed)."""
        if not well_formed(obj):
            return
        meta = _meta(obj)
        name = str(meta["name"])
        with self._lock:
            self._puts += 1
            self._put_at[name] = self._puts
            mine = self._slices.get(name)
            if (
                mine is None
                or _meta(mine).get("uid") != meta.get("uid")
                or not rv_newer(_meta(mine).get("resourceVersion"), meta.get("resourceVersion"))
            ):
                self._slices[name] = obj

    def remove(self, name: str, uid: str | None) -> None:
        """Forget a slice we deleted (or found gone); late events for it are ignored."""
        with self._lock:
            mine = self._slices.get(name)
            if mine is not None and (uid is None or _meta(mine).get("uid") == uid):
                del self._slices[name]
            if uid:
                self._deleted[uid] = None
                while len(self._deleted) > _TOMBSTONES:
                    self._deleted.popitem(last=False)

    def share_devices(self, pool: str, desired: Mapping[str, Mapping[str, Any]]) -> int:
        """Replace each stored device entry of `pool` that equals the desired spec of
        the same name (`desired`: name -> spec) by that spec object; returns how many
        were replaced. Only equal values are swapped, so every reader sees the same
        content; neither side is ever changed in place."""
        shared = 0
        with self._lock:
            for obj in self._slices.values():
                if pool_of(obj) != pool:
                    continue
                devices = (obj.get("spec") or {}).get("devices")
                if not isinstance(devices, list):
                    continue
                for i, device in enumerate(devices):
                    if not isinstance(device, dict):
                        continue
                    spec = desired.get(str(device.get("name")))
                    if spec is not None and spec is not device and spec == device:
                        devices[i] = spec
                        shared += 1
        return shared

    def pool_slices(self, pool: str) -> list[JSON]:
        """The slices of one pool."""
        with self._lock:
            return [o for o in self._slices.values() if pool_of(o) == pool]

    def by_pool(self) -> dict[str, list[JSON]]:
        """Every slice, grouped by pool."""
        grouped: dict[str, list[JSON]] = {}
        with self._lock:
            for obj in self._slices.values():
                grouped.setdefault(pool_of(obj), []).append(obj)
        return grouped
