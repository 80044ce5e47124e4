"""API errors as the kube-apiserver writes them: `kind: Status` bodies with a reason and code.

The official client raises `ApiException` with `.status` = the HTTP code and `.body` = this
JSON, so callers that branch on 404/409/422/429 behave as they would against a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only its fields are read; importing it here would be circular
    from simdra._driver.testing.apiserver.validation.field import FieldError

JSON = dict[str, Any]


class APIError(Exception):
    """A failed request: HTTP code, Status reason, message, optional details and headers."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.details = dict(details or {})
        self.headers = dict(headers or {})

    def status(self) -> JSON:
        """The `Status` object the API server sends for this error."""
        body: JSON = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _details(group: str, kind: str, name: str) -> JSON:
    details: JSON = {"name": name, "kind": kind}
    if group:
        details["group"] = group
    return details


def not_found(qualified: str, group: str, plural: str, name: str) -> APIError:
    """404 for a named object that does not exist."""
    return APIError(
        404, "NotFound", f'{qualified} "{name}" not found', _details(group, plural, name)
    )


def already_exists(qualified: str, group: str, plural: str, name: str) -> APIError:
    """409 for a create whose name is taken."""
    return APIError(
        409, "AlreadyExists", f'{qualified} "{name}" already exists', _details(group, plural, name)
    )


def conflict(qualified: str, group: str, plural: str, name: str, detail: str) -> APIError:
    """409 for a failed optimistic-concurrency or precondition check."""
    return APIError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified} "{name}": {detail}',
        _details(group, plural, name),
    )


STALE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def invalid(
    group_kind: str, group: str, kind: str, name: str, causes: Iterable[FieldError]
) -> APIError:
    """422 listing every field error as a StatusCause, as the API server does."""
    causes = list(causes)
    texts = [str(c) for c in causes]
    summary = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    details = _details(group, kind, name)
    details["causes"] = [
        {"reason": c.reason, "message": c.message, "field": c.field} for c in causes
    ]
    return APIError(422, "Invalid", f'{group_kind} "{name}" is invalid: {summary}', details)


def bad_request(message: str) -> APIError:
    """400 for a malformed request (bad JSON, bad selector, name mismatch)."""
    return APIError(400, "BadRequest", message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> APIError:
    """405 for a verb the resource does not support."""
    return APIError(405, "MethodNotAllowed", message)


def path_not_found() -> APIError:
    """404 for a URL that names no resource."""
    return APIError(404, "NotFound", "the server could not find the requested resource")


def unsupported_media_type(content_type: str) -> APIError:
    """415 for a patch type or body encoding the server does not take."""
    return APIError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types "
        f"include: application/json-patch+json, application/merge-patch+json, "
        f"application/strategic-merge-patch+json, application/apply-patch+yaml "
        f'(got "{content_type}")',
    )


def expired(message: str) -> APIError:
    """410 Expired: the requested resourceVersion has been compacted away."""
    return APIError(410, "Expired", message)


def too_large_resource_version(requested: int, current: int) -> APIError:
    """504 Timeout for a watch from a resourceVersion the server has not reached yet."""
    details = {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    }
    return APIError(
        504, "Timeout", f"Too large resource version: {requested}, current: {current}", details
    )


def internal(message: str) -> APIError:
    """500 InternalError."""
    return APIError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        {"causes": [{"message": message}]},
    )


def injected(code: int, retry_after: int | None) -> APIError:
    """The error a test asked for, with the body a real server sends for that code."""
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    details: JSON = {"retryAfterSeconds": retry_after} if retry_after is not None else {}
    known = {
        409: ("Conflict", f"Operation cannot be fulfilled: {STALE}"),
        429: ("TooManyRequests", "Too many requests, please try again later."),
        500: ("InternalError", "Internal error occurred: injected failure"),
        503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
        504: ("Timeout", "the server was unable to return a response in the time allotted"),
    }
    reason, message = known.get(code, ("Unknown", f"injected failure with code {code}"))
    return APIError(code, reason, message, details, headers)


def success(details: Mapping[str, Any] | None = None) -> JSON:
    """A `Status` with `status: Success` (answer to deletes of some resources)."""
    body: JSON = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details:
        body["details"] = dict(details)
    return body
