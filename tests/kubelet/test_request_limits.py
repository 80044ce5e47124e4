"""Bounded requests on the DRA socket: at most MAX_CLAIMS_PER_CALL claims per prepare or
unprepare, and at most MAX_REQUEST_BYTES per message on either socket. A request over a
limit is refused as a whole before any claim is read or logged."""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import ModuleType

import grpc
import pytest

from simdra._driver.kubelet.dra_service import MAX_CLAIMS_PER_CALL
from simdra._driver.kubelet.endpoints import MAX_REQUEST_BYTES, KubeletPlugin
from simdra._driver.kubelet.gen import (
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
)
from simdra._driver.kubelet.gen import pluginregistration_v1_pb2 as regpb
from simdra._driver.kubelet.gen import pluginregistration_v1_pb2_grpc as regpb_grpc

from .fakes import Dirs, FakePreparer

StartPlugin = Callable[..., KubeletPlugin]

VERSIONS = [(dra_v1_pb2, dra_v1_pb2_grpc), (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc)]
STEPS = [("NodePrepareResources", "prepare"), ("NodeUnprepareResources", "unprepare")]


def _request(pb: ModuleType, method: str, count: int, name: str = "c") -> object:
    request = getattr(pb, f"{method}Request")()
    for i in range(count):
        claim = request.claims.add()
        claim.namespace, claim.name, claim.uid = "default", f"{name}-{i}", f"uid-{i}"
    return request


def _call(socket: str, grpc_mod: ModuleType, method: str, request: object) -> object:
    with grpc.insecure_channel(f"unix:{socket}") as channel:
        return getattr(grpc_mod.DRAPluginStub(channel), method)(request, timeout=30)


@pytest.mark.parametrize(("pb", "grpc_mod"), VERSIONS, ids=["v1", "v1beta1"])
@pytest.mark.parametrize(("method", "step"), STEPS, ids=["prepare", "unprepare"])
def test_too_many_claims_are_refused_whole_with_one_line(
    start_plugin: StartPlugin, dirs: Dirs, preparer: FakePreparer,
    caplog: pytest.LogCaptureFixture, pb: ModuleType, grpc_mod: ModuleType,
    method: str, step: str,
) -> None:
    start_plugin()
    count = MAX_CLAIMS_PER_CALL + 1
    caplog.set_level(logging.DEBUG, logger="simdra")
    with pytest.raises(grpc.RpcError) as refused:
        _call(dirs.dra_socket, grpc_mod, method, _request(pb, method, count))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = refused.value.details()
    assert f"{count} claims" in details and f"at most {MAX_CLAIMS_PER_CALL}" in details
    assert preparer.calls == []  # no claim read from the API server
    # The servicer's own lines (another test's plugin, still stopping in this worker,
    # may log from its threads meanwhile).
    lines = [r.getMessage() for r in caplog.records
             if r.name == "simdra._driver.kubelet.dra_service"]
    assert len(lines) == 1 and "uid-" not in lines[0] and len(lines[0]) < 200, lines


@pytest.mark.parametrize(("method", "step"), STEPS, ids=["prepare", "unprepare"])
def test_a_full_call_at_the_cap_is_served(
    start_plugin: StartPlugin, dirs: Dirs, preparer: FakePreparer, method: str, step: str
) -> None:
    start_plugin()
    response = _call(dirs.dra_socket, dra_v1_pb2_grpc, method,
                     _request(dra_v1_pb2, method, MAX_CLAIMS_PER_CALL))
    assert len(response.claims) == MAX_CLAIMS_PER_CALL  # type: ignore[attr-defined]
    assert [(s, len(claims)) for s, claims in preparer.calls] == [(step, MAX_CLAIMS_PER_CALL)]


def test_cap_leaves_room_for_the_longest_names_the_api_allows(
    start_plugin: StartPlugin, dirs: Dirs, preparer: FakePreparer
) -> None:
    """A full call of claims with the longest names (253) and namespaces (63) fits."""
    start_plugin()
    request = dra_v1_pb2.NodePrepareResourcesRequest()
    for i in range(MAX_CLAIMS_PER_CALL):
        claim = request.claims.add()
        claim.namespace, claim.uid = "n" * 63, f"{i:08d}-0000-0000-0000-000000000000"
        claim.name = f"{i:08d}".ljust(253, "x")
    _call(dirs.dra_socket, dra_v1_pb2_grpc, "NodePrepareResources", request)
    assert len(preparer.calls[0][1]) == MAX_CLAIMS_PER_CALL


def test_oversized_message_is_refused_on_the_dra_socket(
    start_plugin: StartPlugin, dirs: Dirs, preparer: FakePreparer
) -> None:
    start_plugin()
    # Under gRPC's default 4 MiB, over ours: one claim with a huge name.
    request = _request(dra_v1_pb2, "NodePrepareResources", 1, name="x" * (MAX_REQUEST_BYTES + 1))
    with pytest.raises(grpc.RpcError) as refused:
        _call(dirs.dra_socket, dra_v1_pb2_grpc, "NodePrepareResources", request)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert preparer.calls == []


def test_oversized_message_is_refused_on_the_registration_socket(
    start_plugin: StartPlugin, dirs: Dirs
) -> None:
    plugin = start_plugin()
    status = regpb.RegistrationStatus(plugin_registered=False, error="x" * (MAX_REQUEST_BYTES + 1))
    with (grpc.insecure_channel(f"unix:{dirs.registration_socket}") as channel,
          pytest.raises(grpc.RpcError) as refused):
        regpb_grpc.RegistrationStub(channel).NotifyRegistrationStatus(status, timeout=30)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert plugin.registration_status.notifications == 0
