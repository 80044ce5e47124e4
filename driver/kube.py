"""Connecting to the API server with the official kubernetes client, and what its
failures say in one line."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from driver.core.textlimits import one_line


class ClusterConfigError(Exception):
    """No usable cluster configuration; the message is one line naming the flag."""


def load_api_client(kubeconfig: str | None) -> client.ApiClient:
    """An ApiClient from a kubeconfig file, or from the pod's service account when None.

    Raises ClusterConfigError when neither works. The client's own (urllib3) retries are
    off: every caller retries with its own backoff and logs each attempt once, and a
    second retry layer underneath would multiply the attempts and the log lines.
    """
    configuration = client.Configuration()
    if kubeconfig:
        _load_kubeconfig(kubeconfig, configuration)
    else:
        try:
            config.load_incluster_config(client_configuration=configuration)
        except ConfigException as err:
            raise ClusterConfigError(
                "no cluster configuration: not running in a pod with a service account "
                f"({err}) and no --kubeconfig (env KUBECONFIG) given") from None
    configuration.retries = False
    return client.ApiClient(configuration)


def _load_kubeconfig(path: str, configuration: client.Configuration) -> None:
    where = f"--kubeconfig={path!r}"
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else err
        raise ClusterConfigError(f"{where}: cannot read: {reason}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ClusterConfigError(f"{where}: not valid YAML: {_first_line(err)}") from None
    if not isinstance(document, dict):
        raise ClusterConfigError(f"{where}: not a kubeconfig (no mapping at the top)")
    try:
        # From the file (not the parsed dict): relative certificate paths are relative
        # to the file's directory.
        config.load_kube_config(config_file=path, client_configuration=configuration)
    except (ConfigException, ValueError, TypeError, KeyError, AttributeError) as err:
        raise ClusterConfigError(f"{where}: not a usable kubeconfig: {_first_line(err)}") \
            from None


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


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
