"""Fractional capacity ranges (KEP-5075, DRAFractionalCapacityRange, beta in 1.37) on
the real node: the `gpu-fractional` GPUs publish `compute` 1 with a request policy of
min 100m, step 50m, max 1; the real API server accepts it, the real scheduler rounds a
share of 120m up to 150m and writes that as the claim's consumedCapacity, the plugin
prepares it, and the container learns its fraction. A share that rounds above the
maximum, or one more than a GPU holds, stays Pending. Skipped, naming the gate, where a
release lacks it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from simdra import parse_quantity
from simdra._driver.devices.request_policy import consumed_text
from simdra._driver.kinds.gpu import GPU_FRACTION, GPU_FRACTION_POLICY

from ..realnode import (
    Kube,
    PluginDeployment,
    allocated,
    exact_request,
    require_feature,
    slice_device,
    unit_env,
    wait,
)

pytestmark = pytest.mark.overlay("fake fractional")

GPU = "gpu.dra.example.com"
GPU_0 = 'device.attributes["dra.example.com"].index == 0'
COMPUTE = {"value": GPU_FRACTION, "requestPolicy": GPU_FRACTION_POLICY}
FRACTIONAL = {"containers": [{"name": "plugin", "env": [
    {"name": "DEVICE_PROFILE", "value": "gpu-fractional"},
    {"name": "NUM_DEVICES", "value": "2"}]}]}


@pytest.fixture(scope="module")
def fractional(plugin: PluginDeployment) -> Iterator[None]:
    """The DaemonSet publishing GPUs shared in milli-unit fractions."""
    require_feature(plugin.cp, "DRAFractionalCapacityRange")
    require_feature(plugin.cp, "DRAConsumableCapacity")
    with plugin.using("fake", pod_patch=FRACTIONAL):
        def published() -> bool:
            gpu = slice_device(plugin.cp, plugin.node.name, "gpu-1")
            return bool(gpu) and "compute" in gpu.get("capacity", {}) and \
                parse_quantity(gpu["capacity"]["compute"]["value"]) == 1

        wait("fractional gpu-1 published", published, 90, plugin.node.kubelet_log,
             plugin.describe)
        yield


def _share(kube: Kube, name: str, compute: str) -> None:
    kube.claim_template(name, [exact_request("gpu", GPU, GPU_0,
                                             capacity={"requests": {"compute": compute}})])
    kube.pod(f"{name}-pod", name)


def test_node_fractional_share_is_rounded_prepared_and_seen(fractional: None, kube: Kube):
    """120m rounds up to 150m (min 100m + one step of 50m), as the driver predicts."""
    _share(kube, "tenth", "120m")
    claim = kube.claim_of(kube.wait_running("tenth-pod"))
    [result] = allocated(claim)
    consumed = result["consumedCapacity"]["compute"]
    assert parse_quantity(consumed) == parse_quantity("150m"), result
    assert consumed == consumed_text(COMPUTE, "120m"), result
    [unit] = unit_env(kube.env("tenth-pod")).values()
    assert (unit["NAME"], unit["CAPACITY_COMPUTE"]) == ("gpu-0", "150m")


def test_node_fractions_fill_one_gpu_and_no_more(fractional: None, kube: Kube):
    """550m and 450m fill gpu-0 exactly; a 50m share (consuming the 100m minimum) does
    not fit next to them."""
    _share(kube, "big", "550m")
    _share(kube, "small", "450m")
    kube.wait_running("big-pod")
    kube.wait_running("small-pod")
    _share(kube, "extra", "50m")
    kube.wait_unschedulable("extra-pod")


def test_node_share_rounded_above_the_maximum_stays_pending(fractional: None, kube: Kube):
    """1010m rounds up to 1050m, above the policy's max of 1: no GPU fits."""
    _share(kube, "too-much", "1010m")
    kube.wait_unschedulable("too-much-pod")
