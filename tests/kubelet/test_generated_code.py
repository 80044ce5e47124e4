"""The committed generated code is current, and the wire names match the kubelet's."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.descriptor import FieldDescriptor

from simdra._driver.kubelet.gen import (
    dra_health_v1_pb2,
    dra_health_v1_pb2_grpc,
    dra_health_v1alpha1_pb2,
    dra_health_v1alpha1_pb2_grpc,
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
    pluginregistration_v1_pb2,
    pluginregistration_v1_pb2_grpc,
    podresources_v1_pb2,
    podresources_v1_pb2_grpc,
)

ROOT = Path(__file__).resolve().parents[2]
GEN_DIR = ROOT / "simdra" / "_driver" / "kubelet" / "gen"


def test_committed_generated_code_matches_protos() -> None:
    with tempfile.TemporaryDirectory(prefix="simdra-gen-test-") as tmp:
        result = subprocess.run(
            [sys.executable, str(ROOT / "hack" / "gen_protos.py"), "--out", tmp],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, f"hack/gen_protos.py failed:\n{result.stderr}"
        fresh = {p.name: p.read_bytes() for p in Path(tmp).iterdir()}
    committed = {p.name: p.read_bytes() for p in GEN_DIR.iterdir() if p.suffix in (".py", ".pyi")}
    stale = sorted(n for n in fresh.keys() & committed.keys() if fresh[n] != committed[n])
    missing = sorted(fresh.keys() - committed.keys())
    extra = sorted(committed.keys() - fresh.keys())
    problems = [f"stale: simdra/_driver/kubelet/gen/{n}" for n in stale]
    problems += [f"missing: simdra/_driver/kubelet/gen/{n}" for n in missing]
    problems += [f"not generated from any proto: simdra/_driver/kubelet/gen/{n}" for n in extra]
    assert not problems, "generated code is out of date; run hack/gen-protos.sh\n" + "\n".join(
        problems
    )


class _RecordingChannel:
    """Collects the method paths a generated stub registers (what goes on the wire)."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def _record(self, path: str, **_: Any) -> None:
        self.paths.append(path)

    unary_unary = unary_stream = stream_unary = stream_stream = _record


@pytest.mark.parametrize(
    ("stub", "paths"),
    [
        (
            pluginregistration_v1_pb2_grpc.RegistrationStub,
            [
                "/pluginregistration.Registration/GetInfo",
                "/pluginregistration.Registration/NotifyRegistrationStatus",
            ],
        ),
        (
            dra_v1_pb2_grpc.DRAPluginStub,
            [
                "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
                "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources",
            ],
        ),
        (
            dra_v1beta1_pb2_grpc.DRAPluginStub,
            [
                "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources",
                "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources",
            ],
        ),
        (
            dra_health_v1alpha1_pb2_grpc.DRAResourceHealthStub,
            ["/v1alpha1.DRAResourceHealth/NodeWatchResources"],
        ),
        (
            dra_health_v1_pb2_grpc.DRAResourceHealthStub,
            ["/v1.DRAResourceHealth/NodeWatchResources"],
        ),
        (
            podresources_v1_pb2_grpc.PodResourcesListerStub,
            [
                "/v1.PodResourcesLister/List",
                "/v1.PodResourcesLister/GetAllocatableResources",
                "/v1.PodResourcesLister/Get",
            ],
        ),
    ],
)
def test_method_paths_match_kubelet(stub: Any, paths: list[str]) -> None:
    channel = _RecordingChannel()
    stub(channel)
    assert channel.paths == paths


def test_health_stream_is_server_streaming() -> None:
    for pb in (dra_health_v1alpha1_pb2, dra_health_v1_pb2):
        method = pb.DESCRIPTOR.services_by_name["DRAResourceHealth"].methods_by_name[
            "NodeWatchResources"
        ]
        assert method.server_streaming and not method.client_streaming


_STR, _BOOL, _INT64, _MSG, _ENUM = (
    FieldDescriptor.TYPE_STRING,
    FieldDescriptor.TYPE_BOOL,
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_MESSAGE,
    FieldDescriptor.TYPE_ENUM,
)

_REG_FIELDS = [
    ("PluginInfo", "type", 1, _STR),
    ("PluginInfo", "name", 2, _STR),
    ("PluginInfo", "endpoint", 3, _STR),
    ("PluginInfo", "supported_versions", 4, _STR),
    ("RegistrationStatus", "plugin_registered", 1, _BOOL),
    ("RegistrationStatus", "error", 2, _STR),
]
_DRA_FIELDS = [
    ("NodePrepareResourcesRequest", "claims", 1, _MSG),
    ("NodePrepareResourcesResponse", "claims", 1, _MSG),
    ("NodePrepareResourceResponse", "devices", 1, _MSG),
    ("NodePrepareResourceResponse", "error", 2, _STR),
    ("Device", "request_names", 1, _STR),
    ("Device", "pool_name", 2, _STR),
    ("Device", "device_name", 3, _STR),
    ("Device", "cdi_device_ids", 4, _STR),
    ("NodeUnprepareResourcesRequest", "claims", 1, _MSG),
    ("NodeUnprepareResourcesResponse", "claims", 1, _MSG),
    ("NodeUnprepareResourceResponse", "error", 1, _STR),
    ("Claim", "namespace", 1, _STR),
    ("Claim", "uid", 2, _STR),
    ("Claim", "name", 3, _STR),
]
_HEALTH_FIELDS = [
    ("NodeWatchResourcesResponse", "devices", 1, _MSG),
    ("DeviceIdentifier", "pool_name", 1, _STR),
    ("DeviceIdentifier", "device_name", 2, _STR),
    ("DeviceHealth", "device", 1, _MSG),
    ("DeviceHealth", "health", 2, _ENUM),
    ("DeviceHealth", "last_updated_time", 3, _INT64),
    ("DeviceHealth", "health_check_timeout_seconds", 4, _INT64),
    ("DeviceHealth", "message", 5, _STR),
]
# What reconciliation reads from the kubelet's PodResources API (k8s.io/kubelet v1).
_POD_RESOURCES_FIELDS = [
    ("ListPodResourcesResponse", "pod_resources", 1, _MSG),
    ("PodResources", "name", 1, _STR),
    ("PodResources", "namespace", 2, _STR),
    ("PodResources", "containers", 3, _MSG),
    ("ContainerResources", "name", 1, _STR),
    ("ContainerResources", "dynamic_resources", 5, _MSG),
    ("DynamicResource", "claim_name", 2, _STR),
    ("DynamicResource", "claim_namespace", 3, _STR),
    ("DynamicResource", "claim_resources", 4, _MSG),
    ("ClaimResource", "cdi_devices", 1, _MSG),
    ("ClaimResource", "driver_name", 2, _STR),
    ("ClaimResource", "pool_name", 3, _STR),
    ("ClaimResource", "device_name", 4, _STR),
    ("ClaimResource", "share_id", 5, _STR),
    ("CDIDevice", "name", 1, _STR),
]
_CASES = (
    [(pluginregistration_v1_pb2, *f) for f in _REG_FIELDS]
    + [(pb, *f) for pb in (dra_v1_pb2, dra_v1beta1_pb2) for f in _DRA_FIELDS]
    + [(pb, *f) for pb in (dra_health_v1alpha1_pb2, dra_health_v1_pb2) for f in _HEALTH_FIELDS]
    + [(podresources_v1_pb2, *f) for f in _POD_RESOURCES_FIELDS]
)


@pytest.mark.parametrize(
    ("pb", "message", "name", "number", "kind"),
    _CASES,
    ids=[f"{c[0].DESCRIPTOR.package}.{c[1]}.{c[2]}" for c in _CASES],
)
def test_field_numbers(pb: Any, message: str, name: str, number: int, kind: int) -> None:
    field = pb.DESCRIPTOR.message_types_by_name[message].fields_by_name[name]
    assert (field.number, field.type) == (number, kind)


def test_response_maps_are_keyed_by_claim_uid_string() -> None:
    for pb in (dra_v1_pb2, dra_v1beta1_pb2):
        for message in ("NodePrepareResourcesResponse", "NodeUnprepareResourcesResponse"):
            entry = pb.DESCRIPTOR.message_types_by_name[message].fields_by_name["claims"]
            assert entry.message_type.GetOptions().map_entry
            assert entry.message_type.fields_by_name["key"].type == _STR


def test_share_id_is_optional_in_v1_and_absent_in_v1beta1() -> None:
    share_id = dra_v1_pb2.Device.DESCRIPTOR.fields_by_name["share_id"]
    assert (share_id.number, share_id.type, share_id.has_presence) == (5, _STR, True)
    assert "share_id" not in dra_v1beta1_pb2.Device.DESCRIPTOR.fields_by_name


def test_health_status_enum_values() -> None:
    for pb in (dra_health_v1alpha1_pb2, dra_health_v1_pb2):
        values = {v.name: v.number for v in pb.DESCRIPTOR.enum_types_by_name["HealthStatus"].values}
        assert values == {"UNKNOWN": 0, "HEALTHY": 1, "UNHEALTHY": 2}
