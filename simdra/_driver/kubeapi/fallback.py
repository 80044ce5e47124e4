"""Kubeconfig credentials we do not implement (exec plugins, auth-provider,
username/password), through the official client's configuration loader.

Imported only for such a kubeconfig: then the official client's import cost is paid,
and its Configuration supplies the server, TLS files and the Authorization header,
refreshed (its refresh hook, e.g. an exec plugin run again when the token expired)
before every request.
"""

from __future__ import annotations

import threading
from typing import Any

from simdra._driver.kubeapi.access import ClusterAccess
from simdra._driver.kubeapi.errors import ClusterConfigError


class ConfigurationCredentials:
    """The Authorization header of an official client Configuration, refreshed first."""

    def __init__(self, configuration: Any) -> None:
        self._configuration = configuration
        self._lock = threading.Lock()  # one refresh (one exec plugin run) at a time

    def headers(self) -> dict[str, str]:
        """The headers the official client would send now."""
        configuration = self._configuration
        with self._lock:
            if configuration.refresh_api_key_hook is not None:
                configuration.refresh_api_key_hook(configuration)
            settings = configuration.auth_settings().values()
        return {str(s["key"]).title(): str(s["value"]) for s in settings
                if s["in"] == "header" and s["value"]}


def official_access(path: str, where: str) -> ClusterAccess:
    """The ClusterAccess the official loader makes of the kubeconfig at `path`."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    try:
        # From the file (not a parsed dict): relative paths are relative to its directory.
        config.load_kube_config(config_file=path, client_configuration=configuration)
    except (ConfigException, ValueError, TypeError, KeyError, AttributeError, OSError) as err:
        lines = str(err).strip().splitlines()
        raise ClusterConfigError(f"{where}: not a usable kubeconfig: "
                                 f"{lines[0] if lines else type(err).__name__}") from None
    return ClusterAccess(
        server=str(configuration.host),
        ca_file=configuration.ssl_ca_cert,
        cert_file=configuration.cert_file,
        key_file=configuration.key_file,
        insecure=not configuration.verify_ssl,
        tls_server_name=getattr(configuration, "tls_server_name", None),
        credentials=ConfigurationCredentials(configuration),
    )
