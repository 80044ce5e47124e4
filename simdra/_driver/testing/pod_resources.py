"""The kubelet's PodResources API as a test double that answers over a real unix socket:
tests and the demo say which pods use which claims (`set_pods`), and a plugin's
reconciliation asks it as it asks the kubelet (`simdra._driver.kubelet.pod_resources`).

    with PodResourcesServer(tmp_path / "kubelet.sock") as kubelet:
        kubelet.set_pods([PodClaims("default", "pod-1", [
            ClaimUse("default", "claim-1", [("gpu.example.com", "node-a", "gpu-0", None)])])])

`fail_with(code)` makes every call fail with that gRPC status, as a kubelet that is
restarting or has the API off would. Like a real kubelet, it also lists the plugin's
own pod (`PLUGIN_POD`, which `LocalCluster` gives the plugin as `--pod-namespace` and
`--pod-name`): free-mode reconciliation frees nothing on an answer without it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc

from simdra._driver.kubelet.gen import podresources_v1_pb2 as pb
from simdra._driver.kubelet.gen import podresources_v1_pb2_grpc as pb_grpc

# (driver, pool, device, shareID) of one device a claim got.
DeviceUse = tuple[str, str, str, str | None]
# (namespace, name) of the plugin's pod on the harness's node, as a DaemonSet's would be.
PLUGIN_POD = ("simdra", "simdra-kubelet-plugin-local")


@dataclass(frozen=True)
class ClaimUse:
    """A claim a container uses, with its devices."""

    namespace: str
    name: str
    devices: Sequence[DeviceUse] = ()


@dataclass(frozen=True)
class PodClaims:
    """A pod the kubelet runs, with the claims of its one container."""

    namespace: str
    name: str
    claims: Sequence[ClaimUse] = field(default_factory=tuple)


class PodResourcesServer(pb_grpc.PodResourcesListerServicer):
    """Serves `v1.PodResourcesLister` List and Get on `socket_path` until `stop()`.
    `plugin_pod`: the plugin's own pod, listed first in every answer besides the pods
    set (None: not listed, as a kubelet not yet synced or another node's would answer)."""

    def __init__(self, socket_path: str | Path,
                 plugin_pod: tuple[str, str] | None = PLUGIN_POD) -> None:
        self.socket_path = str(socket_path)
        self._lock = threading.Lock()
        self._plugin = [PodClaims(*plugin_pod)] if plugin_pod is not None else []
        self._pods: list[PodClaims] = []
        self._failure: grpc.StatusCode | None = None
        self.calls = 0
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        pb_grpc.add_PodResourcesListerServicer_to_server(self, self._server)
        self._server.add_insecure_port(f"unix:{self.socket_path}")
        self._server.start()

    def set_pods(self, pods: Sequence[PodClaims]) -> None:
        """What the next answers list, after the plugin's pod."""
        with self._lock:
            self._pods = list(pods)

    def fail_with(self, code: grpc.StatusCode | None) -> None:
        """Fail every call with `code` (None: answer again)."""
        with self._lock:
            self._failure = code

    def List(self, request: Any, context: grpc.ServicerContext) -> pb.ListPodResourcesResponse:
        """Every pod set, as the kubelet lists its admitted pods."""
        with self._lock:
            self.calls += 1
            if self._failure is not None:
                context.abort(self._failure, "kubelet PodResources: failing as told")
            pods = self._plugin + self._pods
            return pb.ListPodResourcesResponse(pod_resources=[_pod(p) for p in pods])

    def Get(self, request: Any, context: grpc.ServicerContext) -> pb.GetPodResourcesResponse:
        """One pod by namespace and name; NOT_FOUND when it is not set."""
        with self._lock:
            for pod in self._plugin + self._pods:
                if (pod.namespace, pod.name) == (request.pod_namespace, request.pod_name):
                    return pb.GetPodResourcesResponse(pod_resources=_pod(pod))
        context.abort(grpc.StatusCode.NOT_FOUND, "pod not found")
        raise AssertionError("unreachable")  # abort raises

    def stop(self) -> None:
        """Stop serving (at once)."""
        self._server.stop(grace=None)

    def __enter__(self) -> PodResourcesServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _pod(pod: PodClaims) -> pb.PodResources:
    resources = [pb.DynamicResource(claim_namespace=c.namespace, claim_name=c.name,
                                    claim_resources=[_device(d) for d in c.devices])
                 for c in pod.claims]
    container = pb.ContainerResources(name="main", dynamic_resources=resources)
    return pb.PodResources(namespace=pod.namespace, name=pod.name, containers=[container])


def _device(device: DeviceUse) -> pb.ClaimResource:
    driver, pool, name, share = device
    resource = pb.ClaimResource(driver_name=driver, pool_name=pool, device_name=name,
                                cdi_devices=[pb.CDIDevice(name=f"{driver}/x={name}")])
    if share is not None:
        resource.share_id = share
    return resource
