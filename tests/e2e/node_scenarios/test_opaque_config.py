"""Opaque driver config on the real node: what the DeviceClass and the claim configure
both reach the container, the claim's fields winning where both set one
(simdra/_driver/claims/plan/config.py)."""

from __future__ import annotations

from .. import realnode
from ..realnode import DRIVER, JSON, Kube, allocated, container, request, unit_env

API_VERSION = "simdra.dra.example.com/v1alpha1"


def _nic_config(**fields: object) -> JSON:
    """An opaque NicConfig entry of this driver."""
    parameters = {"apiVersion": API_VERSION, "kind": "NicConfig", **fields}
    return {"opaque": {"driver": DRIVER, "parameters": parameters}}


def test_node_class_and_claim_config_reach_the_container(kube: Kube) -> None:
    """The class sets mtu and vlan, the claim vlan and rateLimit: the container gets the
    class's mtu, the claim's vlan (the claim wins) and the claim's rate limit."""
    with kube.device_class(
        "nic-jumbo.dra.example.com", "nic", config=[_nic_config(mtu=9000, vlan=100)]
    ):
        bandwidth = realnode.incidental_capacity(kube.cp, "1G")
        # The rate limit must fit the share: the 1G asked for, or the NIC's default 1M.
        rate, rate_value = ("500M", "500000000") if bandwidth else ("500k", "500000")
        kube.claim(
            "configured-nic",
            [request("nic", "nic-jumbo.dra.example.com", capacity=bandwidth)],
            config=[{"requests": ["nic"], **_nic_config(vlan=200, rateLimit=rate)}],
        )
        kube.create_pod(
            "configured",
            [container("app", [{"name": "nic"}])],
            [{"name": "nic", "resourceClaimName": "configured-nic"}],
        )
        kube.wait_running("configured")
        claim = kube.read_claim("configured-nic")
        [result] = allocated(claim)
        sources = [c["source"] for c in claim["status"]["allocation"]["devices"]["config"]]
        assert sources == ["FromClass", "FromClaim"]
        [unit] = unit_env(kube.env("configured")).values()
        assert unit["NAME"] == result["device"]
        assert unit["NIC_MTU"] == "9000"  # the class alone sets it
        assert unit["NIC_VLAN"] == "200"  # both set it: the claim's entry wins
        assert (unit["NIC_RATE_LIMIT"], unit["NIC_RATE_LIMIT_VALUE"]) == (rate, rate_value)
