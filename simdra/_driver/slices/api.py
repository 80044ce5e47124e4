"""The publisher's only door to the API server: our slices, and the Node's UID.

Reads and writes are plain JSON over our own client (`simdra._driver.kubeapi`), so device
fields newer than any client library pass through unchanged. Everything fails with one
exception type, `ApiError`, classified so the caller can choose between re-reading,
backing off and giving up.
"""

from __future__ import annotations

import http.client
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import quote

import urllib3

from simdra._driver.kubeapi import ApiStatusError, RestClient, Watch
from simdra._driver.kubeapi.client import Query

JSON = dict[str, Any]
_WRITE_TIMEOUT = (10.0, 30.0)  # connect, read seconds
SLICES = "/apis/resource.k8s.io/v1/resourceslices"


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

    def __init__(self, api_client: RestClient, driver: str, node: str) -> None:
        self._client = api_client
        self.driver = driver
        self.node = node
        self.field_selector = f"spec.driver={driver},spec.nodeName={node}"
        self._watch: Watch | None = None
        # Where the server's release comes from when not from /version per call: a
        # SliceFeed shares one answer between its publishers.
        self.version_source: Callable[[], str] | None = None

    def list_slices(self) -> tuple[list[JSON], str]:
        """Our slices and the list's resourceVersion (the point to watch from)."""
        data = self._call("list ResourceSlices", "GET", SLICES,
                          query={"fieldSelector": self.field_selector})
        return list(data.get("items") or []), str(data["metadata"].get("resourceVersion", ""))

    def watch_slices(self, resource_version: str, timeout_seconds: int) -> Iterator[JSON]:
        """Watch events ({"type", "object"}) after `resource_version`, until the server
        closes the watch after `timeout_seconds` or `stop_watch` is called."""
        action = "watch ResourceSlices"
        query: Query = {"fieldSelector": self.field_selector, "resourceVersion": resource_version,
                 "timeoutSeconds": timeout_seconds, "allowWatchBookmarks": True}
        try:
            self._watch = self._client.watch(SLICES, query, (10.0, timeout_seconds + 30.0))
            for event in self._watch:
                if event.get("type") == "ERROR":
                    # An ERROR event (410 Expired and others) means: list again.
                    raise ApiError(action, 410, "Expired", "the watch ended with an ERROR event")
                yield event
        except ApiStatusError as exc:
            raise _api_error(action, exc) from exc
        except _CONNECTION_ERRORS as exc:
            raise ApiError(action, 0, type(exc).__name__, str(exc)) from exc
        finally:
            self._watch = None

    def stop_watch(self) -> None:
        """Make a running `watch_slices` return promptly (closes its connection)."""
        watch = self._watch
        if watch is not None:
            watch.close()

    def get_slice(self, name: str) -> JSON | None:
        """The slice called `name`, or None when it does not exist."""
        try:
            return self._call(f"get ResourceSlice {name}", "GET", f"{SLICES}/{quote(name)}")
        except ApiError as err:
            if err.kind == "not_found":
                return None
            raise

    def create(self, body: JSON, known: Known | None = None) -> JSON:
        """Create a slice; returns the object as stored (devices equal to a `known`
        spec of the same name are that very object, see `_call`)."""
        name = body["metadata"].get("name") or body["metadata"].get("generateName", "") + "*"
        return self._call(f"create ResourceSlice {name}", "POST", SLICES, body=body, known=known)

    def replace(self, body: JSON, known: Known | None = None) -> JSON:
        """Update a slice (resourceVersion in the body guards against lost updates);
        returns the object as stored, sharing `known` devices like `create`."""
        name = body["metadata"]["name"]
        return self._call(f"update ResourceSlice {name}", "PUT", f"{SLICES}/{quote(name)}",
                          body=body, known=known)

    def delete(self, name: str, uid: str | None, resource_version: str | None) -> None:
        """Delete a slice, only if it is still the object we saw (uid + resourceVersion)."""
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version))
                         if v}
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions}
        self._call(f"delete ResourceSlice {name}", "DELETE", f"{SLICES}/{quote(name)}",
                   body=body)

    def node_uid(self) -> str:
        """The UID of our Node (ApiError kind "not_found" while it does not exist)."""
        node = self._call(f"get Node {self.node}", "GET", f"/api/v1/nodes/{quote(self.node)}")
        return str(node["metadata"]["uid"])

    def server_version(self) -> str:
        """The API server's release, as its /version `gitVersion` ("v1.34.4")."""
        if self.version_source is not None:
            return self.version_source()
        version = self._call("get /version", "GET", "/version")
        return str(version.get("gitVersion", ""))

    def _call(self, action: str, method: str, path: str, *, query: dict[str, str] | None = None,
              body: JSON | None = None, known: Known | None = None) -> JSON:
        """One call, its answer decoded. With `known` (device name -> spec), each
        decoded device entry equal to the known spec is replaced by it while decoding:
        the answer to a write of 128 devices then costs no second copy of them, not
        even for a moment (a moment is enough to leave the heap fragmented)."""
        hook = _sharing_hook(known) if known else None
        try:
            answer: JSON = self._client.request(method, path, query=query, body=body,
                                                timeout=_WRITE_TIMEOUT, object_hook=hook)
            return answer
        except ApiStatusError as exc:
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


_CONNECTION_ERRORS = (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)


def _api_error(action: str, exc: ApiStatusError) -> ApiError:
    status, reason, message = exc.parts()
    return ApiError(action, status, reason, message, exc.retry_after)
