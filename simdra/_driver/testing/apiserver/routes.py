"""URL paths to resources, as the kube-apiserver lays them out, plus discovery answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simdra._driver.testing.apiserver import resources
from simdra._driver.testing.apiserver.errors import path_not_found
from simdra._driver.testing.apiserver.resources import ResourceType

SUBRESOURCES = ("status",)


@dataclass(frozen=True)
class Route:
    """A request's target: a resource, optionally one object of it and a subresource."""

    resource: ResourceType
    namespace: str | None  # None: cluster-scoped, or all namespaces
    name: str | None  # None: the collection
    subresource: str | None = None

    @property
    def log_resource(self) -> str:
        """How the request log names the target: `resourceclaims` or `resourceclaims/status`."""
        plural = self.resource.plural
        return f"{plural}/{self.subresource}" if self.subresource else plural


def parse(path: str) -> Route:
    """The route of `/api/v1/...` or `/apis/<group>/<version>/...`; 404 when there is none."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise path_not_found()
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        raise path_not_found()
    resource = resources.lookup(group, version, rest[0])
    if resource is None or (namespace is not None and not resource.namespaced):
        raise path_not_found()
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else None
    if subresource is not None and (subresource not in SUBRESOURCES or not resource.has_status):
        raise path_not_found()
    if name is not None and resource.namespaced and namespace is None:
        raise path_not_found()
    return Route(resource, namespace, name, subresource)


def discovery(path: str, release: str) -> dict[str, Any] | None:
    """The discovery document served at `path` (/api, /apis, /api/v1, ..., /version of
    `release`, "1.37"), or None."""
    path = "/" + path.strip("/")
    by_gv = resources.group_versions()
    if path == "/api":
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
    if path == "/apis":
        groups = []
        for gv in sorted(by_gv):
            if "/" not in gv:
                continue
            group, version = gv.split("/")
            entry = {"groupVersion": gv, "version": version}
            groups.append({"name": group, "versions": [entry], "preferredVersion": entry})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
    gv = "v1" if path == "/api/v1" else path.removeprefix("/apis/")
    if gv in by_gv and (path == "/api/v1" or path.startswith("/apis/")):
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": gv,
            "resources": [r.api_resource() for r in by_gv[gv]],
        }
    if path == "/version":
        major, minor = release.split(".")[:2]
        return {
            "major": major,
            "minor": minor,
            "gitVersion": f"v{major}.{minor}.0-simdra",
            "platform": "linux/amd64",
        }
    return None
