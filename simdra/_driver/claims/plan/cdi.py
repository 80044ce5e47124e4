"""CDI spec rendering (pure): names, container edits, minimum cdiVersion, file names,
and the env vars each prepared device sets (see "Env" below).

One spec file per claim, kind `k8s.<driver>/device`. CDI allows one kind per file and a
claim may mix device types of one driver (a GPU and a NIC), so a per-type class
(`.../gpu`, `.../nic`) would need several files per claim, and a crash could then leave
some of them behind. With a single class, prepare writes one file and unprepare removes
one file whose name follows from the claim UID alone (`<vendor>-device_<uid>.json`, the
DRA transient-spec convention), which is what makes cleanup possible even when the
claim's checkpoint record is lost or corrupt. The device type still reaches the workload
through env vars.

Env
---
Every CDI device this driver writes (one per prepared unit: a whole device, or one share
of a multi-allocatable device) sets only variables of the form::

    SIMDRA_DEVICE_<ID>_<KEY>=<value>

`<ID>` is 8 upper-case hex digits of the sha256 of the CDI device name. The CDI name
starts with the claim UID and ends with the shareID, so the ID differs between claims,
between devices, and between two shares of one device in one claim. That matters
because a container that references several claims or requests gets the env of all
their CDI devices, and the runtime keeps only one value per name: a fixed name such as
`SIMDRA_NIC_BANDWIDTH` (or an index counted within one claim) would let one device
silently overwrite another. The ID has no `_`, so a name splits unambiguously:
`SIMDRA_DEVICE_` + 8 hex + `_` + KEY.

A workload finds its devices by listing the variables that end in `_NAME`
(`env | grep '^SIMDRA_DEVICE_.*_NAME='`) and reads the rest with the same prefix. There
is deliberately no list variable: one CDI device cannot append to another's value, and a
per-claim list would also name devices of requests the container did not ask for.

Keys (present when they apply):

=============================  ===========================================================
NAME, POOL, TYPE               device name, pool, `type` attribute (gpu, nic, device)
<attribute keys>               the attributes the registered kinds name in
                               `env_attributes`, e.g. UUID (`uuid`), PARTITION_PROFILE
                               (`profile`), INTERFACE_NAME (`interfaceName`)
CDI_DEVICE                     the fully qualified CDI device id
CLAIM, CLAIM_UID, REQUEST      `ns/name`, claim UID, request(s) as allocated (`req/sub`)
SHARE_ID                       shareID of a share of a multi-allocatable device
CAPACITY_<CAP>                 what the unit holds as a quantity (`8Gi`, `1500M`): the
                               consumedCapacity of a share, the full capacity of an
                               exclusive device; absent with admin access
CAPACITY_<CAP>_VALUE           the same as an integer, rounded up (bytes for memory)
ADMIN_ACCESS=true              admin access (monitoring; reserves nothing)
PARTITION=true                 a partition of a physical device
<config keys>                  what the handler of the device's opaque config kind adds
                               (its kind's `config_handlers`), e.g.
                               GPU_SHARING_STRATEGY=TimeSlicing, NIC_MTU=9000
=============================  ===========================================================

Device attributes and container edits are copied with `copy_json`: `copy.deepcopy` keeps a
memo of every object it visits and looks up a copier per type, which on the small
documents a prepare copies is most of its cost; `copy_json` keeps each container's type,
shares the immutable leaves, and hands anything else to `copy.deepcopy`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from simdra._driver.atomicfile import check_safe_name

CDI_CLASS = "device"
ENV_PREFIX = "SIMDRA_DEVICE_"
ID_LENGTH = 8
T = TypeVar("T")
_LEAVES = (str, int, float, bool, type(None))
SPEC_SUFFIX = ".json"
# The container runtime (root) reads the specs; so may rootless runtimes and `cdi list`
# style tools run by other users, as for the specs other CDI generators write. A spec
# holds device paths and the env this driver sets (claim names, device identity), no
# secrets, so specs are world-readable and only the driver writes them. The CDI root is
# a shared, well-known directory: created 0755 when missing, never changed when present.
CDI_SPEC_MODE = 0o644
CDI_DIR_MODE = 0o755

# CDI parser rules (api-facts 7.3).
_VENDOR = re.compile(r"^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
_CLASS = re.compile(r"^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
_DEVICE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")

# Keys of a CDI containerEdits object; CDI parsing is strict, so anything else would make
# the runtime reject the whole file.
EDIT_KEYS = ("env", "deviceNodes", "mounts", "hooks", "additionalGids", "intelRdt", "netDevices")
_LIST_KEYS = tuple(k for k in EDIT_KEYS if k != "intelRdt")


class CdiError(ValueError):
    """A CDI name or container edit that a container runtime would reject."""


def cdi_vendor(driver_name: str) -> str:
    """The CDI vendor of a driver: `k8s.<driver name>` (as dra-example-driver does)."""
    if len(driver_name) > 63 or not _DNS_SUBDOMAIN.match(driver_name.lower()):
        raise CdiError(f"driver name {driver_name!r} is not a DNS subdomain of at most 63 chars")
    vendor = f"k8s.{driver_name}"
    if not _VENDOR.match(vendor):
        raise CdiError(f"driver name {driver_name!r} gives an invalid CDI vendor {vendor!r}")
    return vendor


def cdi_kind(driver_name: str) -> str:
    """The CDI kind of every spec this driver writes."""
    kind = f"{cdi_vendor(driver_name)}/{CDI_CLASS}"
    if not _CLASS.match(CDI_CLASS):
        raise CdiError(f"invalid CDI class {CDI_CLASS!r}")
    return kind


def spec_file_prefix(driver_name: str) -> str:
    """Every spec file of this driver starts with this; `_` never occurs in a driver
    name, so another driver's files cannot match it."""
    return f"{cdi_vendor(driver_name)}-{CDI_CLASS}_"


def spec_file_name(driver_name: str, claim_uid: str) -> str:
    """`<vendor>-<class>_<claimUID>.json`, checked to be one safe path component."""
    if not _DEVICE.match(claim_uid):
        # The UID also starts every CDI device name of the claim, so the same rules apply.
        raise CdiError(
            f"claim uid {claim_uid!r} cannot name a CDI spec file: it must be a valid CDI "
            "device name (letters, digits, '_', '-', '.', ':'; letter or digit at both ends)"
        )
    try:
        return check_safe_name(f"{spec_file_prefix(driver_name)}{claim_uid}{SPEC_SUFFIX}")
    except ValueError as exc:
        raise CdiError(f"claim uid {claim_uid!r} cannot name a CDI spec file: {exc}") from None


def claim_uid_of_file(driver_name: str, file_name: str) -> str | None:
    """The claim UID a spec file of this driver belongs to, or None if it is not ours."""
    prefix = spec_file_prefix(driver_name)
    if not (file_name.startswith(prefix) and file_name.endswith(SPEC_SUFFIX)):
        return None
    uid = file_name[len(prefix) : -len(SPEC_SUFFIX)]
    return uid if uid and _DEVICE.match(uid) else None


def check_device_name(name: str) -> str:
    """Return `name` if it is a valid CDI device name, else raise CdiError."""
    if not _DEVICE.match(name):
        raise CdiError(
            f"invalid CDI device name {name!r}: letters, digits, '_', '-', '.', ':' only, "
            "starting and ending with a letter or digit"
        )
    return name


def qualified_name(kind: str, device_name: str) -> str:
    """The fully qualified CDI device id `vendor/class=name` the runtime resolves."""
    return f"{kind}={check_device_name(device_name)}"


def env_token(text: str) -> str:
    """`text` as an env var name part: upper case, anything but A-Z0-9 becomes `_`."""
    return re.sub(r"[^A-Z0-9]", "_", text.upper())


def env_entry(name: str, value: str) -> str:
    """`NAME=value`, with NAME checked to be a portable env var name."""
    if not _ENV_NAME.match(name):
        raise CdiError(f"invalid env var name {name!r}")
    return f"{name}={value}"


def merge_edits(parts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Concatenate container edits in order; empty lists are dropped (an empty key would
    still look like a feature to a version check)."""
    merged: dict[str, Any] = {}
    for part in parts:
        unknown = sorted(set(part) - set(EDIT_KEYS))
        if unknown:
            raise CdiError(f"unknown containerEdits keys {unknown}; CDI allows {list(EDIT_KEYS)}")
        for key in _LIST_KEYS:
            if part.get(key):
                merged.setdefault(key, []).extend(copy_json(list(part[key])))
        if part.get("intelRdt"):
            if "intelRdt" in merged:
                raise CdiError("two intelRdt settings for one device; CDI allows one")
            merged["intelRdt"] = copy_json(dict(part["intelRdt"]))
    return merged


def render_spec(kind: str, devices: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """A CDI spec with `devices` (name, containerEdits) at the lowest cdiVersion that can
    express it. Raises CdiError for anything a runtime would refuse to load."""
    if not devices:
        raise CdiError("a CDI spec needs at least one device")
    seen: set[str] = set()
    rendered = []
    for name, edits in devices:
        check_device_name(name)
        if name in seen:
            raise CdiError(f"CDI device name {name!r} occurs twice in one spec")
        seen.add(name)
        _check_edits(name, edits)
        rendered.append({"name": name, "containerEdits": copy_json(dict(edits))})
    spec: dict[str, Any] = {"cdiVersion": "", "kind": kind, "devices": rendered}
    spec["cdiVersion"] = required_version(spec)
    return spec


def encode_spec(spec: Mapping[str, Any]) -> bytes:
    """The exact bytes of a spec file. Keys are sorted so the bytes depend only on the
    content, not on dict order: a spec read back from a checkpoint encodes the same.
    Compact, as the Go CDI library writes it: with `indent` the json module falls back
    to its pure-Python encoder (57 against 9 us for a two-device spec; a spec written by an older
    version in the indented form is rewritten once, at start-up)."""
    return (json.dumps(spec, sort_keys=True, separators=(",", ":")) + "\n").encode()


def _check_edits(device: str, edits: Mapping[str, Any]) -> None:
    if not any(edits.get(key) for key in EDIT_KEYS):
        # The Go CDI library rejects "empty device edits".
        raise CdiError(f"CDI device {device!r} has empty containerEdits")
    unknown = sorted(set(edits) - set(EDIT_KEYS))
    if unknown:
        raise CdiError(f"CDI device {device!r}: unknown containerEdits keys {unknown}")
    names: set[str] = set()
    for entry in edits.get("env", []):
        if not isinstance(entry, str) or "=" not in entry or entry.startswith("="):
            raise CdiError(f"CDI device {device!r}: env entry {entry!r} is not NAME=VALUE")
        name = entry.split("=", 1)[0]
        if name in names:
            raise CdiError(f"CDI device {device!r}: env var {name} is set twice")
        names.add(name)


Version = tuple[int, int, int]


def required_version(spec: Mapping[str, Any]) -> str:
    """The lowest cdiVersion whose features cover `spec` (api-facts 7.1); runtimes reject a
    file that uses a feature newer than its declared version, and older runtimes reject
    versions they do not know, so the minimum is the most portable choice."""
    need: Version = (0, 3, 0)
    kind_class = str(spec.get("kind", "")).partition("/")[2]
    if "." in kind_class or spec.get("annotations"):
        need = max(need, (0, 6, 0))
    need = max(need, _edits_version(spec.get("containerEdits") or {}))
    for device in spec.get("devices", []):
        if str(device.get("name", "x"))[:1].isdigit():
            need = max(need, (0, 5, 0))
        if device.get("annotations"):
            need = max(need, (0, 6, 0))
        need = max(need, _edits_version(device.get("containerEdits") or {}))
    return ".".join(str(part) for part in need)


def _edits_version(edits: Mapping[str, Any]) -> Version:
    need: Version = (0, 3, 0)
    if any(mount.get("type") for mount in edits.get("mounts") or []):
        need = max(need, (0, 4, 0))
    if any(node.get("hostPath") for node in edits.get("deviceNodes") or []):
        need = max(need, (0, 5, 0))
    if edits.get("additionalGids"):
        need = max(need, (0, 7, 0))
    rdt = edits.get("intelRdt") or {}
    if rdt:
        need = max(need, (0, 7, 0))
    if edits.get("netDevices") or rdt.get("schemata") or "enableMonitoring" in rdt:
        need = max(need, (1, 1, 0))
    return need


# --- env ------------------------------------------------------------------------------


def unit_id(cdi_name: str) -> str:
    """The `<ID>` of a CDI device's variables."""
    return hashlib.sha256(cdi_name.encode()).hexdigest()[:ID_LENGTH].upper()


def unit_prefix(cdi_name: str) -> str:
    """`SIMDRA_DEVICE_<ID>_`: the start of every variable of a CDI device."""
    return f"{ENV_PREFIX}{unit_id(cdi_name)}_"


def capacity_key(capacity: str) -> str:
    """`CAPACITY_<CAP>` for a capacity name (`memory` -> `CAPACITY_MEMORY`)."""
    return f"CAPACITY_{env_token(capacity)}"


def render_env(cdi_name: str, values: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """`NAME=value` entries for (key, value) pairs; CdiError for an invalid name."""
    prefix = unit_prefix(cdi_name)
    return tuple(env_entry(prefix + key, value) for key, value in values)


# --- copies of JSON-shaped data -----------------------------------------------------


def copy_json(value: T) -> T:
    """A deep copy of `value`, as `copy.deepcopy` makes it for JSON-shaped data."""
    return _copy(value)  # type: ignore[no-any-return]


def _copy(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {key: _copy(item) for key, item in value.items()}
    if kind is list:
        return [_copy(item) for item in value]
    if kind is tuple:
        return tuple(_copy(item) for item in value)
    if kind in _LEAVES:
        return value
    return copy.deepcopy(value)
