"""simdra's test harness, for a driver's own CI: one DRA node on one machine, no cluster.

Needs the `demo` extra (`pip install 'simdra[demo]'`: cel-python, kubernetes-validate).

Example::

    from simdra.testing import LocalCluster, exactly

    # workdir: a short directory (unix socket paths are at most 107 bytes)
    with LocalCluster(workdir, driver_name="crypto.example.com") as cluster:
        cluster.start_plugin(profile="crypto", extra=["--kind", "crypto_driver:CryptoKind"])
        cluster.create_claim("c1", exactly("crypto", "crypto.crypto.example.com"))
        cluster.allocate("c1")                      # as the scheduler would
        answer = cluster.prepare("c1")              # NodePrepareResources, real gRPC

The DeviceClasses of simdra's kinds, and of the kinds `start_plugin` registers with
`--kind`, are created for you. `LocalCluster` runs the plugin as a real process against
an API server stand-in (the real REST API and its validation), a kubelet emulator
(registration and the DRA gRPC services over real unix sockets) and an allocator that
plays the scheduler (DeviceClass selectors in Kubernetes' CEL environment, shared
capacity).
"""

from __future__ import annotations

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
