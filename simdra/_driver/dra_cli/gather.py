"""The cluster read into one `Snapshot`: one paged LIST per resource kind, the kinds
listed side by side, never a request per device, node or pod.

Each page is trimmed as it comes, so that a command holds what it reads, not the
cluster: no object keeps its managedFields, a claim not its status.devices (what drivers
report of each device: 40% of a claim), and of the pods (most of a cluster's bytes:
3,000 pods with claims are about 15 MB of JSON) only those that report a device's health
are kept, with only what `inventory` reads of them. A page of pods none of which reports
any (the word does not occur in it) is not even decoded: only its list metadata is."""

from __future__ import annotations

import json
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from simdra._driver.kubeapi.client import RestClient

JSON = dict[str, Any]
RESOURCE_API = "/apis/resource.k8s.io/v1"
# kind -> (path of the cluster-wide list, the resource as RBAC names it)
PATHS: dict[str, tuple[str, str]] = {
    "slices": (f"{RESOURCE_API}/resourceslices", "resourceslices.resource.k8s.io"),
    "claims": (f"{RESOURCE_API}/resourceclaims", "resourceclaims.resource.k8s.io"),
    "classes": (f"{RESOURCE_API}/deviceclasses", "deviceclasses.resource.k8s.io"),
    "pods": ("/api/v1/pods", "pods"),
    "nodes": ("/api/v1/nodes", "nodes"),
}
# DeviceTaintRules (their taints count as the devices' own): v1 from 1.37, before that
# v1beta2 (1.36) or v1alpha3 (1.35), each only where its API is turned on.
TAINT_RULE_VERSIONS = ("v1", "v1beta2", "v1alpha3")
PAGE = 500  # items per page of a LIST, as kubectl pages
HEALTH_KEY = b'"allocatedResourcesStatus"'  # in a page of pods of which one reports health
LIST_TIMEOUT = (10.0, 120.0)


@dataclass(frozen=True)
class Snapshot:
    """What the cluster held, kind by kind (a kind not asked for is empty)."""

    slices: list[JSON] = field(default_factory=list)
    claims: list[JSON] = field(default_factory=list)
    classes: list[JSON] = field(default_factory=list)
    pods: list[JSON] = field(default_factory=list)  # those reporting health (pod_health)
    nodes: list[JSON] = field(default_factory=list)
    taint_rules: list[JSON] = field(default_factory=list)


class ListFailed(Exception):
    """A LIST failed; `verb`/`resource` say what was asked, `cause` is the error."""

    def __init__(self, verb: str, resource: str, path: str, cause: BaseException) -> None:
        super().__init__(f"{verb} {resource}: {cause}")
        self.verb = verb
        self.resource = resource
        self.path = path
        self.cause = cause


def gather(client: RestClient, kinds: Iterable[str]) -> Snapshot:
    """The snapshot of `kinds` (names of PATHS), their LISTs made side by side."""
    wanted = sorted(set(kinds))
    unknown = [k for k in wanted if k not in (*PATHS, "taint_rules")]
    if unknown:
        raise ValueError(f"unknown kinds {unknown}")
    with ThreadPoolExecutor(max_workers=max(1, len(wanted))) as pool:
        lists = dict(zip(wanted, pool.map(lambda k: _list_kind(client, k), wanted), strict=True))
    return Snapshot(**lists)


def _list_kind(client: RestClient, kind: str) -> list[JSON]:
    return list_taint_rules(client) if kind == "taint_rules" else list_all(client, kind)


def list_taint_rules(client: RestClient) -> list[JSON]:
    """The cluster's DeviceTaintRules, from the newest version it serves; none when it
    serves none (the API off, or a release before 1.35)."""
    from simdra._driver.kubeapi.errors import ApiStatusError

    for version in TAINT_RULE_VERSIONS:
        path = f"/apis/resource.k8s.io/{version}/devicetaintrules"
        try:
            return _list_path(client, path, "devicetaintrules.resource.k8s.io", "taint_rules")
        except ListFailed as failed:
            cause = failed.cause
            if not (isinstance(cause, ApiStatusError) and cause.status == 404):
                raise
    return []


def list_all(client: RestClient, kind: str) -> list[JSON]:
    """Every object of `kind`, page by page; ListFailed on an error."""
    path, resource = PATHS[kind]
    return _list_path(client, path, resource, kind)


def _list_path(client: RestClient, path: str, resource: str, kind: str) -> list[JSON]:
    items: list[JSON] = []
    token = ""
    while True:
        query: dict[str, str | int | bool] = {"limit": PAGE}
        if token:
            query["continue"] = token
        try:
            body = client.request_bytes("GET", path, query=query, timeout=LIST_TIMEOUT)
            page, token = _page(kind, body)
        except Exception as err:  # turned into one line by connect.error_line
            raise ListFailed("list", resource, path, err) from err
        items.extend(page)
        if not token:
            return items


def _page(kind: str, body: bytes) -> tuple[list[JSON], str]:
    """The kept items of one page of a LIST and its continue token ("" for the last)."""
    if kind == "pods" and HEALTH_KEY not in body:
        head = _list_metadata(body)
        if head is not None:
            return [], str(head.get("continue") or "")
    answer = json.loads(body or b"{}")
    token = str((answer.get("metadata") or {}).get("continue") or "")
    return _trimmed(kind, answer.get("items") or []), token


def _list_metadata(body: bytes) -> JSON | None:
    """The list's metadata, decoded alone from the text before its items (where the API
    server writes it); None when it is not there."""
    end = body.find(b'"items":')
    try:
        head = json.loads(body[:end].rstrip().rstrip(b",") + b"}") if end > 0 else None
    except ValueError:
        return None
    metadata = head.get("metadata") if isinstance(head, dict) else None
    return metadata if isinstance(metadata, dict) else None


def _trimmed(kind: str, page: list[JSON]) -> list[JSON]:
    for item in page:
        (item.get("metadata") or {}).pop("managedFields", None)  # a third of their bytes
        if kind == "claims":  # how each device is doing, as drivers report it: unread
            (item.get("status") or {}).pop("devices", None)
    if kind != "pods":
        return page
    return [trimmed for pod in page if (trimmed := pod_health(pod)) is not None]


def pod_health(pod: JSON) -> JSON | None:
    """What `inventory` reads of a pod: its name, its claims' names and its containers'
    allocatedResourcesStatus; None for a pod none of whose containers reports any."""
    status = pod.get("status") or {}
    containers = [{"allocatedResourcesStatus": c["allocatedResourcesStatus"]}
                  for c in [*(status.get("initContainerStatuses") or []),
                            *(status.get("containerStatuses") or [])]
                  if c.get("allocatedResourcesStatus")]
    if not containers:
        return None
    meta = pod.get("metadata") or {}
    return {"metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
            "spec": {"resourceClaims": (pod.get("spec") or {}).get("resourceClaims")},
            "status": {"resourceClaimStatuses": status.get("resourceClaimStatuses"),
                       "containerStatuses": containers}}


def get_object(client: RestClient, kind: str, namespace: str, name: str) -> JSON | None:
    """One namespaced object of `kind` ("pods", "claims"), None when not found."""
    from simdra._driver.kubeapi.errors import ApiStatusError

    base, resource = PATHS[kind]
    api, _, plural = base.rpartition("/")
    path = f"{api}/namespaces/{namespace}/{plural}/{name}"
    try:
        found: JSON = client.request("GET", path)
    except ApiStatusError as err:
        if err.status == 404 and _object_missing(err):
            return None
        raise ListFailed("get", resource, path, err) from err
    except Exception as err:
        raise ListFailed("get", resource, path, err) from err
    return found


def _object_missing(err: Exception) -> bool:
    """A 404 for the object (a Status naming it), not for the API group."""
    from simdra._driver.kubeapi.errors import ApiStatusError

    assert isinstance(err, ApiStatusError)
    _, reason, message = err.parts()
    return reason == "NotFound" and "could not find the requested resource" not in message
