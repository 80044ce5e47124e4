"""Extended resources backed by a DeviceClass (spec.extendedResourceName, feature gate
DRAExtendedResource) on the real node: a pod that asks for `example.com/gpu` in its
limits, and never names a claim, gets a device through DRA."""

from __future__ import annotations

from .. import realnode
from ..realnode import Kube, allocated, cdi_files, container, spec_file, unit_env

RESOURCE = "example.com/gpu"


def test_node_extended_resource_gets_a_device(kube: Kube) -> None:
    """limits {example.com/gpu: 1}: the scheduler makes a claim for it from the class,
    the kubelet has the plugin prepare it, and the container sees that device's env."""
    realnode.require_feature(kube.cp, "DRAExtendedResource")
    with kube.device_class("gpu-ext.dra.example.com", "gpu", extendedResourceName=RESOURCE):
        kube.create_pod("ext-gpu", [container("app", limits={RESOURCE: "1"})])
        pod = kube.wait_running("ext-gpu")
        status = pod["status"].get("extendedResourceClaimStatus")
        assert status, f"pod ext-gpu runs without an extended-resource claim: {pod['status']}"
        [mapping] = status["requestMappings"]
        assert (mapping["containerName"], mapping["resourceName"]) == ("app", RESOURCE)
        claim = kube.read_claim(status["resourceClaimName"])
        [result] = allocated(claim)
        assert result["request"] == mapping["requestName"]
        assert spec_file(claim) in cdi_files()
        [unit] = unit_env(kube.env("ext-gpu")).values()
        assert (unit["NAME"], unit["TYPE"]) == (result["device"], "gpu")
        assert unit["CLAIM_UID"] == claim["metadata"]["uid"]
