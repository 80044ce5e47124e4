"""One service per socket: the registration socket, in a directory other node agents
mount, serves Registration only; the DRA socket serves DRA and health, not Registration
(as the Go kubelet-plugin helper, which runs a separate registration server).

Called from outside the plugin, over its real unix sockets, by full method name: what a
node-driver-registrar or another DRA driver that mounts plugins_registry could send.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType

import grpc
import pytest

from simdra._driver.claims.types import ClaimRef
from simdra._driver.kubelet.endpoints import KubeletPlugin
from simdra._driver.kubelet.gen import (
    dra_health_v1_pb2,
    dra_health_v1alpha1_pb2,
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
)
from simdra._driver.kubelet.gen import pluginregistration_v1_pb2 as regpb
from simdra._driver.kubelet.gen import pluginregistration_v1_pb2_grpc as regpb_grpc
from simdra._driver.kubelet.health import HealthBoard
from simdra._driver.testing.kubelet import KubeletEmulator

from .fakes import DRIVER, Dirs, FakePreparer

StartPlugin = Callable[..., KubeletPlugin]


def _methods(*modules: ModuleType) -> list[tuple[str, bool, type]]:
    """(full method path, server-streaming, request class) of every method of `modules`."""
    found = []
    for pb in modules:
        for service in pb.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                request = getattr(pb, method.input_type.name)
                path = f"/{service.full_name}/{method.name}"
                found.append((path, method.server_streaming, request))
    return found


DRA_AND_HEALTH = _methods(dra_v1_pb2, dra_v1beta1_pb2, dra_health_v1alpha1_pb2,
                          dra_health_v1_pb2)
REGISTRATION = _methods(regpb)


def _request(request_class: type) -> bytes:
    """A request that would do harm if served: an unprepare names a claim."""
    request = request_class()
    if hasattr(request, "claims"):
        claim = request.claims.add()
        claim.namespace, claim.name, claim.uid = "default", "running", "uid-running"
    return bytes(request.SerializeToString())


def _call(socket: str, path: str, streaming: bool, request: bytes) -> grpc.StatusCode:
    """Call `path` on `socket`; the status it ends with (OK: it was served)."""
    with grpc.insecure_channel(f"unix:{socket}") as channel:
        try:
            if streaming:
                stream = channel.unary_stream(path)(request, timeout=5)
                next(iter(stream))  # a served stream sends the device list at once
                stream.cancel()
                return grpc.StatusCode.OK
            channel.unary_unary(path)(request, timeout=5)
        except grpc.RpcError as err:
            return err.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def test_method_lists_cover_every_service() -> None:
    assert len(DRA_AND_HEALTH) == 6  # prepare, unprepare (v1, v1beta1); two health watches
    assert {p.rpartition("/")[2] for p, _, _ in REGISTRATION} == {
        "GetInfo", "NotifyRegistrationStatus"}


@pytest.mark.parametrize(("path", "streaming", "request_class"), DRA_AND_HEALTH,
                         ids=[p for p, _, _ in DRA_AND_HEALTH])
def test_registration_socket_refuses_dra_and_health(
    start_plugin: StartPlugin, dirs: Dirs, preparer: FakePreparer,
    path: str, streaming: bool, request_class: type,
) -> None:
    start_plugin(health=HealthBoard())
    code = _call(dirs.registration_socket, path, streaming, _request(request_class))
    assert code == grpc.StatusCode.UNIMPLEMENTED
    assert preparer.calls == []  # no claim reached the preparer


@pytest.mark.parametrize(("path", "streaming", "request_class"), DRA_AND_HEALTH,
                         ids=[p for p, _, _ in DRA_AND_HEALTH])
def test_dra_socket_serves_dra_and_health(
    start_plugin: StartPlugin, dirs: Dirs, path: str, streaming: bool, request_class: type,
) -> None:
    start_plugin(health=HealthBoard())
    assert _call(dirs.dra_socket, path, streaming, _request(request_class)) == grpc.StatusCode.OK


@pytest.mark.parametrize(("path", "streaming", "request_class"), REGISTRATION,
                         ids=[p for p, _, _ in REGISTRATION])
def test_dra_socket_refuses_registration(
    start_plugin: StartPlugin, dirs: Dirs, path: str, streaming: bool, request_class: type,
) -> None:
    plugin = start_plugin(health=HealthBoard())
    code = _call(dirs.dra_socket, path, streaming, _request(request_class))
    assert code == grpc.StatusCode.UNIMPLEMENTED
    assert plugin.registration_status.notifications == 0


def test_registration_socket_serves_registration(
    start_plugin: StartPlugin, dirs: Dirs
) -> None:
    start_plugin(health=HealthBoard())
    with grpc.insecure_channel(f"unix:{dirs.registration_socket}") as channel:
        info = regpb_grpc.RegistrationStub(channel).GetInfo(regpb.InfoRequest(), timeout=5)
    assert (info.name, info.endpoint) == (DRIVER, dirs.dra_socket)


def test_unprepare_on_registration_socket_leaves_claim_prepared(
    start_plugin: StartPlugin, kubelet: KubeletEmulator, dirs: Dirs, preparer: FakePreparer
) -> None:
    """Another agent that mounts plugins_registry cannot free a running pod's device."""
    start_plugin()
    kubelet.wait_for_plugin(DRIVER, timeout=5)
    running = ClaimRef("default", "running", "uid-running")
    kubelet.prepare([running])
    path = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources"
    code = _call(dirs.registration_socket, path, False,
                 _request(dra_v1_pb2.NodeUnprepareResourcesRequest))
    assert code == grpc.StatusCode.UNIMPLEMENTED
    assert [step for step, _ in preparer.calls] == ["prepare"]


def test_registration_answers_while_every_dra_worker_is_busy(
    start_plugin: StartPlugin, dirs: Dirs, preparer: FakePreparer
) -> None:
    """The kubelet's registration calls never wait behind a burst of prepares."""
    workers = 2
    arrived, release = threading.Semaphore(0), threading.Event()

    def hold() -> None:
        arrived.release()
        release.wait()

    preparer.on_call = hold
    start_plugin(max_workers=workers)
    request = dra_v1_pb2.NodePrepareResourcesRequest(
        claims=[dra_v1_pb2.Claim(namespace="default", name="c", uid="uid-c")])
    with grpc.insecure_channel(f"unix:{dirs.dra_socket}") as channel:
        prepare = dra_v1_pb2_grpc.DRAPluginStub(channel).NodePrepareResources
        calls = [prepare.future(request, timeout=60) for _ in range(workers)]
        try:
            for _ in range(workers):
                arrived.acquire()  # every DRA worker is now held in a prepare
            with grpc.insecure_channel(f"unix:{dirs.registration_socket}") as reg:
                info = regpb_grpc.RegistrationStub(reg).GetInfo(regpb.InfoRequest(), timeout=10)
            assert info.name == DRIVER
        finally:
            release.set()
        assert all(call.result().claims["uid-c"].error == "" for call in calls)
