"""What a failed API call says, in one bounded line each: the HTTP status, the Status
object's reason and message."""

from __future__ import annotations

import json
from collections.abc import Mapping

from simdra._driver.core.textlimits import one_line


class ClusterConfigError(Exception):
    """No usable cluster configuration; the message is one line naming the flag."""


class ApiStatusError(Exception):
    """The API server answered with a status outside 2xx.

    `reason` is the HTTP reason phrase and `body` the raw answer (a Status object,
    usually); `parts()` reads them. `retry_after` is the Retry-After header in
    seconds, when the server sent a number.
    """

    def __init__(self, status: int, reason: str, body: bytes,
                 headers: Mapping[str, str] | None = None) -> None:
        self.status = status
        self.reason = reason
        self.body = body
        self.retry_after = _seconds((headers or {}).get("Retry-After"))
        super().__init__(status_text(*self.parts()))

    def parts(self) -> tuple[int, str, str]:
        """(HTTP status, reason, message), as `status_parts` says."""
        return status_parts(self.status, self.reason, self.body)


def status_parts(status: int, reason: str, body: object) -> tuple[int, str, str]:
    """(HTTP status, reason, message) of an error answer, bounded and one line each.

    The reason is the Status object's (`NotFound`, `AlreadyExists`) when the body is one,
    else the HTTP reason phrase; the message is the Status message, else the body.
    """
    message = ""
    if isinstance(body, bytes):
        body = body.decode(errors="replace")
    try:
        decoded = json.loads(str(body or "{}"))
        if not isinstance(decoded, dict):
            raise ValueError("not a Status object")
        reason = str(decoded.get("reason") or reason)
        message = str(decoded.get("message") or "")
    except ValueError:
        message = str(body or "")
    return status, one_line(reason), one_line(message)


def status_text(status: int, reason: str, message: str) -> str:
    """`<status> <reason>: <message>` from `status_parts`, in one line."""
    text = f"{status or 'no response'} {reason}".rstrip()
    return f"{text}: {message}" if message else text


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
