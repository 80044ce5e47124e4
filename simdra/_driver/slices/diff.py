"""Plan the writes that turn the observed slices of a pool into the desired ones (pure).

Semantics of the Go `resourceslice` controller (api-facts 6.3), with two refinements:

- Matching: an observed slice belongs to desired slice `i` when its name starts with the
  index prefix of `i` (the 1.36 helper's rule). Unmatched slices, extra slices for the
  same index and slices with another prefix are obsolete and deleted.
- Generation: start from the highest generation observed in the pool (terminating slices
  included: consumers still see them); keep it when no slice must be created and at most
  one matched slice changes (one write switches the pool atomically); otherwise add one
  and rewrite every slice of the pool.
  Refinement: a matched slice with an older generation (left behind by an interrupted
  rewrite) is updated in place instead of deleted and recreated; consumers ignore it
  either way until it carries the pool's highest generation.
- Order: deletes, then updates, then creates, so a consumer never sees two complete
  pools at once, and devices the driver no longer has disappear first.
- Comparison is field by field and semantic (see `semantic`): server-side
  normalisation never counts as a change, and a taint keeps its stored `timeAdded`.
  Refinement: when the server is known to drop fields of a slice (`AcceptedForm`), the
  stored form is what we compare against, so a gate that is off cannot cause a write
  loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from simdra._driver.slices import naming
from simdra._driver.slices.desired import DesiredPool, DesiredSlice
from simdra._driver.slices.semantic import (
    devices_equal,
    normalize,
    normalize_device,
    with_taint_times,
)

JSON = dict[str, Any]
API_VERSION = "resource.k8s.io/v1"
# The content keys besides the devices, compared as normalised JSON.
_OPTION_KEYS = ("sharedCounters", "skipNodeOperations", "partitionTypeAttribute")
_MANAGED_SPEC_KEYS = frozenset({"driver", "nodeName", "pool", "devices", *_OPTION_KEYS})


@dataclass(frozen=True)
class SliceTarget:
    """Who publishes: the driver, the node the slices belong to, and the Node's UID."""

    driver: str
    node: str
    node_uid: str

    def owner_reference(self) -> JSON:
        """The controller ownerReference to the Node, so slices go away with the Node."""
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "name": self.node,
            "uid": self.node_uid,
            "controller": True,
        }


@dataclass(frozen=True)
class AcceptedForm:
    """What the server stored when we sent `sent` (it dropped some fields)."""

    sent: JSON  # spec content as sent: {"devices": [...]} or {"sharedCounters": [...]}
    stored: JSON  # normalised content as stored


@dataclass(frozen=True)
class SliceWrite:
    """One API write of a plan."""

    verb: Literal["create", "update", "delete"]
    pool: str
    name: str  # for a create with generateName: the prefix
    index: int | None = None  # desired slice index (None for deletes)
    body: JSON | None = None  # full object for create/update
    uid: str | None = None  # delete preconditions
    resource_version: str | None = None
    reason: str = ""  # why, for the log: "obsolete", "changed: spec.devices", ...


@dataclass(frozen=True)
class PoolPlan:
    """The writes for one pool, in the order they must happen."""

    pool: str
    generation: int
    slice_count: int
    bumped: bool
    writes: tuple[SliceWrite, ...] = field(default=())

    @property
    def empty(self) -> bool:
        """True when the pool is already published as desired."""
        return not self.writes


def slice_object(
    desired: DesiredSlice,
    pool: str,
    generation: int,
    count: int,
    target: SliceTarget,
    name: str,
    generate: bool = False,
) -> JSON:
    """The complete ResourceSlice to create for one desired slice."""
    meta: JSON = {"generateName" if generate else "name": name}
    meta["ownerReferences"] = [target.owner_reference()]
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": meta,
        "spec": _spec(desired.spec_content(), pool, generation, count, target),
    }


def plan_pool(
    desired: DesiredPool,
    observed: Sequence[Mapping[str, Any]],
    target: SliceTarget,
    accepted: Mapping[int, AcceptedForm] | None = None,
    taken_names: frozenset[str] = frozenset(),
) -> PoolPlan:
    """Writes that make the observed slices of `desired.name` match `desired`.

    `observed` holds only this pool's slices. `taken_names` are deterministic names that
    cannot be used (an object of that name is terminating or not ours): those slices are
    created with generateName instead.
    """
    accepted = accepted or {}
    count = len(desired.slices)
    width = naming.index_width(count)
    live = [s for s in observed if not s["metadata"].get("deletionTimestamp")]
    # Terminating slices count: consumers see them until they are gone.
    generation = max((_generation(s) for s in observed), default=0)
    matched, obsolete = _match(live, count, width, target, desired.name)

    pool_meta = {"name": desired.name, "generation": generation, "resourceSliceCount": count}
    changes = {
        i: diffs
        for i, s in matched.items()
        if (diffs := slice_differences(s, desired.slices[i], pool_meta, target, accepted.get(i)))
    }
    bumped = len(matched) < count or len(changes) > 1
    if bumped:
        generation += 1

    writes = [
        *_deletes(desired.name, obsolete),
        *_updates(desired, matched, changes, generation, bumped, target),
        *_creates(desired, set(matched), generation, target, taken_names),
    ]
    return PoolPlan(desired.name, generation, count, bumped, tuple(writes))


def _deletes(pool: str, obsolete: Sequence[Mapping[str, Any]]) -> list[SliceWrite]:
    return [
        SliceWrite("delete", pool, s["metadata"]["name"], uid=s["metadata"].get("uid"),
                   resource_version=s["metadata"].get("resourceVersion"), reason="obsolete")
        for s in obsolete
    ]


def _updates(desired: DesiredPool, matched: Mapping[int, Mapping[str, Any]],
             changes: Mapping[int, list[str]], generation: int, bumped: bool,
             target: SliceTarget) -> list[SliceWrite]:
    """Updates of the matched slices that changed, or of all of them when the generation
    was bumped (every slice of the pool must carry the new one)."""
    count = len(desired.slices)
    writes = []
    for i in sorted(matched):
        if not bumped and i not in changes:
            continue
        reason = "changed: " + ", ".join(changes[i]) if i in changes else "generation bump"
        body = update_body(matched[i], desired.slices[i], desired.name, generation, count,
                           target)
        writes.append(SliceWrite("update", desired.name, matched[i]["metadata"]["name"], i,
                                 body, reason=reason))
    return writes


def _creates(desired: DesiredPool, matched: set[int], generation: int, target: SliceTarget,
             taken_names: frozenset[str]) -> list[SliceWrite]:
    """Creates of the slices no observed one matched; a taken name falls back to
    generateName."""
    count = len(desired.slices)
    width = naming.index_width(count)
    writes = []
    for i in range(count):
        if i in matched:
            continue
        name = naming.slice_name(i, width, target.driver, target.node, desired.name)
        generate = name in taken_names
        if generate:
            name = naming.name_prefix(i, width, target.driver, target.node)
        body = slice_object(desired.slices[i], desired.name, generation, count, target,
                            name, generate)
        writes.append(SliceWrite("create", desired.name, name, i, body, reason="missing"))
    return writes


def plan_removal(pool: str, observed: Sequence[Mapping[str, Any]]) -> PoolPlan:
    """Delete every slice of a pool the inventory no longer has."""
    writes = tuple(
        SliceWrite("delete", pool, s["metadata"]["name"], uid=s["metadata"].get("uid"),
                   resource_version=s["metadata"].get("resourceVersion"), reason="pool removed")
        for s in observed
        if not s["metadata"].get("deletionTimestamp")
    )
    return PoolPlan(pool, 0, 0, False, writes)


def slice_differences(
    observed: Mapping[str, Any],
    desired: DesiredSlice,
    pool_meta: Mapping[str, Any],
    target: SliceTarget,
    accepted: AcceptedForm | None = None,
) -> list[str]:
    """Names of the fields where `observed` differs from what should be published."""
    spec = observed.get("spec") or {}
    diffs = []
    if spec.get("driver") != target.driver:
        diffs.append("spec.driver")
    if spec.get("nodeName") != target.node:
        diffs.append("spec.nodeName")
    pool = spec.get("pool") or {}
    for key in ("name", "generation", "resourceSliceCount"):
        if pool.get(key, 0) != pool_meta[key]:
            diffs.append(f"spec.pool.{key}")
    diffs += content_differences(spec, desired, accepted)
    for key in sorted(set(spec) - _MANAGED_SPEC_KEYS):
        if normalize(spec[key], key) not in (None, {}, []):
            diffs.append(f"spec.{key}")
    if not _has_owner(observed, target):
        diffs.append("metadata.ownerReferences")
    return diffs


def update_body(
    observed: Mapping[str, Any],
    desired: DesiredSlice,
    pool: str,
    generation: int,
    count: int,
    target: SliceTarget,
) -> JSON:
    """The full object for an update: observed metadata (for the resourceVersion check),
    our owner reference, and the desired spec with stored taint times preserved."""
    meta = {k: v for k, v in observed["metadata"].items() if k != "managedFields"}
    others = [r for r in meta.get("ownerReferences") or [] if not r.get("controller")]
    meta["ownerReferences"] = [*others, target.owner_reference()]
    content = desired.spec_content()
    if "devices" in content:
        stored = (observed.get("spec") or {}).get("devices") or []
        content["devices"] = with_taint_times(content["devices"], stored)
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": meta,
        "spec": _spec(content, pool, generation, count, target),
    }


def _spec(content: JSON, pool: str, generation: int, count: int, target: SliceTarget) -> JSON:
    return {
        "driver": target.driver,
        "nodeName": target.node,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        **content,
    }


def _match(
    live: Sequence[Mapping[str, Any]], count: int, width: int, target: SliceTarget, pool: str
) -> tuple[dict[int, Mapping[str, Any]], list[Mapping[str, Any]]]:
    """Observed slices by desired index (best candidate per index), and the obsolete rest."""
    candidates: dict[int, list[Mapping[str, Any]]] = {}
    obsolete = []
    for s in live:
        index = naming.decode_index(s["metadata"]["name"], width)
        if index is None or index >= count:
            obsolete.append(s)
        else:
            candidates.setdefault(index, []).append(s)
    matched = {}
    for index, group in candidates.items():
        ours = naming.slice_name(index, width, target.driver, target.node, pool)
        group.sort(key=lambda s: (-_generation(s), s["metadata"]["name"] != ours,
                                  s["metadata"]["name"]))
        matched[index] = group[0]
        obsolete.extend(group[1:])
    return matched, obsolete


def content_differences(
    spec: Mapping[str, Any], desired: DesiredSlice, accepted: AcceptedForm | None = None
) -> list[str]:
    """Which of `spec.devices`, `spec.sharedCounters` and the slice options differ from
    the desired content."""
    content = desired.spec_content()
    if accepted is not None and content == accepted.sent:
        norm = normalized_content(spec)
        return [f"spec.{k}" for k in ("devices", *_OPTION_KEYS)
                if norm.get(k) != accepted.stored.get(k)]
    diffs = []
    if not devices_equal(content.get("devices") or [], spec.get("devices") or []):
        diffs.append("spec.devices")
    diffs += [f"spec.{k}" for k in _OPTION_KEYS
              if normalize(content.get(k)) != normalize(spec.get(k))]
    return diffs


def normalized_content(spec: Mapping[str, Any]) -> JSON:
    """Canonical devices, sharedCounters and options of a slice spec (for
    `AcceptedForm.stored`)."""
    out: JSON = {}
    devices = [normalize_device(d) for d in spec.get("devices") or []]
    if devices:
        out["devices"] = devices
    for key in _OPTION_KEYS:
        value = normalize(spec.get(key))
        if value:
            out[key] = value
    return out


def _has_owner(observed: Mapping[str, Any], target: SliceTarget) -> bool:
    refs = (observed.get("metadata") or {}).get("ownerReferences") or []
    controllers = [r for r in refs if r.get("controller")]
    want = target.owner_reference()
    return len(controllers) == 1 and all(controllers[0].get(k) == v for k, v in want.items())


def _generation(s: Mapping[str, Any]) -> int:
    value = ((s.get("spec") or {}).get("pool") or {}).get("generation", 0)
    return value if isinstance(value, int) else 0
