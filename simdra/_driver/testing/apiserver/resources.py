"""The resource types the stand-in serves, with what the REST layer needs to know of each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ResourceType:
    """One REST resource: where it lives, its kind, scope and server-side behaviour."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    # Field selector labels beyond metadata.name / metadata.namespace.
    selectable_fields: tuple[str, ...] = ()
    # DELETE answers with the deleted object (most resource.k8s.io types) or a Status.
    returns_deleted_object: bool = True
    # Has a /status subresource: the main endpoint ignores status, /status ignores the rest.
    has_status: bool = False
    # The API server resets status on create.
    clears_status_on_create: bool = False
    # Spec cannot change after create (ResourceClaim).
    immutable_spec: bool = False

    @property
    def api_version(self) -> str:
        """`apiVersion` of the objects: `v1` or `<group>/<version>`."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """`<plural>.<group>` as in NotFound/Conflict messages (`nodes` for core)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def group_kind(self) -> str:
        """`<Kind>.<group>` as in Invalid messages (`Node` for core)."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def list_kind(self) -> str:
        """Kind of the list answer."""
        return f"{self.kind}List"

    def field_labels(self) -> tuple[str, ...]:
        """Every label a field selector may use on this resource."""
        base = ("metadata.name", "metadata.namespace") if self.namespaced else ("metadata.name",)
        return base + self.selectable_fields

    def api_resource(self) -> dict[str, Any]:
        """This resource's entry in an APIResourceList (discovery)."""
        verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        return {
            "name": self.plural,
            "singularName": self.kind.lower(),
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": verbs,
        }


RESOURCE_GROUP = "resource.k8s.io"

NODES = ResourceType(
    "",
    "v1",
    "nodes",
    "Node",
    namespaced=False,
    selectable_fields=("spec.unschedulable",),
    returns_deleted_object=False,
    has_status=True,
)
PODS = ResourceType(
    "",
    "v1",
    "pods",
    "Pod",
    namespaced=True,
    selectable_fields=("spec.nodeName", "status.phase"),
    has_status=True,
)
RESOURCE_SLICES = ResourceType(
    RESOURCE_GROUP,
    "v1",
    "resourceslices",
    "ResourceSlice",
    namespaced=False,
    selectable_fields=("spec.nodeName", "spec.driver", "spec.pool.name"),
)
RESOURCE_CLAIMS = ResourceType(
    RESOURCE_GROUP,
    "v1",
    "resourceclaims",
    "ResourceClaim",
    namespaced=True,
    has_status=True,
    clears_status_on_create=True,
    immutable_spec=True,
)
RESOURCE_CLAIM_TEMPLATES = ResourceType(
    RESOURCE_GROUP,
    "v1",
    "resourceclaimtemplates",
    "ResourceClaimTemplate",
    namespaced=True,
    immutable_spec=True,
)
DEVICE_CLASSES = ResourceType(
    RESOURCE_GROUP, "v1", "deviceclasses", "DeviceClass", namespaced=False
)

# GA in 1.37: a rule's taint counts as if the driver had published it on the device.
DEVICE_TAINT_RULES = ResourceType(
    RESOURCE_GROUP, "v1", "devicetaintrules", "DeviceTaintRule", namespaced=False,
    has_status=True,
)

ALL = (NODES, PODS, RESOURCE_SLICES, RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES, DEVICE_CLASSES,
       DEVICE_TAINT_RULES)
_BY_PATH = {(r.group, r.version, r.plural): r for r in ALL}
_BY_PLURAL = {r.plural: r for r in ALL}


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    """The resource served at `/apis/<group>/<version>/<plural>` (group "" = `/api/v1`)."""
    return _BY_PATH.get((group, version, plural))


def by_plural(plural: str) -> ResourceType:
    """The resource called `plural` ("resourceslices", "nodes", ...); KeyError if unknown."""
    try:
        return _BY_PLURAL[plural]
    except KeyError:
        raise KeyError(f"unknown resource {plural!r}; known: {sorted(_BY_PLURAL)}") from None


def group_versions() -> dict[str, list[ResourceType]]:
    """`<group>/<version>` (or `v1`) -> its resources, for discovery answers."""
    out: dict[str, list[ResourceType]] = {}
    for r in ALL:
        out.setdefault(r.api_version, []).append(r)
    return out


def field_value(obj: dict[str, Any], label: str) -> str:
    """The string a field selector compares for `label` ("" when unset, as the server does)."""
    value: Any = obj
    for part in label.split("."):
        if not isinstance(value, dict):
            return ""
        value = value.get(part)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
