"""Connecting to the API server with the official kubernetes client, and what its
failures say in one line."""

from __future__ import annotations

import json

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from driver.textlimits import one_line


def load_api_client(kubeconfig: str | None) -> client.ApiClient:
    """An ApiClient from a kubeconfig file, or from the pod's service account when None."""
    if kubeconfig:
        return config.new_client_from_config(config_file=kubeconfig)
    configuration = client.Configuration()
    config.load_incluster_config(client_configuration=configuration)
    return client.ApiClient(configuration)


def api_exception_parts(exc: ApiException) -> tuple[int, str, str]:
    """(HTTP status, reason, message) of a failed call, bounded and one line each.

    The reason is the Status object's (`NotFound`, `AlreadyExists`) when the body is one,
    else the HTTP reason phrase; the message is the Status message, else the body.
    `str(exc)` is never used: it carries the response headers and the whole body.
    """
    reason, message = str(exc.reason or ""), ""
    body: object = exc.body
    if isinstance(body, bytes):
        body = body.decode(errors="replace")
    try:
        status = json.loads(str(body or "{}"))
        if not isinstance(status, dict):
            raise ValueError("not a Status object")
        reason = str(status.get("reason") or reason)
        message = str(status.get("message") or "")
    except ValueError:
        message = str(body or "")
    return int(exc.status or 0), one_line(reason), one_line(message)


def api_exception_text(exc: ApiException) -> str:
    """`<status> <reason>: <message>` of a failed call, in one bounded line."""
    status, reason, message = api_exception_parts(exc)
    text = f"{status or 'no response'} {reason}".rstrip()
    return f"{text}: {message}" if message else text
