"""The kubelet's PodResources API as reconciliation reads it, over a real unix socket:
the pods listed (the plugin's own among them), this driver's devices (shares included),
when an answer can prove a record unused, and one clear line when the kubelet cannot be
asked."""

from __future__ import annotations

import grpc
import pytest

from simdra._driver.claims.reconcile.plan import KubeletUnavailable, KubeletUsage, RecordedClaim
from simdra._driver.claims.types import ClaimRef
from simdra._driver.kubelet.pod_resources import PodResourcesUsage
from simdra._driver.testing.pod_resources import PLUGIN_POD, ClaimUse, PodClaims, PodResourcesServer

DRIVER = "gpu.example.com"
SHARE = "11111111-1111-4111-8111-111111111111"


def test_lists_every_pod_and_this_drivers_devices(tmp_path) -> None:
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
    assert usage.pods == {PLUGIN_POD, ("team-a", "trainer"), ("team-b", "idle")}
    assert usage.devices == {("node-a", "gpu-0", None), ("node-a", "nic-0", SHARE)}
    assert usage.lists_dra and usage.unknown(PLUGIN_POD) is None


def test_a_node_without_claims_lists_no_dra_resources(tmp_path) -> None:
    with PodResourcesServer(tmp_path / "pr.sock") as kubelet:
        kubelet.set_pods([PodClaims("team-b", "idle")])
        usage = PodResourcesUsage(kubelet.socket_path, DRIVER).usage()
    assert (usage.devices, usage.lists_dra) == (frozenset(), False)
    assert "lists no DRA resources" in (usage.unknown(PLUGIN_POD) or "")


def _answer(tmp_path, pods, plugin_pod=PLUGIN_POD) -> KubeletUsage:
    with PodResourcesServer(tmp_path / "pr.sock", plugin_pod=plugin_pod) as kubelet:
        kubelet.set_pods(pods)
        return PodResourcesUsage(kubelet.socket_path, DRIVER).usage()


def test_an_answer_without_the_plugins_own_pod_cannot_free(tmp_path) -> None:
    # A kubelet not synced since its restart, or another node's: it may list DRA
    # resources, yet not the pod this plugin runs in.
    using = [PodClaims("team-a", "trainer", [
        ClaimUse("team-a", "gpus", [(DRIVER, "node-a", "gpu-0", None)])])]
    usage = _answer(tmp_path, using, plugin_pod=None)
    assert f"does not list this plugin's pod {PLUGIN_POD[0]}/{PLUGIN_POD[1]}" in (
        usage.unknown(PLUGIN_POD) or "")
    assert "not known" in (usage.unknown(None) or "")  # no identity: never
    # Name and namespace both count: the same name in another namespace is not it.
    other = _answer(tmp_path, [*using, PodClaims("default", PLUGIN_POD[1])], plugin_pod=None)
    assert other.unknown(PLUGIN_POD) is not None


def _record(*devices: tuple[str, str, str | None]) -> RecordedClaim:
    return RecordedClaim(ClaimRef("team-a", "net", "uid-1"), frozenset(devices), 0.0)


@pytest.mark.parametrize(("listed", "in_use"), [
    (("node-a", "nic-0", SHARE), True),  # the record's share
    (("node-a", "nic-0", None), True),  # a kubelet that names no share: maybe ours
    (("node-a", "nic-0", "22222222-2222-4222-8222-222222222222"), False),  # another share
    (("node-a", "nic-1", SHARE), False),
])
def test_a_record_is_in_use_when_its_devices_are_listed_under_any_claim(
        tmp_path, listed, in_use) -> None:
    pool, device, share = listed
    usage = _answer(tmp_path, [PodClaims("team-b", "pod", [
        ClaimUse("team-b", "another-name", [(DRIVER, pool, device, share)])])])
    assert usage.uses(_record(("node-a", "nic-0", SHARE))) is in_use


def test_a_claims_name_alone_does_not_make_a_record_in_use(tmp_path) -> None:
    # The kubelet lists a claim's devices once prepared: the same name without the
    # record's devices is another claim made again under that name.
    usage = _answer(tmp_path, [PodClaims("team-a", "pod", [
        ClaimUse("team-a", "net", [(DRIVER, "node-a", "nic-1", None)]),
        ClaimUse("team-a", "net-pending", [])])])
    assert not usage.uses(_record(("node-a", "nic-0", None)))


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
