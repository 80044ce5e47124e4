"""Client of the kubelet's PodResources API (`v1.PodResourcesLister`, a unix socket in
the kubelet's root directory): the pods on this node, and the devices their containers'
ResourceClaims got. Reconciliation asks it before freeing a prepared claim
(`simdra._driver.claims.reconcile.plan`); the DaemonSet mounts only that socket's directory,
read-only.
"""

from __future__ import annotations

import grpc

from simdra._driver.claims.reconcile.plan import DeviceKey, KubeletUnavailable, KubeletUsage
from simdra._driver.core.textlimits import one_line
from simdra._driver.kubelet.gen import podresources_v1_pb2 as pb
from simdra._driver.kubelet.gen import podresources_v1_pb2_grpc as pb_grpc

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
# The kubelet answers from memory; a List that takes this long means it is stuck.
DEFAULT_TIMEOUT_S = 10.0
# As the kubelet's own client of this API: a node with many pods and devices answers
# with more than gRPC's default 4 MiB.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class PodResourcesUsage:
    """A `KubeletUsageSource` over the kubelet's PodResources socket; one List per
    `usage()` call, over a channel made for it (reconciliation asks rarely, and a
    kubelet restart replaces the socket)."""

    def __init__(self, socket_path: str, driver: str,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._socket = socket_path
        self._driver = driver
        self._timeout = timeout_s

    def usage(self) -> KubeletUsage:
        """The pods the kubelet lists now, and the devices of this driver they use."""
        options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
        try:
            with grpc.insecure_channel(f"unix:{self._socket}", options=options) as channel:
                stub = pb_grpc.PodResourcesListerStub(channel)
                answer = stub.List(pb.ListPodResourcesRequest(), timeout=self._timeout)
        except grpc.RpcError as err:
            raise KubeletUnavailable(
                f"kubelet PodResources API at {self._socket}: {_rpc_text(err)}") from None
        return usage_of(answer, self._driver)


def usage_of(answer: pb.ListPodResourcesResponse, driver: str) -> KubeletUsage:
    """Every pod listed (namespace, name), and the devices of `driver` any container's
    claims list."""
    pods: set[tuple[str, str]] = set()
    devices: set[DeviceKey] = set()
    lists_dra = False
    for pod in answer.pod_resources:
        pods.add((pod.namespace, pod.name))
        for container in pod.containers:
            for resource in container.dynamic_resources:
                lists_dra = True
                devices.update(_devices(resource, driver))
    return KubeletUsage(frozenset(pods), frozenset(devices), lists_dra)


def _devices(resource: pb.DynamicResource, driver: str) -> list[DeviceKey]:
    return [(r.pool_name, r.device_name, r.share_id or None)
            for r in resource.claim_resources if r.driver_name == driver]


def _rpc_text(err: grpc.RpcError) -> str:
    code = err.code() if isinstance(err, grpc.Call) else None
    details = err.details() if isinstance(err, grpc.Call) else str(err)
    name = code.name if code is not None else "error"
    return one_line(f"{name}: {details or 'no details'}")
