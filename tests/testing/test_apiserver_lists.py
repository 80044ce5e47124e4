"""The stand-in's DRAListTypeAttributes gate, as 1.37's strategy applies it: on, a list
attribute is stored as sent; off, the server drops the list and the attribute left
without a value refuses the slice (not a silent drop), unless the stored slice already
uses lists (ratcheting)."""

from __future__ import annotations

import http.client
import json
from typing import Any

from simdra._driver.testing.apiserver import APIServer
from tests.testing.conftest import device, slice_body

SLICES = "/apis/resource.k8s.io/v1/resourceslices"
NUMA = "resource.kubernetes.io/numaNode"


def _spanning_slice(name: str = "lists") -> dict[str, Any]:
    nic = device("nic-0")
    nic["attributes"][NUMA] = {"ints": [2, 3]}
    return slice_body(name=name, devices=[nic])


def test_with_the_gate_on_a_list_is_stored_as_sent(raw):
    code, stored, _ = raw("POST", SLICES, _spanning_slice())

    assert code == 201, stored
    assert stored["spec"]["devices"][0]["attributes"][NUMA] == {"ints": [2, 3]}


def test_with_the_gate_off_the_slice_is_refused_at_the_emptied_attribute():
    with APIServer(feature_gates={"DRAListTypeAttributes": False}) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("POST", SLICES, body=json.dumps(_spanning_slice()).encode(),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        status, body = response.status, json.loads(response.read())
        conn.close()

    assert status == 422
    causes = [c["field"] for c in body["details"]["causes"]]
    assert causes == [f"spec.devices[0].attributes[{NUMA}]"]


def test_a_slice_already_holding_lists_keeps_them_when_the_gate_goes_off(server, raw):
    code, stored, _ = raw("POST", SLICES, _spanning_slice())
    assert code == 201
    server.feature_gates["DRAListTypeAttributes"] = False

    stored["spec"]["pool"]["generation"] = 2
    code, updated, _ = raw("PUT", f"{SLICES}/lists", stored)

    assert code == 200, updated
    assert updated["spec"]["devices"][0]["attributes"][NUMA] == {"ints": [2, 3]}
