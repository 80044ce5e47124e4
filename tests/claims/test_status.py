"""Claim status.devices: the pure computation, and the writer against the API stand-in."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from simdra._driver.claims.plan.allocation import parse_claim
from simdra._driver.claims.plan.prepared import plan_prepare
from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.claims.source import ApiClaimSource
from simdra._driver.claims.status.worker import BackgroundStatusWriter
from simdra._driver.claims.status.writer import (
    DATA_LIMIT_BYTES,
    ClaimStatusWriter,
    network_data,
    status_data,
    updated_status_devices,
)
from simdra._driver.testing.apiserver import APIServer
from tests.claims.builders import RULES

from .builders import DRIVER, OTHER_DRIVER, ProfileCluster, request, wants

NOW = "2026-07-01T10:00:00Z"
LATER = "2026-07-01T11:00:00Z"
OTHER_ENTRY = {
    "driver": OTHER_DRIVER,
    "pool": "node-a",
    "device": "fpga-0",
    "conditions": [
        {
            "type": "Ready",
            "status": "False",
            "reason": "Booting",
            "message": "",
            "lastTransitionTime": NOW,
        }
    ],
}


def _prepared(cluster, ref):
    raw = cluster.allocated[ref.uid]
    return plan_prepare(parse_claim(raw, DRIVER, ref), cluster.inventory, DRIVER, rules=RULES)


@pytest.fixture
def cluster():
    return ProfileCluster("gpu,nic")


def _gpu_and_nic_claim(cluster):
    return cluster.allocate(
        "train", request("gpu", "gpu"), wants("net", "nic", bandwidth="2G"), namespace="ml"
    )


def test_our_entries_are_added_next_to_other_drivers_entries(cluster):
    prepared = _prepared(cluster, _gpu_and_nic_claim(cluster))
    devices = updated_status_devices([OTHER_ENTRY], DRIVER, prepared, now=NOW, generation=3)
    assert devices[0] == OTHER_ENTRY
    gpu, nic = devices[1:]
    share = prepared.units[1].share_id
    assert (gpu["driver"], gpu["pool"], gpu["device"], "shareID" in gpu) == (
        DRIVER,
        "node-a",
        "gpu-0",
        False,
    )
    assert (nic["device"], nic["shareID"]) == ("nic-0", share)
    (ready,) = gpu["conditions"]
    assert ready == {
        "type": "Ready",
        "status": "True",
        "reason": "Prepared",
        "message": f"prepared on the node as CDI device {prepared.units[0].cdi_id}",
        "lastTransitionTime": NOW,
        "observedGeneration": 3,
    }
    assert gpu["data"]["attributes"]["uuid"].startswith("GPU-")
    assert gpu["data"]["attributes"]["model"] == "Simulated GPU S1"
    assert gpu["data"]["requests"] == ["gpu"] and "networkData" not in gpu
    assert nic["data"]["consumedCapacity"] == {"bandwidth": "2G"}
    mac = cluster.inventory.device("node-a", "nic-0").attribute("macAddress")
    # The simulated NIC has no addresses: no `ips`.
    assert nic["networkData"] == {"interfaceName": "sim0", "hardwareAddress": mac}


def test_recomputing_keeps_the_transition_time_and_unprepare_removes_only_ours(cluster):
    prepared = _prepared(cluster, _gpu_and_nic_claim(cluster))
    first = updated_status_devices([OTHER_ENTRY], DRIVER, prepared, now=NOW)
    again = updated_status_devices(first, DRIVER, prepared, now=LATER)
    assert again == first  # nothing to write when nothing changed
    assert updated_status_devices(again, DRIVER, None, now=LATER) == [OTHER_ENTRY]
    assert updated_status_devices(None, DRIVER, None, now=LATER) == []


def test_data_stays_under_the_api_limit(cluster):
    unit = _prepared(cluster, _gpu_and_nic_claim(cluster)).units[0]
    huge = replace(unit, config={"kind": "GpuConfig", "note": "x" * DATA_LIMIT_BYTES})
    data = status_data(huge)
    assert len(json.dumps(data, separators=(",", ":"))) <= DATA_LIMIT_BYTES
    assert "config" not in data and data["cdiDeviceID"] == unit.cdi_id


def test_ips_attribute_becomes_network_data_when_valid(cluster):
    nic = _prepared(cluster, _gpu_and_nic_claim(cluster)).units[1]
    attributes = dict(nic.attributes)
    attributes["ips"] = {"string": "10.0.0.5/24, not-an-ip, 10.0.0.5/24,fd00::5/64,10.0.0.6"}
    assert network_data(replace(nic, attributes=attributes))["ips"] == [
        "10.0.0.5/24",
        "fd00::5/64",
    ]


@pytest.fixture
def server():
    with APIServer() as api:
        yield api


def _node(server, cluster, tmp_path):
    """A preparer reading claims from the API stand-in and writing their status."""
    api_client = server.rest_client()
    # As the plugin wires it: writes on a background thread, retried quickly here.
    writer = BackgroundStatusWriter(
        ClaimStatusWriter(api_client, DRIVER, clock=lambda: NOW), retry_seconds=0.05
    )
    preparer = Preparer(
        DRIVER,
        ApiClaimSource(api_client),
        lambda: cluster.inventory,
        tmp_path / "cdi",
        tmp_path / "data",
        status_writer=writer,
     rules=RULES)
    return preparer, writer, api_client


def _publish(server, cluster, ref):
    raw = json.loads(json.dumps(cluster.allocated[ref.uid]))
    # The API accepts status entries only for allocated devices, so the other driver's
    # entry needs a result of its own.
    raw["status"]["allocation"]["devices"]["results"].append(
        {"request": "fpga", "driver": OTHER_DRIVER, "pool": "node-a", "device": "fpga-0"}
    )
    raw["status"]["devices"] = [OTHER_ENTRY]
    server.put_object("resourceclaims", raw)


def _status_devices(server, ref):
    claim = server.get_object("resourceclaims", ref.name, ref.namespace)
    return (claim.get("status") or {}).get("devices") or []


def test_prepare_writes_status_and_unprepare_removes_it(server, cluster, tmp_path):
    ref = _gpu_and_nic_claim(cluster)
    _publish(server, cluster, ref)
    preparer, writer, api_client = _node(server, cluster, tmp_path)
    with api_client:
        try:
            answer = preparer.prepare([ref])[ref.uid]
            assert answer.error == ""
            assert writer.flush(5)
            devices = _status_devices(server, ref)
            assert devices[0] == OTHER_ENTRY
            assert [(d["device"], d.get("shareID")) for d in devices[1:]] == [
                (d.device_name, d.share_id) for d in answer.devices
            ]
            writes = server.writes("resourceclaims/status")
            preparer.prepare([ref])  # already prepared: same status, no write
            assert writer.flush(5)
            assert server.writes("resourceclaims/status") == writes
            assert preparer.unprepare([ref])[ref.uid].error == ""
            assert writer.flush(5)
            assert _status_devices(server, ref) == [OTHER_ENTRY]
            assert writer.pending == []
        finally:
            writer.stop()


def test_status_write_failure_never_fails_prepare_and_is_retried(server, cluster, tmp_path):
    ref = _gpu_and_nic_claim(cluster)
    _publish(server, cluster, ref)
    later = cluster.allocate("later", wants("net", "nic", bandwidth="1G"))
    _publish(server, cluster, later)
    preparer, writer, api_client = _node(server, cluster, tmp_path)
    with api_client:
        try:
            server.inject_failure("patch", "resourceclaims/status", 500, count=2)
            assert preparer.prepare([ref])[ref.uid].error == ""
            assert preparer.prepare([later])[later.uid].error == ""
            assert writer.flush(5)  # both written once the API answers again
            assert server.request_log.count("patch", "resourceclaims/status") >= 4
            assert writer.pending == []
            assert len(_status_devices(server, ref)) == 3
            assert len(_status_devices(server, later)) == 2
            server.inject_failure("patch", "resourceclaims/status", 500, count=1)
            assert preparer.unprepare([ref])[ref.uid].error == ""
            assert writer.flush(5)
            assert _status_devices(server, ref) == [OTHER_ENTRY]
        finally:
            writer.stop()


def test_a_conflicting_write_is_retried_on_the_fresh_object(server, cluster, tmp_path):
    ref = _gpu_and_nic_claim(cluster)
    _publish(server, cluster, ref)
    preparer, writer, api_client = _node(server, cluster, tmp_path)
    with api_client:
        try:
            server.inject_failure("patch", "resourceclaims/status", 409, count=2)
            assert preparer.prepare([ref])[ref.uid].error == ""
            assert writer.flush(5)
            assert writer.pending == []
            assert len(_status_devices(server, ref)) == 3
        finally:
            writer.stop()


def _apply_other(api_client, ref, entries, force=False):
    """The other driver writing its own entries by server-side apply."""
    config = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
              "metadata": {"name": ref.name, "namespace": ref.namespace}}
    if entries:
        config["status"] = {"devices": entries}
    api_client.request(
        "PATCH", f"/apis/resource.k8s.io/v1/namespaces/{ref.namespace}/resourceclaims/"
        f"{ref.name}/status", query={"fieldManager": OTHER_DRIVER, "force": force},
        body=config, content_type="application/apply-patch+yaml")


def _owned_devices(server, ref, manager):
    claim = server.get_object("resourceclaims", ref.name, ref.namespace)
    for entry in claim["metadata"].get("managedFields") or []:
        if entry["manager"] == manager:
            return sorted(json.loads(k[2:])["device"]
                          for k in entry["fieldsV1"]["f:status"]["f:devices"])
    return []


def test_each_driver_owns_its_entries_and_neither_clobbers_the_other(server, cluster, tmp_path):
    ref = _gpu_and_nic_claim(cluster)
    _publish(server, cluster, ref)
    preparer, writer, api_client = _node(server, cluster, tmp_path)
    with api_client:
        try:
            _apply_other(api_client, ref, [OTHER_ENTRY], force=True)
            assert preparer.prepare([ref])[ref.uid].error == ""
            assert writer.flush(5)
            assert _owned_devices(server, ref, DRIVER) == ["gpu-0", "nic-0"]
            assert _owned_devices(server, ref, OTHER_DRIVER) == ["fpga-0"]
            # The other driver changes and then drops its entry, by apply, without force:
            # no conflict with us, and ours stay as they are.
            ours = _status_devices(server, ref)[1:]
            ready = {**OTHER_ENTRY["conditions"][0], "status": "True", "reason": "Booted"}
            _apply_other(api_client, ref, [{**OTHER_ENTRY, "conditions": [ready]}])
            assert _status_devices(server, ref)[0]["conditions"] == [ready]
            _apply_other(api_client, ref, [])
            assert _status_devices(server, ref) == ours
            assert preparer.unprepare([ref])[ref.uid].error == ""
            assert writer.flush(5)
            assert _status_devices(server, ref) == []
        finally:
            writer.stop()


def test_our_entries_written_before_apply_are_removed_and_others_kept(server, cluster):
    ref = _gpu_and_nic_claim(cluster)
    _publish(server, cluster, ref)
    prepared = _prepared(cluster, ref)
    # What a merge-patch writer (simdra before apply) left: our entries, owned by nobody.
    raw = server.get_object("resourceclaims", ref.name, ref.namespace)
    raw["status"]["devices"] = updated_status_devices([OTHER_ENTRY], DRIVER, prepared, now=NOW)
    server.put_object("resourceclaims", raw)
    with server.rest_client() as api_client:
        writer = ClaimStatusWriter(api_client, DRIVER, clock=lambda: NOW)
        assert writer.sync(ref, replace(prepared, units=prepared.units[:1])) is True
        assert [e["device"] for e in _status_devices(server, ref)] == ["fpga-0", "gpu-0"]
        assert writer.sync(ref, None) is True
    assert _status_devices(server, ref) == [OTHER_ENTRY]
