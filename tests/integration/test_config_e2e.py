"""Opaque device configuration end to end: DeviceClass and claim config
(`simdra.dra.example.com/v1alpha1`), copied into the allocation by the allocator, read
and applied by the plugin process, visible to the workload in the CDI env."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simdra._driver.claims.plan.cdi import ENV_PREFIX, ID_LENGTH
from simdra._driver.testing.allocation.builders import device_class, exactly, opaque_config
from simdra._driver.testing.cluster import LocalCluster

DRIVER = "dra.example.com"
API_VERSION = "simdra.dra.example.com/v1alpha1"
NIC_CLASS = "nic.dra.example.com"
GPU_CLASS = "gpu.dra.example.com"
TUNED_NIC_CLASS = "tuned-nic.dra.example.com"
BROKEN_NIC_CLASS = "broken-nic.dra.example.com"
NIC_SELECTOR = f'device.attributes["{DRIVER}"].type == "nic"'
CONFIG = "status.allocation.devices.config"


def _nic_config(**fields: Any) -> dict:
    return {"apiVersion": API_VERSION, "kind": "NicConfig", **fields}


def _gpu_config(**fields: Any) -> dict:
    return {"apiVersion": API_VERSION, "kind": "GpuConfig", **fields}


def _ours(parameters: dict, requests: list[str] | None = None) -> dict:
    return opaque_config(DRIVER, requests, **parameters)


@pytest.fixture(scope="module")
def node() -> Iterator[LocalCluster]:
    """Shared GPUs and NICs, plus a NIC class with config and one with broken config."""
    workdir = Path(tempfile.mkdtemp(dir="/tmp", prefix="sdc-"))
    with LocalCluster(workdir) as local:
        local.start_plugin(profile="gpu-shared,nic", num_devices=2)
        tuned = [
            _ours(_nic_config(mtu=1500, vlan=100)),
            # Another driver's parameters, in a shape ours would reject: not ours to read.
            opaque_config("other.example.com", apiVersion="other/v9", kind="Weird", mtu="x"),
        ]
        local.resource.create_device_class(
            device_class(TUNED_NIC_CLASS, DRIVER, selectors=(NIC_SELECTOR,), config=tuned))
        local.resource.create_device_class(
            device_class(BROKEN_NIC_CLASS, DRIVER, selectors=(NIC_SELECTOR,),
                         config=[_ours(_nic_config(mtu=100000))]))
        yield local
    shutil.rmtree(workdir, ignore_errors=True)


def _env_by_request(cluster: LocalCluster, uid: str) -> dict[str, dict[str, str]]:
    """Request name -> the env keys (without the per-device prefix) of its CDI device."""
    [spec_file] = cluster.cdi_root.glob(f"*_{uid}.json")
    found = {}
    for device in json.loads(spec_file.read_text())["devices"]:
        env = {}
        for entry in device["containerEdits"]["env"]:
            name, value = entry.split("=", 1)
            env[name[len(ENV_PREFIX) + ID_LENGTH + 1:]] = value
        found[env["REQUEST"]] = env
    return found


def _config_keys(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(("NIC_", "GPU_"))}


def _prepared(cluster: LocalCluster, name: str, *requests: dict,
              config: list[dict] | None = None) -> dict[str, dict[str, str]]:
    cluster.create_claim(name, *requests, config=config)
    cluster.allocate(name)
    ref = cluster.claim_ref(name)
    answer = cluster.prepare(name)[ref.uid]
    assert answer["error"] == ""
    env = _env_by_request(cluster, ref.uid)
    cluster.unprepare(ref)
    return env


def test_claim_config_wins_over_class_config_field_by_field(node: LocalCluster) -> None:
    env = _prepared(
        node, "tuned",
        exactly("net", TUNED_NIC_CLASS),
        config=[
            _ours(_nic_config(mtu=9000)),
            opaque_config("other.example.com", kind="NicConfig", mtu=1),  # not for us
        ],
    )

    assert _config_keys(env["net"]) == {"NIC_MTU": "9000", "NIC_VLAN": "100"}


def test_class_config_alone_configures_every_claim_of_the_class(node: LocalCluster) -> None:
    env = _prepared(node, "class-only", exactly("net", TUNED_NIC_CLASS))

    assert _config_keys(env["net"]) == {"NIC_MTU": "1500", "NIC_VLAN": "100"}


def test_config_reaches_only_the_requests_it_names(node: LocalCluster) -> None:
    env = _prepared(
        node, "per-request",
        exactly("a", NIC_CLASS, capacity={"requests": {"bandwidth": "2G"}}),
        exactly("b", NIC_CLASS),
        exactly("g", GPU_CLASS, capacity={"requests": {"memory": "16Gi"}}),
        config=[
            _ours(_nic_config(mtu=9000, rateLimit="2G"), requests=["a"]),
            _ours(_nic_config(vlan=7), requests=["b"]),
            # No requests: configures every device of its kind's type (the GPU only).
            _ours(_gpu_config(sharing={"strategy": "MPS", "mpsConfig": {
                "defaultActiveThreadPercentage": 50, "defaultPinnedMemoryLimit": "16Gi"}})),
        ],
    )

    assert _config_keys(env["a"]) == {"NIC_MTU": "9000", "NIC_RATE_LIMIT": "2G",
                                      "NIC_RATE_LIMIT_VALUE": "2000000000"}
    assert _config_keys(env["b"]) == {"NIC_VLAN": "7"}
    assert _config_keys(env["g"]) == {
        "GPU_SHARING_STRATEGY": "MPS",
        "GPU_MPS_ACTIVE_THREAD_PERCENTAGE": "50",
        "GPU_MPS_PINNED_MEMORY_LIMIT": "16Gi",
        "GPU_MPS_PINNED_MEMORY_LIMIT_VALUE": str(16 * 2**30),
    }


def test_config_for_a_request_reaches_the_subrequest_chosen_for_it(
        node: LocalCluster) -> None:
    request = {"name": "net", "firstAvailable": [
        {"name": "huge", "deviceClassName": NIC_CLASS,
         "capacity": {"requests": {"bandwidth": "20G"}}},  # more than any NIC has
        {"name": "small", "deviceClassName": NIC_CLASS,
         "capacity": {"requests": {"bandwidth": "1G"}}},
    ]}

    env = _prepared(node, "first-available", request, config=[
        _ours(_nic_config(mtu=9000), requests=["net"]),
        _ours(_nic_config(vlan=5), requests=["net/small"]),
        _ours(_nic_config(vlan=6), requests=["net/huge"]),
    ])

    assert _config_keys(env["net/small"]) == {"NIC_MTU": "9000", "NIC_VLAN": "5"}


NET_1G = exactly("net", NIC_CLASS, capacity={"requests": {"bandwidth": "1G"}})


@pytest.mark.parametrize(
    ("request_", "config", "quoted"),
    [
        pytest.param(NET_1G, [_ours(_nic_config(mut=9000))],
                     f"{CONFIG}[0].opaque.parameters.mut: unknown field (FromClaim)",
                     id="unknown-field"),
        pytest.param(NET_1G, [_ours(_nic_config(mtu=100))],
                     f"{CONFIG}[0].opaque.parameters.mtu: 100 is out of range "
                     "(must be 576 to 9216)", id="mtu-out-of-range"),
        pytest.param(NET_1G, [_ours(_nic_config(mtu="9000"))],
                     f"{CONFIG}[0].opaque.parameters.mtu: '9000' is not an integer",
                     id="mtu-not-an-integer"),
        pytest.param(NET_1G, [_ours({**_nic_config(), "apiVersion": "simdra/v9"})],
                     f"{CONFIG}[0].opaque.parameters.apiVersion: unknown version 'simdra/v9'",
                     id="unknown-version"),
        pytest.param(NET_1G, [_ours(_gpu_config(), requests=["net"])],
                     f"{CONFIG}[0].opaque.parameters.kind: GpuConfig configures devices of "
                     "type gpu, but request net got device node-1/nic-", id="kind-for-gpu"),
        pytest.param(NET_1G, [_ours(_gpu_config())],
                     f"{CONFIG}[0].opaque.parameters: kind GpuConfig configures devices of "
                     "type gpu, but the claim has none", id="kind-matches-no-device"),
        pytest.param(NET_1G, [_ours(_nic_config(rateLimit="2G"))],
                     f"{CONFIG}[0].opaque.parameters.rateLimit: 2G is more than the 1G of "
                     "bandwidth that device node-1/nic-", id="rate-limit-above-share"),
        pytest.param(exactly("net", BROKEN_NIC_CLASS), None,
                     f"{CONFIG}[0].opaque.parameters.mtu: 100000 is out of range "
                     "(must be 576 to 9216) (FromClass)", id="bad-class-config"),
    ],
)
def test_invalid_config_fails_only_its_claim_quoting_the_field_and_writes_nothing(
        node: LocalCluster, request_: dict, config: list[dict] | None, quoted: str) -> None:
    node.create_claim("bad-config", request_, config=config)
    node.allocate("bad-config")
    node.create_claim("good-neighbour", NET_1G)
    node.allocate("good-neighbour")
    bad, good = node.claim_ref("bad-config"), node.claim_ref("good-neighbour")

    answer = node.prepare("bad-config", "good-neighbour")

    assert quoted in answer[bad.uid]["error"]
    assert "invalid opaque config" in answer[bad.uid]["error"]
    assert answer[bad.uid]["devices"] == []
    assert list(node.cdi_root.glob(f"*{bad.uid}*")) == []
    assert list(node.data_dir.rglob(f"*{bad.uid}*")) == []
    assert answer[good.uid]["error"] == ""
    node.unprepare(bad, good)
    for name in ("bad-config", "good-neighbour"):
        node.resource.delete_namespaced_resource_claim(name, "default")
