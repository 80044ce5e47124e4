"""The node side of claims on fleet nodes: status.devices written once a claim is
reserved for a pod, the node's ledger kept, both freed when no pod uses it."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from simdra._driver.fleet.run import Fleet
from simdra._driver.testing.allocation.builders import claim, exactly
from simdra._driver.testing.apiserver import APIServer
from simdra._driver.testing.cluster import wait_until
from simdra._driver.testing.kind_classes import create_device_classes
from simdra._driver.testing.scheduler import Allocator

from .conftest import DRIVER, StartFleet

NODE = "simdra-fleet-0000"


def _setup(server: APIServer, start_fleet: StartFleet, **fields: Any) -> tuple[Fleet, Allocator]:
    fleet = start_fleet(nodes=1, mix="gpu8-nic2:100", **fields)
    fleet.start_background()
    api = server.api_client()
    create_device_classes(server, client.ResourceV1Api(api), DRIVER)
    return fleet, Allocator(api, node_name=NODE)


def _ours(server: APIServer, name: str) -> list[dict[str, Any]]:
    stored = server.get_object("resourceclaims", name, "default") or {}
    return [d for d in (stored.get("status") or {}).get("devices") or []
            if d["driver"] == DRIVER]


def test_a_claim_reserved_for_a_pod_gets_its_status_and_loses_it_when_freed(
        server: APIServer, start_fleet: StartFleet) -> None:
    fleet, allocator = _setup(server, start_fleet)
    server.put_object("resourceclaims", claim("c1", exactly("gpu", f"gpu.{DRIVER}", count=2)))
    allocator.allocate("default", "c1")  # allocated, no pod yet: nothing to prepare
    server.put_object("resourceclaims", claim("c2", exactly("nic", f"nic.{DRIVER}")))
    allocator.allocate("default", "c2", pod_name="p2", pod_uid="u2")
    allocator.allocate("default", "c1", pod_name="p1", pod_uid="u1")
    entries = wait_until(lambda: len(_ours(server, "c1")) == 2 and _ours(server, "c1"))
    assert {e["pool"] for e in entries} == {NODE}
    assert all(e["conditions"][0]["type"] == "Ready" for e in entries)
    (nic,) = wait_until(lambda: _ours(server, "c2"))
    assert "shareID" in nic  # a NIC is shared: its entry names the share
    ledger = wait_until(lambda: fleet.claims.ledger(NODE))
    wait_until(lambda: len(ledger.devices_in_use()) == 3)  # status goes first, then this
    _pod_gone(server, "c1")
    wait_until(lambda: _ours(server, "c1") == [])
    wait_until(lambda: len(ledger.devices_in_use()) == 1)
    assert fleet.metrics.prepared._value.get() == 2
    assert fleet.metrics.unprepared._value.get() == 1


def _pod_gone(server: APIServer, name: str) -> None:
    """What the resource claim controller does when the claim's pod is gone: no longer
    reserved for it (still allocated)."""
    path = f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{name}/status"
    rest = server.rest_client()
    stored = rest.request("GET", path.removesuffix("/status"))
    stored["status"].pop("reservedFor")
    rest.request("PUT", path, body=stored)
    rest.close()


def test_status_is_written_after_a_throttled_api_server_lets_it(
        server: APIServer, start_fleet: StartFleet) -> None:
    _fleet, allocator = _setup(server, start_fleet)
    server.put_object("resourceclaims", claim("c1", exactly("gpu", f"gpu.{DRIVER}")))
    server.inject_failure("patch", "resourceclaims/status", 429, count=3, retry_after=0)
    allocator.allocate("default", "c1", pod_name="p1", pod_uid="u1")
    wait_until(lambda: _ours(server, "c1"))
    assert server.faults.pending() == 0


def test_claims_on_other_nodes_are_left_alone(server: APIServer,
                                              start_fleet: StartFleet) -> None:
    _fleet, allocator = _setup(server, start_fleet)
    server.put_object("nodes", {"metadata": {"name": "real-node"}})
    server.put_object("resourceclaims", claim("c1", exactly("gpu", f"gpu.{DRIVER}")))
    server.put_object("resourceclaims", claim("c2", exactly("gpu", f"gpu.{DRIVER}")))
    allocator.allocate("default", "c2", pod_name="p2", pod_uid="u2")  # on the fleet node
    wait_until(lambda: _ours(server, "c2"))
    assert _ours(server, "c1") == []


def test_a_restarted_fleet_takes_its_claims_back_without_rewriting_them(
        server: APIServer, start_fleet: StartFleet) -> None:
    fleet, allocator = _setup(server, start_fleet)
    server.put_object("resourceclaims", claim("c1", exactly("gpu", f"gpu.{DRIVER}")))
    allocator.allocate("default", "c1", pod_name="p1", pod_uid="u1")
    before = wait_until(lambda: _ours(server, "c1"))
    fleet.stop()
    status_writes = server.request_log.count("patch", "resourceclaims/status")
    again = start_fleet(nodes=1, mix="gpu8-nic2:100")
    again.start_background()
    ledger = wait_until(lambda: again.claims.ledger(NODE))
    wait_until(lambda: len(ledger.devices_in_use()) == 1)  # the claim is in it again
    assert server.request_log.count("patch", "resourceclaims/status") == status_writes
    assert _ours(server, "c1") == before
