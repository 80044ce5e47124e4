"""Connecting to the API server with the official kubernetes client."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException


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
