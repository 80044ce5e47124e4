"""Fixtures for the API stand-in tests: a running server and official clients for it."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from simdra._driver.testing.apiserver import APIServer
from simdra._driver.testing.kubeconfig import client_from_kubeconfig

DRIVER = "gpu.example.com"
NODE = "node-1"


@pytest.fixture
def server() -> Iterator[APIServer]:
    """A started API server, stopped after the test."""
    with APIServer() as srv:
        yield srv


@pytest.fixture
def api_client(server: APIServer, tmp_path) -> Iterator[client.ApiClient]:
    """An official client built from a generated kubeconfig, as a driver would build it."""
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    api = client_from_kubeconfig(kubeconfig)
    yield api
    api.close()


@pytest.fixture
def resource_api(api_client: client.ApiClient) -> client.ResourceV1Api:
    return client.ResourceV1Api(api_client)


@pytest.fixture
def core_api(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


def device(name: str, **extra: Any) -> dict[str, Any]:
    """A simple valid device."""
    return {
        "name": name,
        "attributes": {"model": {"string": "sim-a100"}, "index": {"int": 0}},
        "capacity": {"memory": {"value": "80Gi"}},
        **extra,
    }


def slice_body(
    devices: list[dict[str, Any]] | None = None,
    node: str = NODE,
    pool: str = NODE,
    driver: str = DRIVER,
    generation: int = 0,
    name: str | None = None,
) -> dict[str, Any]:
    """A ResourceSlice body as a publisher sends it (generateName unless a name is given)."""
    meta = {"name": name} if name else {"generateName": f"{node}-{driver}-"}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": meta,
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
            "devices": devices if devices is not None else [device("gpu-0")],
        },
    }


def claim_body(name: str = "claim-1", namespace: str = "default") -> dict[str, Any]:
    """A ResourceClaim asking for one device of class gpu.example.com."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]
            }
        },
    }


@pytest.fixture
def make_device() -> Callable[..., dict[str, Any]]:
    """Builder of simple valid devices: make_device("gpu-0", taints=[...])."""
    return device


@pytest.fixture
def make_slice() -> Callable[..., dict[str, Any]]:
    """Builder of ResourceSlice bodies: make_slice(devices=[...], node=..., pool=...)."""
    return slice_body


@pytest.fixture
def make_claim() -> Callable[..., dict[str, Any]]:
    """Builder of ResourceClaim bodies: make_claim("name", "namespace")."""
    return claim_body


RawCall = Callable[..., tuple[int, dict[str, Any], dict[str, str]]]


@pytest.fixture
def raw(server: APIServer) -> RawCall:
    """Plain HTTP calls that bypass the client's own model checks: (status, JSON, headers)."""

    def call(
        method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {"Content-Type": content_type} if data is not None else {}
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            payload = response.read()
            return response.status, json.loads(payload or b"{}"), dict(response.getheaders())
        finally:
            conn.close()

    return call
