"""Connecting to the API server with the official kubernetes client."""

from __future__ import annotations

from kubernetes import client, config


def load_api_client(kubeconfig: str | None) -> client.ApiClient:
    """An ApiClient from a kubeconfig file, or from the pod's service account when None."""
    if kubeconfig:
        return config.new_client_from_config(config_file=kubeconfig)
    configuration = client.Configuration()
    config.load_incluster_config(client_configuration=configuration)
    return client.ApiClient(configuration)
