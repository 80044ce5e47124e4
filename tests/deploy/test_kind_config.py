"""deploy/kind/cluster.yaml gives a kind cluster what simdra's devices need: the feature
gates the fake-inventory devices use (alpha before Kubernetes 1.36), CDI in containerd,
and more than one worker (pool names per node)."""

from __future__ import annotations

import tomllib

import yaml

from tests.deploy.layout import DEPLOY, one

KIND_CONFIG = DEPLOY / "kind" / "cluster.yaml"


def kind_config() -> dict:
    return yaml.safe_load(KIND_CONFIG.read_text())


def gates_the_devices_use(devices: list[dict]) -> set[str]:
    """The DRA feature gates the API server needs to keep these device fields."""
    gates = {"DRADeviceTaints"}  # the plugin taints unhealthy devices
    if any(d.get("allowMultipleAllocations") for d in devices):
        gates.add("DRAConsumableCapacity")
    if any(d.get("consumesCounters") for d in devices):
        gates.add("DRAPartitionableDevices")
    return gates


def test_kind_config_is_a_kind_cluster_with_several_workers():
    config = kind_config()

    assert (config["kind"], config["apiVersion"]) == ("Cluster", "kind.x-k8s.io/v1alpha4")
    roles = [node["role"] for node in config["nodes"]]
    assert roles.count("control-plane") == 1 and roles.count("worker") >= 2


def test_kind_config_turns_on_every_gate_the_inventory_devices_use(rendered):
    config_map = one(rendered["overlays/fake-inventory"], "ConfigMap", "simdra-inventory")
    inventory = yaml.safe_load(config_map["data"]["inventory.yaml"])
    devices = [device for pool in inventory["pools"] for device in pool["devices"]]

    gates = kind_config()["featureGates"]
    assert gates_the_devices_use(devices) == {"DRAConsumableCapacity",
                                              "DRAPartitionableDevices", "DRADeviceTaints"}
    assert {name for name, on in gates.items() if on} == gates_the_devices_use(devices)


def test_kind_config_enables_cdi_in_containerd():
    (patch,) = kind_config()["containerdConfigPatches"]

    assert tomllib.loads(patch)["plugins"]["io.containerd.grpc.v1.cri"]["enable_cdi"] is True
