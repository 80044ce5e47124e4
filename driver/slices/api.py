"""The publisher's only door to the API server: our slices, and the Node's UID.

Reads use `_preload_content=False` and plain JSON, and writes send plain dicts through
the generated methods' undecorated function (`raw_function`): the v37 client validates
arguments with pydantic models that forbid unknown fields, which would reject (or lose)
device fields newer than the client. Everything fails with one exception type,
`ApiError`, classified so the caller can choose between re-reading, backing off and
giving up.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import kubernetes
import urllib3
from kubernetes.client import ApiClient, ResourceV1Api
from kubernetes.client.exceptions import ApiException

from driver.kube import api_exception_parts

JSON = dict[str, Any]
_WRITE_TIMEOUT = (10.0, 30.0)  # connect, read seconds


class ApiError(Exception):
    """A failed API call, with what was attempted and how to react."""

    def __init__(
        self,
        action: str,
        status: int,
        reason: str,
        message: str,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{action}: {status or 'no response'} {reason}: {message}")
        self.action = action
        self.status = status  # 0: no HTTP response (connection error)
        self.reason = reason  # Status.reason from the server, e.g. "Conflict"
        self.message = message
        self.retry_after = retry_after

    @property
    def kind(self) -> str:
        """conflict | already_exists | not_found | gone | throttled | server | connection |
        invalid | forbidden | other."""
        if self.status == 409:
            return "already_exists" if self.reason == "AlreadyExists" else "conflict"
        return {
            0: "connection", 404: "not_found", 410: "gone", 429: "throttled", 400: "invalid",
            422: "invalid", 401: "forbidden", 403: "forbidden",
        }.get(self.status, "server" if self.status >= 500 else "other")


class SliceApi:
    """List, watch and write the ResourceSlices of one driver on one node."""

    def __init__(self, api_client: ApiClient, driver: str, node: str) -> None:
        self._client = api_client
        self._resource = ResourceV1Api(api_client)
        self.driver = driver
        self.node = node
        self.field_selector = f"spec.driver={driver},spec.nodeName={node}"
        self._watch: kubernetes.watch.Watch | None = None

    def list_slices(self) -> tuple[list[JSON], str]:
        """Our slices and the list's resourceVersion (the point to watch from)."""
        data = self._call(
            "list ResourceSlices",
            self._resource.list_resource_slice,
            field_selector=self.field_selector,
            _request_timeout=_WRITE_TIMEOUT,
        )
        return list(data.get("items") or []), str(data["metadata"].get("resourceVersion", ""))

    def watch_slices(self, resource_version: str, timeout_seconds: int) -> Iterator[JSON]:
        """Watch events ({"type", "object"}) after `resource_version`, until the server
        closes the watch after `timeout_seconds` or `stop_watch` is called."""
        watch = kubernetes.watch.Watch()
        self._watch = watch
        try:
            yield from watch.stream(
                self._resource.list_resource_slice,
                field_selector=self.field_selector,
                resource_version=resource_version,
                timeout_seconds=timeout_seconds,
                allow_watch_bookmarks=True,
                deserialize=False,
                _request_timeout=(10.0, timeout_seconds + 30.0),
            )
        except ApiException as exc:
            raise _api_error("watch ResourceSlices", exc) from exc
        except _CONNECTION_ERRORS as exc:
            raise ApiError("watch ResourceSlices", 0, type(exc).__name__, str(exc)) from exc
        except KeyError as exc:
            # The client chokes on ERROR events when deserialize=False (it looks for
            # "raw_object"); an ERROR event (410 Expired and others) means: list again.
            raise ApiError("watch ResourceSlices", 410, "Expired",
                           "the watch ended with an ERROR event") from exc
        finally:
            self._watch = None

    def stop_watch(self) -> None:
        """Make a running `watch_slices` return promptly (closes its connection)."""
        watch = self._watch
        if watch is not None:
            watch.stop()

    def get_slice(self, name: str) -> JSON | None:
        """The slice called `name`, or None when it does not exist."""
        try:
            return self._call(f"get ResourceSlice {name}", self._resource.read_resource_slice,
                              name, _request_timeout=_WRITE_TIMEOUT)
        except ApiError as err:
            if err.kind == "not_found":
                return None
            raise

    def create(self, body: JSON, known: Known | None = None) -> JSON:
        """Create a slice; returns the object as stored (devices equal to a `known`
        spec of the same name are that very object, see `_call`)."""
        name = body["metadata"].get("name") or body["metadata"].get("generateName", "") + "*"
        return self._call(f"create ResourceSlice {name}",
                          _unvalidated(ResourceV1Api.create_resource_slice), self._resource, body,
                          _request_timeout=_WRITE_TIMEOUT, known=known)

    def replace(self, body: JSON, known: Known | None = None) -> JSON:
        """Update a slice (resourceVersion in the body guards against lost updates);
        returns the object as stored, sharing `known` devices like `create`."""
        name = body["metadata"]["name"]
        return self._call(f"update ResourceSlice {name}",
                          _unvalidated(ResourceV1Api.replace_resource_slice), self._resource,
                          name, body, _request_timeout=_WRITE_TIMEOUT, known=known)

    def delete(self, name: str, uid: str | None, resource_version: str | None) -> None:
        """Delete a slice, only if it is still the object we saw (uid + resourceVersion)."""
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version))
                         if v}
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions}
        self._call(f"delete ResourceSlice {name}",
                   _unvalidated(ResourceV1Api.delete_resource_slice), self._resource, name,
                   body=body, _request_timeout=_WRITE_TIMEOUT)

    def node_uid(self) -> str:
        """The UID of our Node (ApiError kind "not_found" while it does not exist)."""
        node = self._call(f"get Node {self.node}", self._get, "/api/v1/nodes/{name}",
                          {"name": self.node}, _request_timeout=_WRITE_TIMEOUT)
        return str(node["metadata"]["uid"])

    def server_version(self) -> str:
        """The API server's release, as its /version `gitVersion` ("v1.34.4")."""
        version = self._call("get /version", self._get, "/version", {},
                             _request_timeout=_WRITE_TIMEOUT)
        return str(version.get("gitVersion", ""))

    def _get(self, path: str, params: dict[str, str], *, _preload_content: bool,
             _request_timeout: Any) -> Any:
        """GET a path, raw. Not CoreV1Api.read_node or VersionApi: importing them costs
        the plugin process about as much CPU as everything else it imports."""
        request = self._client.param_serialize(
            method="GET", resource_path=path, path_params=params,
            header_params={"Accept": "application/json"}, auth_settings=["BearerToken"])
        response = self._client.call_api(*request, _request_timeout=_request_timeout)
        if not 200 <= response.status <= 299:
            response.read()
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return response.response

    def _call(self, action: str, func: Any, *args: Any, known: Known | None = None,
              **kwargs: Any) -> JSON:
        """One call, its answer decoded. With `known` (device name -> spec), each
        decoded device entry equal to the known spec is replaced by it while decoding:
        the answer to a write of 128 devices then costs no second copy of them, not
        even for a moment (a moment is enough to leave the heap fragmented)."""
        hook = _sharing_hook(known) if known else None
        try:
            response = func(*args, _preload_content=False, **kwargs)
            try:
                body: JSON = json.loads(response.data or b"{}", object_hook=hook)
                return body
            finally:
                response.release_conn()
        except ApiException as exc:
            raise _api_error(action, exc) from exc
        except _CONNECTION_ERRORS as exc:
            raise ApiError(action, 0, type(exc).__name__, str(exc)) from exc


Known = Mapping[str, Mapping[str, Any]]


def _sharing_hook(known: Known) -> Callable[[JSON], Any]:
    def share(decoded: JSON) -> Any:
        name = decoded.get("name")
        spec = known.get(name) if isinstance(name, str) else None
        return spec if spec is not None and spec == decoded else decoded

    return share


def _unvalidated(method: Callable[..., Any]) -> Callable[..., Any]:
    """A generated method without its argument validation: pydantic's `validate_call`
    keeps the undecorated function as `raw_function`."""
    # The wrapper is annotated as the function it wraps, so its extra attribute is unseen.
    raw: Callable[..., Any] = method.raw_function  # type: ignore[attr-defined]
    return raw


_CONNECTION_ERRORS = (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)


def _api_error(action: str, exc: ApiException) -> ApiError:
    status, reason, message = api_exception_parts(exc)
    return ApiError(action, status, reason, message, _retry_after(exc))


def _retry_after(exc: ApiException) -> float | None:
    headers = exc.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
