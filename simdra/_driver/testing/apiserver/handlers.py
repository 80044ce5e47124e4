"""REST verbs: turn one parsed HTTP request into a reply (or a watch), like kube-apiserver.

Writes follow the API server's optimistic concurrency: read the current object, build
and validate the next one without holding the store lock, then commit only if nothing
changed in between (retrying unconditional writes, answering 409 to conditional ones).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from simdra._driver.testing.apiserver import errors, lifecycle, patch, routes
from simdra._driver.testing.apiserver.apply import APPLY, parse_config, server_side_apply
from simdra._driver.testing.apiserver.defaults import apply_defaults
from simdra._driver.testing.apiserver.errors import APIError
from simdra._driver.testing.apiserver.faults import Faults, Request, RequestLog, Stalls
from simdra._driver.testing.apiserver.gates import DEFAULT_GATES, drop_disabled_fields
from simdra._driver.testing.apiserver.resources import NODES, ResourceType
from simdra._driver.testing.apiserver.routes import Route
from simdra._driver.testing.apiserver.selectors import selector_for
from simdra._driver.testing.apiserver.store import ABSENT, StaleObject, Store, key_of, object_rv
from simdra._driver.testing.apiserver.validation import check_decodable
from simdra._driver.testing.apiserver.watch import WatchRequest

JSON = dict[str, Any]
_RETRIES = 20  # optimistic-concurrency retries for unconditional writes
DEFAULT_WATCH_TIMEOUT = 1800.0  # the API server's default minimum request timeout


@dataclass(frozen=True)
class HTTPRequest:
    """The parts of an HTTP request the API needs."""

    method: str
    path: str
    query: Mapping[str, str]
    content_type: str = ""
    body: bytes = b""


@dataclass
class Reply:
    """A complete (non-streaming) answer."""

    code: int
    body: JSON
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Config:
    """Server behaviour a test may change while the server runs."""

    kubernetes_version: str = "1.37"
    feature_gates: dict[str, bool] = field(default_factory=lambda: dict(DEFAULT_GATES))
    bookmark_interval: float = 60.0
    too_large_resource_version_wait: float = 3.0  # the watch cache's wait for a future RV


class API:
    """Serves the REST API over a Store; thread-safe (one call per request thread)."""

    def __init__(self, store: Store, config: Config, faults: Faults, log: RequestLog) -> None:
        self.store = store
        self.config = config
        self.faults = faults
        self.log = log
        self.stalls = Stalls()

    # --- entry point ---------------------------------------------------------------

    def serve(self, request: HTTPRequest) -> Reply | WatchRequest:
        """Answer one request; watches come back as a WatchRequest for the server to stream."""
        release = self.config.kubernetes_version
        document = routes.discovery(request.path, release) if request.method == "GET" else None
        if document is not None:
            return Reply(200, document)
        if request.path.rstrip("/") in ("/healthz", "/readyz", "/livez"):
            return Reply(200, {"status": "ok"})
        verb, route = "", None
        try:
            route = routes.parse(request.path)
            verb = _verb(request, route)
            failure = self.faults.take(verb, route.log_resource)
            if failure is not None:
                raise failure
            with self.stalls.hold(verb, route.log_resource):
                result = self._dispatch(verb, route, request)
        except APIError as error:
            result = Reply(error.code, error.status(), error.headers)
        code = result.code if isinstance(result, Reply) else 200
        if route is not None:
            self.log.record(
                Request(verb, route.log_resource, route.namespace or "", route.name or "", code)
            )
        return result

    def _dispatch(self, verb: str, route: Route, request: HTTPRequest) -> Reply | WatchRequest:
        handlers: dict[str, Callable[[Route, HTTPRequest], Reply | WatchRequest]] = {
            "get": self._get,
            "list": self._list,
            "watch": self._watch,
            "create": self._create,
            "update": self._update,
            "patch": self._patch,
            "delete": self._delete,
            "deletecollection": self._delete_collection,
        }
        return handlers[verb](route, request)

    # --- reads ---------------------------------------------------------------------

    def _current(self, route: Route) -> JSON:
        assert route.name is not None
        obj = self.store.get(route.resource.plural, (route.namespace or "", route.name))
        if obj is None:
            r = route.resource
            raise errors.not_found(r.qualified, r.group, r.plural, route.name)
        return obj

    def _get(self, route: Route, request: HTTPRequest) -> Reply:
        return Reply(200, self._current(route))

    def _list(self, route: Route, request: HTTPRequest) -> Reply:
        r = route.resource
        selector = selector_for(dict(request.query), r)
        items, rv = self.store.list(r.plural, route.namespace)
        items = [o for o in items if selector.matches(o)]
        meta: JSON = {"resourceVersion": str(rv)}
        items, meta = _paginate(items, request.query, rv, meta)
        # Like the real server, list items carry no kind/apiVersion of their own.
        bare = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in items]
        return Reply(
            200, {"kind": r.list_kind, "apiVersion": r.api_version, "metadata": meta, "items": bare}
        )

    def _watch(self, route: Route, request: HTTPRequest) -> WatchRequest:
        query = request.query
        selector = selector_for(dict(query), route.resource)
        initial = query.get("sendInitialEvents") in ("true", "1")
        rv_text = query.get("resourceVersion", "")
        start: int | None = None
        if not initial and rv_text not in ("", "0"):
            try:
                start = int(rv_text)
            except ValueError:
                raise errors.bad_request(f"invalid resource version: {rv_text!r}") from None
        try:
            timeout = float(query.get("timeoutSeconds") or 0)
        except ValueError:
            raise errors.bad_request("timeoutSeconds must be a number") from None
        if timeout <= 0:  # as the real server: unset or 0 means its default
            timeout = DEFAULT_WATCH_TIMEOUT
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        return WatchRequest(
            route.resource, route.namespace, selector, start, timeout, bookmarks, initial
        )

    # --- writes --------------------------------------------------------------------

    def _body(self, request: HTTPRequest) -> Any:
        if request.content_type == APPLY:
            return parse_config(request.body)
        if request.content_type and request.content_type not in (
            "application/json",
            *patch.SUPPORTED,
        ):
            raise errors.unsupported_media_type(request.content_type)
        try:
            return json.loads(request.body or b"null")
        except ValueError as exc:
            raise errors.bad_request(f"the request body is not valid JSON: {exc}") from None

    def _invalid(self, resource: ResourceType, obj: JSON, current: JSON | None) -> None:
        check_decodable(resource.kind, obj)  # a real server fails these while decoding
        found = lifecycle.validation_errors(resource, obj, current, self.config.kubernetes_version)
        if found:
            name = obj["metadata"].get("name") or obj["metadata"].get("generateName") or ""
            raise errors.invalid(resource.group_kind, resource.group, resource.kind, name, found)

    def _create(self, route: Route, request: HTTPRequest) -> Reply:
        r = route.resource
        obj = apply_defaults(r.plural, lifecycle.normalize(r, self._body(request), route.namespace))
        generated = not obj["metadata"].get("name")
        obj = drop_disabled_fields(r.plural, obj, None, self.config.feature_gates,
                                   self.config.kubernetes_version)
        obj = lifecycle.prepare_create(r, obj)
        self._invalid(r, obj, None)
        for _ in range(_RETRIES):
            try:
                return Reply(201, self.store.commit(r.plural, key_of(obj), obj, ABSENT))
            except StaleObject:
                if not generated:
                    break
                meta = {**obj["metadata"]}
                meta["name"] = lifecycle.generate_name(meta["generateName"])
                obj = {**obj, "metadata": meta}
        raise errors.already_exists(r.qualified, r.group, r.plural, obj["metadata"]["name"])

    def _update(self, route: Route, request: HTTPRequest) -> Reply:
        body = lifecycle.normalize(route.resource, self._body(request), route.namespace)
        body = apply_defaults(route.resource.plural, body)
        conditional = bool(body["metadata"].get("resourceVersion"))
        for _ in range(_RETRIES):
            try:
                return self._replace(route, body, self._current(route), conditional)
            except StaleObject:
                continue  # an unconditional update: try again on the newer object
        raise self._conflict(route)

    def _patch(self, route: Route, request: HTTPRequest) -> Reply:
        if request.content_type not in (*patch.SUPPORTED, APPLY):
            raise errors.unsupported_media_type(request.content_type)
        operations = self._body(request)
        for _ in range(_RETRIES):
            current = self._current(route)
            patched = self._patched(route, request, current, operations)
            body = lifecycle.normalize(route.resource, patched, route.namespace)
            body = apply_defaults(route.resource.plural, body)
            # A patch that sets metadata.resourceVersion is a precondition; others retry.
            conditional = (
                body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]
            )
            try:
                return self._replace(route, body, current, conditional)
            except StaleObject:
                continue
        raise self._conflict(route)

    def _patched(self, route: Route, request: HTTPRequest, current: JSON, body: Any) -> Any:
        if request.content_type != APPLY:
            return patch.apply_patch(request.content_type, current, body)
        return server_side_apply(
            route.resource.plural, current, body, request.query.get("fieldManager", ""),
            force=request.query.get("force") == "true", subresource=route.subresource)

    def _conflict(self, route: Route) -> APIError:
        r = route.resource
        return errors.conflict(r.qualified, r.group, r.plural, route.name or "", errors.STALE)

    def _replace(self, route: Route, body: JSON, current: JSON, conditional: bool) -> Reply:
        """One attempt at an update: preconditions, gates, validation, commit.

        Raises StaleObject when the object changed meanwhile and the write may be retried;
        a conditional write answers 409 instead.
        """
        r = route.resource
        name = body["metadata"].get("name")
        if name != route.name:
            raise lifecycle.name_mismatch(name, route.name or "")
        lifecycle.check_update_preconditions(r, body, current)
        candidate = drop_disabled_fields(r.plural, body, current, self.config.feature_gates,
                                         self.config.kubernetes_version)
        new = lifecycle.prepare_update(r, candidate, current, route.subresource)
        if lifecycle.unchanged(new, current):
            return Reply(200, current)
        self._invalid(r, new, current)
        try:
            return Reply(200, self._commit_update(r, new, current))
        except StaleObject:
            if conditional:
                raise self._conflict(route) from None
            raise

    def _commit_update(self, r: ResourceType, new: JSON, current: JSON) -> JSON:
        if lifecycle.finalized(new):
            return self.store.commit(r.plural, key_of(current), None, object_rv(current))
        return self.store.commit(r.plural, key_of(current), new, object_rv(current))

    def _delete(self, route: Route, request: HTTPRequest) -> Reply:
        options = self._body(request) or {}
        if not isinstance(options, dict):
            raise errors.bad_request("DeleteOptions must be a JSON object")
        for _ in range(_RETRIES):
            current = self._current(route)
            lifecycle.check_delete_preconditions(route.resource, options, current)
            try:
                return self._reply_deleted(route.resource, self._remove(route.resource, current))
            except StaleObject:
                continue
        raise self._conflict(route)

    def _remove(self, r: ResourceType, current: JSON) -> JSON:
        """Delete now, or mark for deletion while finalizers remain."""
        if current["metadata"].get("finalizers"):
            if current["metadata"].get("deletionTimestamp"):
                return current
            marked = lifecycle.mark_deleting(current)
            return self.store.commit(r.plural, key_of(current), marked, object_rv(current))
        deleted = self.store.commit(r.plural, key_of(current), None, object_rv(current))
        if r is NODES:
            self._collect_dependents(current["metadata"]["uid"])
        return deleted

    def _collect_dependents(self, owner_uid: str) -> None:
        # The garbage collector deletes objects owned by a deleted Node (e.g. its slices).
        for plural in ("resourceslices", "pods"):
            items, _ = self.store.list(plural)
            for obj in items:
                owners = obj["metadata"].get("ownerReferences") or []
                if any(o.get("uid") == owner_uid for o in owners):
                    with contextlib.suppress(StaleObject):
                        self.store.commit(plural, key_of(obj), None, object_rv(obj))

    def _reply_deleted(self, r: ResourceType, deleted: JSON) -> Reply:
        if r.returns_deleted_object:
            return Reply(200, deleted)
        meta = deleted["metadata"]
        details = {"name": meta["name"], "kind": r.plural, "uid": meta.get("uid")}
        if r.group:
            details["group"] = r.group
        return Reply(200, errors.success(details))

    def _delete_collection(self, route: Route, request: HTTPRequest) -> Reply:
        r = route.resource
        selector = selector_for(dict(request.query), r)
        items, _ = self.store.list(r.plural, route.namespace)
        deleted = []
        for listed in items:
            if not selector.matches(listed):
                continue
            obj: JSON | None = listed
            # Like the real server: delete by name whatever the object's version by now
            # (a change made since the list does not save it); skip it only once gone.
            for _ in range(_RETRIES):
                if obj is None:
                    break
                try:
                    deleted.append(self._remove(r, obj))
                    break
                except StaleObject:
                    obj = self.store.get(r.plural, key_of(obj))
        bare = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in deleted]
        return Reply(
            200,
            {
                "kind": r.list_kind,
                "apiVersion": r.api_version,
                "metadata": {"resourceVersion": str(self.store.resource_version)},
                "items": bare,
            },
        )


def _verb(request: HTTPRequest, route: Route) -> str:
    """The Kubernetes verb of a request (get, list, watch, create, ...); 405 if none."""
    method, item = request.method, route.name is not None
    watch = request.query.get("watch") in ("true", "1")
    verbs = {
        ("GET", True): "get",
        ("GET", False): "watch" if watch else "list",
        ("POST", False): "create",
        ("PUT", True): "update",
        ("PATCH", True): "patch",
        ("DELETE", True): "delete",
        ("DELETE", False): "deletecollection",
    }
    verb = verbs.get((method, item))
    if verb is None or (route.subresource and verb not in ("get", "update", "patch")):
        raise errors.method_not_allowed()
    return verb


def _paginate(
    items: list[JSON], query: Mapping[str, str], rv: int, meta: JSON
) -> tuple[list[JSON], JSON]:
    """Apply `limit`/`continue`: items after the token's key, at most `limit` of them."""
    token, limit_text = query.get("continue"), query.get("limit")
    if token:
        try:
            after = tuple(json.loads(base64.urlsafe_b64decode(token.encode()))["after"])
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise errors.bad_request(f"invalid continue token {token!r}") from None
        items = [o for o in items if key_of(o) > after]
    limit = int(limit_text) if limit_text and limit_text.isdigit() else 0
    if limit and len(items) > limit:
        last = key_of(items[limit - 1])
        meta["continue"] = base64.urlsafe_b64encode(
            json.dumps({"after": list(last), "rv": rv}).encode()
        ).decode()
        meta["remainingItemCount"] = len(items) - limit
        items = items[:limit]
    return items, meta
