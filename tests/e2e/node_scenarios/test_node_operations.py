"""Optional node operations (KEP-5945, Kubernetes 1.37, gate DRAOptionalNodeOperations) on
the real node: the fake overlay's license seats need no node-side work, so their slice
says `skipNodeOperations: ["*"]`; the real scheduler copies that into the allocation and
the real kubelet runs the pod without calling the plugin at all, while a GPU claim of
the same run, and a claim that takes a seat next to a GPU, are prepared as ever."""

from __future__ import annotations

from ..realnode import (
    HOLD,
    Kube,
    PluginDeployment,
    allocated,
    exact_request,
    node_slices,
    require_feature,
    unit_env,
)

LICENSE = "license.dra.example.com"
GPU = "gpu.dra.example.com"
GATE = "DRAOptionalNodeOperations"


def _seat_slices(plugin: PluginDeployment) -> list[dict[str, object]]:
    return [s for s in node_slices(plugin.cp, plugin.node.name)
            if any(d["name"].startswith("license-") for d in s["spec"].get("devices") or [])]


def test_node_license_seat_runs_without_the_plugin(kube: Kube, plugin: PluginDeployment) -> None:
    """A pod with a seat claim runs, and the plugin never saw that claim (no prepare, no
    log line naming its UID); a GPU pod of the same run is prepared as always."""
    require_feature(kube.cp, GATE)
    seat_slices = _seat_slices(plugin)
    assert seat_slices, "no slice publishes the license seats"
    for s in seat_slices:
        assert s["spec"].get("skipNodeOperations") == ["*"], s["spec"].get("skipNodeOperations")
        assert all(d["name"].startswith("license-") for d in s["spec"]["devices"]), \
            "a slice that skips node operations holds a device that needs them"
    gpu_slices = [s for s in node_slices(plugin.cp, plugin.node.name)
                  if any(d["name"].startswith("gpu-") for d in s["spec"].get("devices") or [])]
    assert gpu_slices and not any(s["spec"].get("skipNodeOperations") for s in gpu_slices)

    kube.template("seat", LICENSE)
    kube.pod("seat-pod", "seat", command=f"echo seated; {HOLD}")
    kube.template("gpu-one", GPU)
    kube.pod("gpu-pod", "gpu-one")
    seat_claim = kube.claim_of(kube.wait_running("seat-pod"))
    gpu_claim = kube.claim_of(kube.wait_running("gpu-pod"))

    [seat] = allocated(seat_claim)
    assert seat["device"].startswith("license-")
    assert seat.get("skipNodeOperations") == ["*"], seat
    assert "seated" in kube.log("seat-pod")
    [gpu] = allocated(gpu_claim)
    assert not gpu.get("skipNodeOperations"), gpu
    [unit] = unit_env(kube.env("gpu-pod")).values()
    assert unit["NAME"] == gpu["device"]

    assert plugin.prepares_of(gpu_claim) == 1
    assert plugin.prepares_of(seat_claim) == 0
    assert seat_claim["metadata"]["uid"] not in plugin.logs(), \
        "the plugin was called for a claim whose devices all skip node operations"
    # Unprepare is skipped too: the pod goes, and still nothing reached the plugin.
    kube.delete_pod("seat-pod")
    assert seat_claim["metadata"]["uid"] not in plugin.logs()


def test_node_seat_next_to_a_gpu_is_prepared(kube: Kube, plugin: PluginDeployment) -> None:
    """One claim with a seat and a GPU: not every device of the driver skips, so the
    kubelet calls the plugin, which prepares both and the container sees both."""
    require_feature(kube.cp, GATE)
    kube.claim_template("seat-and-gpu", [exact_request("seat", LICENSE),
                                         exact_request("gpu", GPU)])
    kube.pod("mixed-pod", "seat-and-gpu")
    claim = kube.claim_of(kube.wait_running("mixed-pod"))
    results = {r["request"]: r for r in allocated(claim)}
    assert results["seat"].get("skipNodeOperations") == ["*"]
    assert not results["gpu"].get("skipNodeOperations")
    units = unit_env(kube.env("mixed-pod"))
    assert {u["REQUEST"]: u["NAME"] for u in units.values()} == {
        r: results[r]["device"] for r in ("seat", "gpu")}
    assert plugin.prepares_of(claim) == 1
