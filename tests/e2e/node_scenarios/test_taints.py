"""Device taints on the real node: a DeviceTaintRule with NoExecute evicts the running
pod that uses the device, a claim tolerating the taint still gets it, and the
plugin's own NoSchedule taint on an unhealthy device (`simdra fault`) keeps new claims
that do not tolerate it off the device."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator

import pytest

from .. import releases
from ..realnode import (
    DATA_DIR,
    DRIVER,
    Kube,
    PluginDeployment,
    allocated,
    exact_request,
    require_feature,
    served_version,
    slice_device,
    unit_env,
    wait,
)

GPU = "gpu.dra.example.com"
RULE = "simdra-e2e-maintenance"
MAINTENANCE = "simdra.e2e/maintenance"


def gpu(index: int) -> str:
    return f'device.attributes["dra.example.com"].index == {index}'


def _rule_version(kube: Kube) -> str:
    """The DeviceTaintRule API version this cluster serves (skips where there is none)."""
    require_feature(kube.cp, "DRADeviceTaints")
    version = served_version(kube.cp, "resource.k8s.io", "devicetaintrules")
    if version is None:
        pytest.skip(
            f"Kubernetes {kube.cp.version()} serves no DeviceTaintRule "
            "(DRADeviceTaintRules off, or only in an API version this cluster does not enable)"
        )
    return version


@contextlib.contextmanager
def _maintenance_rule(kube: Kube, version: str, pool: str) -> Iterator[None]:
    """A NoExecute DeviceTaintRule on gpu-6 while the block runs."""
    rule = {
        "apiVersion": version,
        "kind": "DeviceTaintRule",
        "metadata": {"name": RULE},
        "spec": {
            "deviceSelector": {"driver": DRIVER, "pool": pool, "device": "gpu-6"},
            "taint": {"key": MAINTENANCE, "value": "true", "effect": "NoExecute"},
        },
    }
    kube.cp.kubectl("apply", "-f", "-", input=json.dumps(rule))
    try:
        yield
    finally:
        kube.cp.kubectl(
            "delete", f"devicetaintrules.{version.split('/')[1]}.resource.k8s.io", RULE,
            "--ignore-not-found",
        )


def test_node_taint_rule_evicts(kube: Kube) -> None:
    """gpu-6 in use; a NoExecute DeviceTaintRule on it evicts the pod."""
    version = _rule_version(kube)
    kube.template("gpu-6", GPU, selector=gpu(6))
    kube.pod("victim", "gpu-6")
    [held] = allocated(kube.claim_of(kube.wait_running("victim")))
    assert held["device"] == "gpu-6"
    with _maintenance_rule(kube, version, held["pool"]):
        kube.wait_gone("victim")  # evicted by the controller-manager's device taint manager


def test_node_taint_rule_toleration_admits(kube: Kube) -> None:
    """With a NoExecute DeviceTaintRule on gpu-6, a claim that tolerates the taint is
    allocated gpu-6 and its pod runs, and stays."""
    version = _rule_version(kube)
    if not releases.allocation_keeps_tolerations(kube.cp):
        pytest.skip(f"Kubernetes {kube.cp.version()}: its scheduler does not copy a "
                    "request's tolerations into the allocation (fixed in 1.35), so its "
                    "eviction controller evicts a tolerating pod too")
    pool = kube.node.name  # the fake profile's pool is named after the node
    with _maintenance_rule(kube, version, pool):
        toleration = {"key": MAINTENANCE, "operator": "Exists", "effect": "NoExecute"}
        kube.claim_template(
            "gpu-6-tolerant", [exact_request("dev", GPU, gpu(6), tolerations=[toleration])]
        )
        kube.pod("tolerant", "gpu-6-tolerant")
        claim = kube.claim_of(kube.wait_running("tolerant"))
        [result] = allocated(claim)
        assert (result["device"], result["pool"]) == ("gpu-6", pool)
        kept = [(t.get("key"), t.get("effect")) for t in result.get("tolerations") or []]
        assert kept == [(MAINTENANCE, "NoExecute")]
        [unit] = unit_env(kube.env("tolerant")).values()
        assert (unit["NAME"], unit["CLAIM_UID"]) == ("gpu-6", claim["metadata"]["uid"])
        time.sleep(5)  # the eviction controller acts within a second of the binding
        assert (kube.get_pod("tolerant") or {}).get("status", {}).get("phase") == "Running"


def test_node_unhealthy_taint_keeps_new_claims_off(kube: Kube, plugin: PluginDeployment) -> None:
    """`simdra fault gpu-4 unhealthy`: the plugin taints gpu-4 NoSchedule in its slice; a
    new claim for gpu-4 that does not tolerate it stays Pending, one that tolerates it
    runs, and after `fault reset` the first runs too."""
    require_feature(kube.cp, "DRADeviceTaints")
    plugin.exec("simdra", "fault", "--plugin-dir", DATA_DIR, "gpu-4", "unhealthy")
    try:
        taints: list[dict[str, str]] = []

        def tainted() -> bool:
            taints[:] = (slice_device(kube.cp, kube.node.name, "gpu-4") or {}).get("taints") or []
            return any(t["effect"] == "NoSchedule" for t in taints)

        wait("gpu-4 tainted NoSchedule in the node's slice", tainted, 60, kube.node.kubelet_log)
        [taint] = taints
        kube.template("gpu-4", GPU, selector=gpu(4))
        kube.pod("intolerant", "gpu-4")
        kube.wait_unschedulable("intolerant")
        toleration = {"key": taint["key"], "operator": "Exists", "effect": "NoSchedule"}
        kube.claim_template(
            "gpu-4-tolerant", [exact_request("dev", GPU, gpu(4), tolerations=[toleration])]
        )
        kube.pod("tolerant", "gpu-4-tolerant")
        [result] = allocated(kube.claim_of(kube.wait_running("tolerant")))
        assert result["device"] == "gpu-4"
        kube.delete_pod("tolerant")
    finally:
        plugin.exec("simdra", "fault", "--plugin-dir", DATA_DIR, "reset")
    # The taint was what kept it off: healthy again, gpu-4 goes to the waiting pod.
    [result] = allocated(kube.claim_of(kube.wait_running("intolerant")))
    assert result["device"] == "gpu-4"
