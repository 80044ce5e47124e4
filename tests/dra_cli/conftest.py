"""A small cluster in the API stand-in for `kubectl dra`: two drivers on two nodes, shares
with consumedCapacity, a partitionable pool with counters, a tainted device, pods holding
claims (one reporting its device unhealthy) and claims left pending for `why`.

node-1, gpu.example.com (pool node-1): gpu-0 (held by default/train, pod trainer,
Unhealthy), gpu-1, gpu-2, gpu-3 (tainted NoSchedule); net.example.com (pool node-1-net):
nic-0, shared, bandwidth 100G, held by shares of default/web-a (40G) and default/web-b
(60G). node-2, gpu.example.com (pool node-2): counter set gpu-mem (memory 80Gi), part-0
and part-1 consuming 40Gi each, whole consuming 80Gi; part-0 held by default/small.
Pending: default/want-a100 (a selector nothing matches), default/want-bw (10G of a full
NIC), default/want-gpu3 (only gpu-3 matches; its taint is not tolerated), default/want-any
(any GPU: allocatable), for pod `waiting` bound to node-2; pod `unscheduled` waits for
want-bw.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from simdra._driver.dra_cli.main import main
from simdra._driver.testing.apiserver import APIServer

JSON = dict[str, Any]
GPU, NET = "gpu.example.com", "net.example.com"
RES = "/apis/resource.k8s.io/v1"
Run = Callable[..., tuple[int, str, str]]


def _slice(name: str, driver: str, node: str, pool: str, devices: list[JSON],
           counters: list[JSON] | None = None, count: int = 1) -> JSON:
    spec: JSON = {"driver": driver, "nodeName": node,
                  "pool": {"name": pool, "generation": 1, "resourceSliceCount": count}}
    if devices:
        spec["devices"] = devices
    if counters:  # in a slice of its own (resource.k8s.io/v1)
        spec["sharedCounters"] = counters
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name}, "spec": spec}


def _gpu(index: int, **extra: Any) -> JSON:
    return {"name": f"gpu-{index}", "attributes": {"model": {"string": "H100"},
                                                    "index": {"int": index}},
            "capacity": {"memory": {"value": "80Gi"}}, **extra}


def _part(name: str, memory: str) -> JSON:
    return {"name": name, "attributes": {"model": {"string": "H100-part"}},
            "capacity": {"memory": {"value": memory}},
            "consumesCounters": [{"counterSet": "gpu-mem",
                                  "counters": {"memory": {"value": memory}}}]}


SLICES = [
    _slice("node-1-gpu", GPU, "node-1", "node-1", [
        _gpu(0), _gpu(1), _gpu(2),
        _gpu(3, taints=[{"key": "example.com/broken", "value": "ecc", "effect": "NoSchedule"}]),
    ]),
    _slice("node-1-net", NET, "node-1", "node-1-net", [{
        "name": "nic-0", "allowMultipleAllocations": True,
        "attributes": {"speed": {"string": "100G"}},
        "capacity": {"bandwidth": {"value": "100G"}},
    }]),
    _slice("node-2-counters", GPU, "node-2", "node-2", [],
           [{"name": "gpu-mem", "counters": {"memory": {"value": "80Gi"}}}], count=2),
    _slice("node-2-gpu", GPU, "node-2", "node-2",
           [_part("part-0", "40Gi"), _part("part-1", "40Gi"), _part("whole", "80Gi")], count=2),
]


def _class(name: str, driver: str) -> JSON:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}}


def _claim(name: str, device_class: str, **exactly: Any) -> JSON:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [
                {"name": "req", "exactly": {"deviceClassName": device_class, **exactly}}]}}}


def _result(driver: str, pool: str, device: str, **extra: Any) -> JSON:
    return {"request": "req", "driver": driver, "pool": pool, "device": device, **extra}


SHARE = "a1b2c3d4-0000-4000-8000-00000000000"  # + a digit: a shareID
ALLOCATED = {  # claim -> (node, result, pods reserving it)
    "train": ("node-1", _result(GPU, "node-1", "gpu-0"), ["trainer"]),
    "web-a": ("node-1", _result(NET, "node-1-net", "nic-0", shareID=SHARE + "1",
                                consumedCapacity={"bandwidth": "40G"}), ["web-a"]),
    "web-b": ("node-1", _result(NET, "node-1-net", "nic-0", shareID=SHARE + "2",
                                consumedCapacity={"bandwidth": "60G"}), ["web-b"]),
    "small": ("node-2", _result(GPU, "node-2", "part-0"), []),
}


def _pod(name: str, claim: str, node: str, health: str | None = None) -> JSON:
    status: JSON = {"phase": "Running"}
    if health:
        status["containerStatuses"] = [{
            "name": "app", "ready": True, "restartCount": 0, "image": "busybox",
            "imageID": "", "state": {"running": {}},
            "allocatedResourcesStatus": [{"name": "claim:gpu/req", "resources": [
                {"resourceID": f"{GPU}/node-1/gpu-0", "health": health}]}]}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "busybox"}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]},
            "status": status}


def populate(server: APIServer) -> None:
    """Write the cluster above through the stand-in's REST API (validated)."""
    with server.rest_client() as rest:
        for item in SLICES:
            rest.request("POST", f"{RES}/resourceslices", body=item)
        for name, driver in (("gpu", GPU), ("net", NET)):
            rest.request("POST", f"{RES}/deviceclasses", body=_class(name, driver))
        claims = [_claim("train", "gpu"), _claim("web-a", "net"), _claim("web-b", "net"),
                  _claim("small", "gpu"),
                  _claim("want-a100", "gpu", selectors=[{"cel": {
                      "expression": 'device.attributes["gpu.example.com"].model == "A100"'}}]),
                  _claim("want-bw", "net", capacity={"requests": {"bandwidth": "10G"}}),
                  _claim("want-gpu3", "gpu", selectors=[
                      {"cel": {"expression": 'device.attributes["gpu.example.com"].index == 3'}}]),
                  _claim("want-any", "gpu")]
        path = f"{RES}/namespaces/default/resourceclaims"
        written = {c["metadata"]["name"]: rest.request("POST", path, body=c) for c in claims}
        for name, (node, result, pods) in ALLOCATED.items():
            claim = written[name]
            claim["status"] = {
                "allocation": {"devices": {"results": [result]}, "nodeSelector": {
                    "nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
                "reservedFor": [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in pods]}
            rest.request("PUT", f"{path}/{name}/status", body=claim)
    server.put_object("pods", _pod("trainer", "train", "node-1", "Unhealthy"))
    server.put_object("pods", _pod("web-a", "web-a", "node-1"))
    server.put_object("pods", _pod("web-b", "web-b", "node-1"))
    server.put_object("pods", _pod("waiting", "want-any", "node-2"))
    pending = _pod("unscheduled", "want-bw", "")
    del pending["spec"]["nodeName"]
    server.put_object("pods", pending)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[APIServer, Path]]:
    """The stand-in with the cluster above, and a kubeconfig for it."""
    with APIServer() as server:
        populate(server)
        yield server, server.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")


@pytest.fixture
def run(cluster: tuple[APIServer, Path], capsys: pytest.CaptureFixture[str]) -> Run:
    """`kubectl-dra ARGS` against the cluster: (status, stdout, stderr)."""
    _, kubeconfig = cluster

    def _run(*args: str) -> tuple[int, str, str]:
        code = main([*args, "--kubeconfig", str(kubeconfig)])
        out, err = capsys.readouterr()
        return code, out, err

    return _run
