"""simdra's test harness: one DRA node on one machine, no cluster and no hardware.

What a CI pipeline or a driver author imports (everything else here is internal)::

    from simdra._driver.testing import LocalCluster, exactly

    with LocalCluster(tmp_path) as cluster:
        cluster.start_plugin(profile="gpu,nic", num_devices=2)
        cluster.create_claim("c1", exactly("gpu", "gpu.dra.example.com"))
        cluster.allocate("c1")
        answer = cluster.prepare("c1")

`LocalCluster` runs the plugin as a real process against `APIServer` (an API server
stand-in speaking the real REST API), `KubeletEmulator` (the kubelet's plugin watcher and
DRA calls over the real unix sockets) and `Allocator` (the scheduler's structured
allocation, with Kubernetes' CEL environment). ./hack/e2e.sh checks the stand-ins
against the real kube-apiserver and kube-scheduler.
"""

from simdra._driver.testing.allocation.builders import claim, device_class, exactly
from simdra._driver.testing.apiserver import APIServer
from simdra._driver.testing.cluster import LocalCluster, PluginProcess, wait_until
from simdra._driver.testing.kubelet import KubeletEmulator, KubeletError
from simdra._driver.testing.scheduler import AllocationError, Allocator, allocate

__all__ = [
    "APIServer",
    "AllocationError",
    "Allocator",
    "KubeletEmulator",
    "KubeletError",
    "LocalCluster",
    "PluginProcess",
    "allocate",
    "claim",
    "device_class",
    "exactly",
    "wait_until",
]
