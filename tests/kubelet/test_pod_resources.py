"""The kubelet's PodResources API as reconciliation reads it, over a real unix socket:
the claims every container lists, this driver's devices (shares included), and one
clear line when the kubelet cannot be asked."""

from __future__ import annotations

import grpc
import pytest

from driver.claims.kubelet_usage import KubeletUnavailable
from driver.kubelet.pod_resources import PodResourcesUsage
from driver.testing.pod_resources import ClaimUse, PodClaims, PodResourcesServer

DRIVER = "gpu.example.com"
SHARE = "11111111-1111-4111-8111-111111111111"


def test_lists_the_claims_of_every_pod_and_this_drivers_devices(tmp_path) -> None:
    with PodResourcesServer(tmp_path / "pr.sock") as kubelet:
        kubelet.set_pods([
            PodClaims("team-a", "trainer", [
                ClaimUse("team-a", "gpus", [(DRIVER, "node-a", "gpu-0", None)]),
                ClaimUse("team-a", "net", [(DRIVER, "node-a", "nic-0", SHARE),
                                           ("other.example.com", "p", "x-1", None)]),
            ]),
            PodClaims("team-b", "idle"),
        ])
        usage = PodResourcesUsage(kubelet.socket_path, DRIVER).usage()
    assert usage.claims == {("team-a", "gpus"), ("team-a", "net")}
    assert usage.devices == {("node-a", "gpu-0", None), ("node-a", "nic-0", SHARE)}
    assert usage.lists_dra


def test_a_node_without_claims_lists_no_dra_resources(tmp_path) -> None:
    with PodResourcesServer(tmp_path / "pr.sock") as kubelet:
        kubelet.set_pods([PodClaims("team-b", "idle")])
        usage = PodResourcesUsage(kubelet.socket_path, DRIVER).usage()
    assert (usage.claims, usage.devices, usage.lists_dra) == (frozenset(), frozenset(), False)


@pytest.mark.parametrize("where", ["missing socket", "kubelet failing"])
def test_a_kubelet_that_cannot_be_asked_is_one_line_naming_the_socket(tmp_path, where) -> None:
    with PodResourcesServer(tmp_path / "pr.sock") as kubelet:
        kubelet.fail_with(grpc.StatusCode.PERMISSION_DENIED)
        path = kubelet.socket_path if where == "kubelet failing" else str(tmp_path / "no.sock")
        with pytest.raises(KubeletUnavailable) as info:
            PodResourcesUsage(path, DRIVER, timeout_s=2).usage()
    text = str(info.value)
    assert path in text and "\n" not in text and len(text) < 600
    expected = "PERMISSION_DENIED" if where == "kubelet failing" else "UNAVAILABLE"
    assert expected in text
