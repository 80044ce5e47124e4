"""Our API stand-in and the real kube-apiserver agree on a corpus of valid and invalid
ResourceSlices, ResourceClaims and DeviceClasses: the same accept/reject, and for a
rejection the same field paths. The real server gets every write as a dry run, the
stand-in (a fresh one) for real; both with strict field validation."""

from __future__ import annotations

import copy
import json
import ssl
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from driver.testing.apiserver import APIServer

from .controlplane import ADMIN_TOKEN, ControlPlane

JSON = dict[str, Any]
PATHS = {
    "ResourceSlice": "/apis/resource.k8s.io/v1/resourceslices",
    "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
    "ResourceClaim": "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims",
}


def _slice(**spec: Any) -> JSON:
    base: JSON = {
        "driver": "dra.example.com", "nodeName": "e2e-gpu",
        "pool": {"name": "pool-a", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0", "attributes": {"type": {"string": "gpu"}},
                     "capacity": {"memory": {"value": "80Gi"}}}],
    }
    base.update(spec)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": "s"}, "spec": base}


def _device(**fields: Any) -> JSON:
    device: JSON = {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}}
    device.update(fields)
    return device


def _class(expression: str = 'device.driver == "dra.example.com"', name: str = "c") -> JSON:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]}}


def _claim(*requests: JSON) -> JSON:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {"devices": {"requests": list(requests) or [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.dra.example.com"}}]}}}


def _request(name: str = "gpu", **exactly: Any) -> JSON:
    return {"name": name, "exactly": {"deviceClassName": "gpu.dra.example.com", **exactly}}


def _shared_nic(policy: JSON) -> JSON:
    return _device(name="nic-0", allowMultipleAllocations=True,
                   capacity={"bandwidth": {"value": "10G", "requestPolicy": policy}})


CORPUS: dict[str, Callable[[], JSON]] = {
    "slice: valid": lambda: _slice(),
    "slice: device name not a DNS label": lambda: _slice(devices=[_device(name="GPU_0")]),
    "slice: no driver": lambda: _slice(driver=""),
    "slice: bad driver name": lambda: _slice(driver="Not A Domain"),
    "slice: bad pool name": lambda: _slice(
        pool={"name": "Pool!", "generation": 1, "resourceSliceCount": 1}),
    "slice: zero resourceSliceCount": lambda: _slice(
        pool={"name": "p", "generation": 1, "resourceSliceCount": 0}),
    "slice: negative generation": lambda: _slice(
        pool={"name": "p", "generation": -1, "resourceSliceCount": 1}),
    "slice: nodeName and allNodes": lambda: _slice(allNodes=True),
    "slice: no node selection": lambda: _slice(nodeName=None),
    "slice: duplicate device names": lambda: _slice(devices=[_device(), _device()]),
    "slice: 129 devices": lambda: _slice(
        devices=[_device(name=f"d-{i}") for i in range(129)]),
    "slice: attribute with two values": lambda: _slice(devices=[_device(
        attributes={"type": {"string": "gpu", "int": 1}})]),
    "slice: attribute with no value": lambda: _slice(devices=[_device(attributes={"x": {}})]),
    "slice: bad version attribute": lambda: _slice(devices=[_device(
        attributes={"v": {"version": "1.0"}})]),
    "slice: bad attribute name": lambda: _slice(devices=[_device(
        attributes={"bad name": {"string": "x"}})]),
    "slice: string attribute too long": lambda: _slice(devices=[_device(
        attributes={"s": {"string": "x" * 65}})]),
    "slice: taint with bad effect": lambda: _slice(devices=[_device(
        taints=[{"key": "k", "value": "v", "effect": "Sometimes"}])]),
    "slice: valid taint": lambda: _slice(devices=[_device(
        taints=[{"key": "dra.example.com/unhealthy", "value": "true",
                 "effect": "NoSchedule"}])]),
    "slice: shared device valid policy": lambda: _slice(devices=[_shared_nic(
        {"default": "1M", "validRange": {"min": "1M", "step": "8"}})]),
    "slice: policy default below min": lambda: _slice(devices=[_shared_nic(
        {"default": "1k", "validRange": {"min": "1M", "step": "8"}})]),
    "slice: policy with range and values": lambda: _slice(devices=[_shared_nic(
        {"default": "1M", "validRange": {"min": "1M"}, "validValues": ["1M"]})]),
    "slice: counters and devices together": lambda: _slice(sharedCounters=[
        {"name": "cs", "counters": {"memory": {"value": "1Gi"}}}]),
    "slice: counters only": lambda: _slice(devices=None, sharedCounters=[
        {"name": "cs", "counters": {"memory": {"value": "1Gi"}}}]),
    "slice: unknown field": lambda: _slice(colour="blue"),
    "class: valid": lambda: _class(),
    "class: CEL syntax error": lambda: _class("device.driver =="),
    "class: CEL unknown field": lambda: _class("device.colour == 1"),
    "class: CEL not boolean": lambda: _class('device.driver'),
    "class: bad name": lambda: _class(name="Bad_Name"),
    "claim: valid": lambda: _claim(),
    "claim: bad request name": lambda: _claim(_request(name="GPU!")),
    "claim: zero count": lambda: _claim(_request(count=0)),
    "claim: unknown allocation mode": lambda: _claim(_request(allocationMode="Some")),
    "claim: count with mode All": lambda: _claim(_request(allocationMode="All", count=2)),
    "claim: bad CEL selector": lambda: _claim(_request(selectors=[{"cel": {
        "expression": "device.driver ==="}}])),
    "claim: duplicate request names": lambda: _claim(_request(), _request()),
    "claim: no class name": lambda: _claim({"name": "gpu", "exactly": {}}),
    "claim: capacity request": lambda: _claim(_request(capacity={
        "requests": {"bandwidth": "1G"}})),
    "claim: bad capacity quantity": lambda: _claim(_request(capacity={
        "requests": {"bandwidth": "lots"}})),
    "claim: firstAvailable": lambda: _claim({"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu.dra.example.com"},
        {"name": "small", "deviceClassName": "gpu.dra.example.com"}]}),
    "claim: exactly and firstAvailable": lambda: _claim({
        "name": "gpu", "exactly": {"deviceClassName": "gpu.dra.example.com"},
        "firstAvailable": [{"name": "a", "deviceClassName": "gpu.dra.example.com"}]}),
}


@dataclass(frozen=True)
class Server:
    """Where to POST, and how to authenticate (plain HTTP for the stand-in)."""

    url: str
    token: str | None = None
    ca: str | None = None

    def verdict(self, obj: JSON, dry_run: bool) -> tuple[int, set[str]]:
        """(HTTP status, the rejected field paths) for creating `obj`."""
        body = copy.deepcopy(obj)
        body["spec"] = {k: v for k, v in body["spec"].items() if v is not None}
        query = "fieldValidation=Strict" + ("&dryRun=All" if dry_run else "")
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(f"{self.url}{PATHS[obj['kind']]}?{query}",
                                         data=json.dumps(body).encode(), headers=headers,
                                         method="POST")
        context = ssl.create_default_context(cafile=self.ca) if self.ca else None
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as response:
                return int(response.status), set()
        except urllib.error.HTTPError as err:
            status = json.loads(err.read() or b"{}")
            causes = (status.get("details") or {}).get("causes") or []
            return int(err.code), {str(c.get("field", "")) for c in causes}


@pytest.fixture(scope="module")
def stand_in() -> Iterator[Server]:
    with APIServer() as server:
        yield Server(server.url)


@pytest.fixture(scope="module")
def real(control_plane: ControlPlane) -> Server:
    return Server(control_plane.server, ADMIN_TOKEN, str(control_plane.certs.ca_cert))


@pytest.mark.parametrize("case", list(CORPUS))
def test_stand_in_agrees_with_real_apiserver(case: str, real: Server,
                                             stand_in: Server) -> None:
    obj = CORPUS[case]()
    obj["metadata"]["name"] = f"{obj['metadata']['name']}-{zlib.crc32(case.encode())}"
    theirs = real.verdict(obj, dry_run=True)
    ours = stand_in.verdict(obj, dry_run=False)
    assert (ours[0] < 300) == (theirs[0] < 300), (
        f"{case}: real server {theirs[0]} {sorted(theirs[1])}, "
        f"stand-in {ours[0]} {sorted(ours[1])}")
    if theirs[0] == 422:
        assert ours == theirs, f"{case}: real server {theirs}, stand-in {ours}"
