"""NodePrepareResources / NodeUnprepareResources through real sockets, v1 and v1beta1."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from simdra._driver.claims.types import ClaimRef
from simdra._driver.kubelet.dra_service import DRAPluginV1
from simdra._driver.kubelet.endpoints import KubeletPlugin
from simdra._driver.kubelet.gen import dra_v1_pb2, dra_v1_pb2_grpc
from simdra._driver.kubelet.gen import pluginregistration_v1_pb2_grpc as regpb_grpc
from simdra._driver.kubelet.registration import RegistrationServicer
from simdra._driver.kubelet.server import UnixSocketServer, start_unix_server
from simdra._driver.testing.kubelet import KubeletEmulator, KubeletError

from .fakes import DRIVER, Dirs, FakePreparer, device

StartPlugin = Callable[..., KubeletPlugin]

CLAIM_A = ClaimRef(namespace="team-a", name="gpu-claim", uid="uid-a")
CLAIM_B = ClaimRef(namespace="team-b", name="shared-claim", uid="uid-b")


@pytest.fixture
def ready(start_plugin: StartPlugin, kubelet: KubeletEmulator) -> KubeletEmulator:
    start_plugin()
    kubelet.wait_for_plugin(DRIVER, timeout=5)
    return kubelet


def _devices_of(preparer: FakePreparer) -> None:
    preparer.devices["uid-a"] = (device("node-1", "gpu-0", "gpu"),)
    preparer.devices["uid-b"] = (
        device("node-1", "gpu-1", "big", "small", share_id="share-7"),
        device("node-1", "gpu-2"),
    )


def test_v1_prepare_returns_devices_with_share_id(
    ready: KubeletEmulator, preparer: FakePreparer
) -> None:
    _devices_of(preparer)
    result = ready.prepare([CLAIM_A, CLAIM_B])
    assert result["uid-a"] == {
        "devices": [
            {
                "request_names": ["gpu"],
                "pool_name": "node-1",
                "device_name": "gpu-0",
                "cdi_device_ids": ["example.com/gpu=gpu-0"],
                "share_id": None,
            }
        ],
        "error": "",
    }
    shared, plain = result["uid-b"]["devices"]
    assert shared["request_names"] == ["big", "small"]
    assert shared["share_id"] == "share-7"
    assert plain["request_names"] == [] and plain["share_id"] is None
    assert preparer.calls == [("prepare", [CLAIM_A, CLAIM_B])]


def test_v1beta1_prepare_carries_everything_but_share_id(
    ready: KubeletEmulator, preparer: FakePreparer
) -> None:
    _devices_of(preparer)
    result = ready.prepare([CLAIM_B], version="v1beta1")
    shared, plain = result["uid-b"]["devices"]
    assert shared == {
        "request_names": ["big", "small"],
        "pool_name": "node-1",
        "device_name": "gpu-1",
        "cdi_device_ids": ["example.com/gpu=gpu-1"],
        "share_id": None,
    }
    assert plain["device_name"] == "gpu-2"
    assert preparer.calls == [("prepare", [CLAIM_B])]


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_unprepare_round_trip(ready: KubeletEmulator, preparer: FakePreparer, version: str) -> None:
    preparer.errors["uid-b"] = "cannot remove CDI spec: read-only file system"
    result = ready.unprepare([CLAIM_A, CLAIM_B], version=version)
    assert result == {
        "uid-a": {"error": ""},
        "uid-b": {"error": "cannot remove CDI spec: read-only file system"},
    }
    assert preparer.calls == [("unprepare", [CLAIM_A, CLAIM_B])]


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_per_claim_error_is_passed_through(
    ready: KubeletEmulator, preparer: FakePreparer, version: str
) -> None:
    _devices_of(preparer)
    preparer.errors["uid-a"] = "claim team-a/gpu-claim is not allocated"
    result = ready.prepare([CLAIM_A, CLAIM_B], version=version)
    assert result["uid-a"] == {"devices": [], "error": "claim team-a/gpu-claim is not allocated"}
    assert result["uid-b"]["error"] == ""


@pytest.mark.parametrize("step", ["prepare", "unprepare"])
def test_preparer_exception_becomes_per_claim_errors_and_serving_goes_on(
    ready: KubeletEmulator, preparer: FakePreparer, step: str
) -> None:
    preparer.fail_with = RuntimeError("checkpoint is corrupt")
    result = getattr(ready, step)([CLAIM_A, CLAIM_B])
    assert set(result) == {"uid-a", "uid-b"}
    for claim in (CLAIM_A, CLAIM_B):
        error = result[claim.uid]["error"]
        assert "checkpoint is corrupt" in error and claim.uid in error and step in error
    preparer.fail_with = None
    assert getattr(ready, step)([CLAIM_A])["uid-a"]["error"] == ""


@pytest.mark.parametrize("step", ["prepare", "unprepare"])
def test_missing_result_becomes_error_naming_the_claim(
    ready: KubeletEmulator, preparer: FakePreparer, step: str
) -> None:
    preparer.omit.add("uid-b")
    result = getattr(ready, step)([CLAIM_A, CLAIM_B])
    assert result["uid-a"]["error"] == ""
    assert "no result" in result["uid-b"]["error"]
    assert "team-b/shared-claim" in result["uid-b"]["error"]


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_a_claim_named_twice_in_one_call_is_prepared_and_answered_once(
    ready: KubeletEmulator, preparer: FakePreparer, version: str
) -> None:
    # The map has one entry per UID; each device must be in it once, not once per mention.
    _devices_of(preparer)
    result = ready.prepare([CLAIM_B, CLAIM_A, CLAIM_B], version=version)
    assert [d["device_name"] for d in result["uid-b"]["devices"]] == ["gpu-1", "gpu-2"]
    assert [d["device_name"] for d in result["uid-a"]["devices"]] == ["gpu-0"]
    assert ready.unprepare([CLAIM_A, CLAIM_A], version=version) == {"uid-a": {"error": ""}}
    assert preparer.calls == [("prepare", [CLAIM_B, CLAIM_A]), ("unprepare", [CLAIM_A])]


@pytest.mark.parametrize("step", ["prepare", "unprepare"])
def test_results_for_unrequested_claims_are_dropped(
    ready: KubeletEmulator, preparer: FakePreparer, step: str
) -> None:
    preparer.extra_uids.add("uid-stranger")
    result = getattr(ready, step)([CLAIM_A])  # the emulator rejects unknown UIDs
    assert set(result) == {"uid-a"}


class _BrokenDRA(DRAPluginV1):
    """A plugin that breaks the one-entry-per-claim rule in the given way."""

    def __init__(self, extra: str = "", drop: str = "") -> None:
        super().__init__(FakePreparer())
        self.extra, self.drop = extra, drop

    def NodePrepareResources(self, request: Any, context: Any) -> Any:
        response = dra_v1_pb2.NodePrepareResourcesResponse()
        for claim in request.claims:
            if claim.uid != self.drop:
                response.claims[claim.uid].error = ""
        if self.extra:
            response.claims[self.extra].error = ""
        return response


def _serve_broken(dirs: Dirs, servicer: _BrokenDRA) -> list[UnixSocketServer]:
    dra = start_unix_server(
        dirs.dra_socket, lambda s: dra_v1_pb2_grpc.add_DRAPluginServicer_to_server(servicer, s)
    )
    reg = RegistrationServicer(DRIVER, dirs.dra_socket, ["v1.DRAPlugin"])
    registrar = start_unix_server(
        dirs.registration_socket,
        lambda s: regpb_grpc.add_RegistrationServicer_to_server(reg, s),
    )
    return [registrar, dra]


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (_BrokenDRA(extra="uid-stranger"), "unknown claim UID.*uid-stranger"),
        (_BrokenDRA(drop="uid-b"), "skipped 1 ResourceClaims.*uid-b"),
    ],
)
def test_emulator_rejects_responses_a_kubelet_rejects(
    dirs: Dirs, kubelet: KubeletEmulator, broken: _BrokenDRA, message: str
) -> None:
    servers = _serve_broken(dirs, broken)
    try:
        kubelet.wait_for_plugin(DRIVER, timeout=5)
        with pytest.raises(KubeletError, match=message):
            kubelet.prepare([CLAIM_A, CLAIM_B])
    finally:
        for server in servers:
            server.stop(grace=0)


def test_grpc_error_is_raised_with_call_context(dirs: Dirs, kubelet: KubeletEmulator) -> None:
    servers = _serve_broken(dirs, _BrokenDRA())  # serves v1 only
    try:
        kubelet.wait_for_plugin(DRIVER, timeout=5)
        with pytest.raises(KubeletError, match=r"NodePrepareResources .*v1beta1.*UNIMPLEMENTED"):
            kubelet.prepare([CLAIM_A], version="v1beta1")
        with pytest.raises(KubeletError, match="unknown DRA API version"):
            kubelet.prepare([CLAIM_A], version="v1alpha4")
    finally:
        for server in servers:
            server.stop(grace=0)
