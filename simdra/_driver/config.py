"""Plugin configuration: one frozen value built from flags and environment variables."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Config:
    """Everything `simdra run` needs to know, validated once at start."""

    node_name: str
    driver_name: str = "dra.example.com"
    kubeconfig: str | None = None  # None: in-cluster config
    registrar_dir: Path = Path("/var/lib/kubelet/plugins_registry")
    plugins_dir: Path = Path("/var/lib/kubelet/plugins")
    cdi_root: Path = Path("/var/run/cdi")
    device_backend: str = "fake"
    kinds: tuple[str, ...] = ()  # --kind: package.module:Class of kinds besides simdra's
    device_profile: str = "gpu"
    sysfs_root: Path = Path("/sys")
    dev_root: Path = Path("/dev")
    proc_root: Path | None = None  # None: /proc when sysfs_root is /sys, else no routes
    sysfs_allow: tuple[str, ...] = ()  # normalised selectors, e.g. "vendor:0x1a03"
    sysfs_deny: tuple[str, ...] = ()
    num_devices: int = 8
    pod_uid: str | None = None
    # The plugin's own pod: free-mode reconciliation frees only on a kubelet answer that
    # lists it (simdra._driver.claims.reconcile.plan); None outside a pod: it never frees.
    pod_namespace: str | None = None
    pod_name: str | None = None
    healthcheck_port: int = -1
    metrics_port: int = -1
    rescan_interval: float = 10.0
    reconcile_interval: float = 60.0  # 0: records are never checked against the API
    reconcile_grace: float = 300.0
    reconcile_mode: str = "report"  # or "free" (see simdra._driver.claims.reconcile.reconciler)
    pod_resources_socket: Path = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
    claim_status: bool = False
    log_format: str = "text"
    verbosity: int = 0
    device_metadata: bool = False  # KEP-5304 files, as the Go helper's EnableDeviceMetadata
    list_attributes: bool = False  # publish list attributes (DRAListTypeAttributes) as lists
    sysfs_cpus: bool = False  # the sysfs backend also publishes CPUs (simdra._driver.kinds.cpu)

    @property
    def data_dir(self) -> Path:
        """The plugin's own directory: DRA socket and durable claim state."""
        return self.plugins_dir / self.driver_name
