"""A whole DRA node on one machine: API stand-in, plugin process, kubelet emulator, allocator.

Used by simdra's integration tests, by `simdra demo`, and by driver authors' CI::

    with LocalCluster(workdir) as cluster:
        plugin = cluster.start_plugin(profile="gpu,nic", num_devices=2)
        claim = cluster.create_claim("c1", exactly("gpu", "gpu.dra.example.com"))
        cluster.allocate("c1")
        answer = cluster.prepare("c1")

The plugin runs as a real `python -m simdra run` child process, talking HTTP to the
stand-in and gRPC over unix sockets to the emulator, exactly as it would on a node. The
registered kinds' DeviceClasses are there as deployed (`simdra._driver.testing.kind_classes`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client

from simdra._driver.claims.types import ClaimRef
from simdra._driver.devices.kind_registry import KindRegistrationError
from simdra._driver.kube import response_json
from simdra._driver.kubelet.sockets import registration_socket_path
from simdra._driver.slices.validated import INVALID_POOL
from simdra._driver.testing.allocation.builders import claim as claim_json
from simdra._driver.testing.apiserver import APIServer
from simdra._driver.testing.cdi_env import claim_device_env
from simdra._driver.testing.kind_classes import create_device_classes, kind_values
from simdra._driver.testing.kubelet import KubeletEmulator
from simdra._driver.testing.pod_resources import PLUGIN_POD, PodResourcesServer
from simdra._driver.testing.scheduler import Allocator

JSON = dict[str, Any]
T = TypeVar("T")
DRIVER = "dra.example.com"


class PluginProcess:
    """A `simdra run` child process and where its files live."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path) -> None:
        self.args = args
        self.log_path = log_path
        self.registration_socket: Path | None = None
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "simdra", "run", *args],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    @property
    def pid(self) -> int:
        """Process id of the plugin."""
        return self.process.pid

    def log(self) -> str:
        """Everything the plugin wrote to stdout and stderr so far."""
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        """Send `sig` and wait for exit; returns the exit code (negative: killed by signal)."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise RuntimeError(
                f"plugin pid {self.pid} ignored {signal.Signals(sig).name}; log:\n{self.log()}"
            ) from None


class LocalCluster:
    """One node of a DRA cluster, in one directory. A context manager. A test reaches
    `api` (the API server stand-in: `put_object`, `get_object`, `delete_object`, e.g. its
    own DeviceClass), `api_client` (the official client's ApiClient, once entered),
    `kubelet` (the kubelet emulator), `cdi_root`, `workdir`, `node_name`, `driver_name`."""

    def __init__(
        self,
        workdir: str | Path,
        *,
        node_name: str = "node-1",
        driver_name: str = DRIVER,
        apiserver: APIServer | None = None,
        kinds: Sequence[str] = (),
    ) -> None:
        self.workdir = Path(workdir)
        self.node_name = node_name
        self.driver_name = driver_name
        self.kinds = tuple(kinds)  # package.module:Class: their classes exist from the start
        self.registrar_dir = self.workdir / "registry"
        self.plugins_dir = self.workdir / "plugins"
        self.cdi_root = self.workdir / "cdi"
        self.api = apiserver or APIServer()
        self._plugins: list[PluginProcess] = []
        self.kubelet: KubeletEmulator | None = None
        # The kubelet's PodResources API: which pods use which claims, as the test says
        # (`pod_resources.set_pods`); the plugin asks it before freeing a leaked claim.
        self.pod_resources: PodResourcesServer | None = None
        self.api_client: client.ApiClient | None = None

    # -- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> LocalCluster:
        try:
            self.start()
        except BaseException:
            # `with` calls __exit__ only after __enter__ returned: without this, a failed
            # start would leave the stand-in's threads running and the process hanging.
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start the API stand-in, create the Node and the kinds' DeviceClasses."""
        for path in (self.registrar_dir, self.plugins_dir, self.cdi_root):
            path.mkdir(parents=True, exist_ok=True)
        self.api.start()
        self.kubeconfig = self.api.write_kubeconfig(self.workdir / "kubeconfig")
        self.api_client = self.api.api_client()
        self.core = client.CoreV1Api(self.api_client)
        self.resource = client.ResourceV1Api(self.api_client)
        # Plain dicts as bodies: the client turns them into its models (pydantic), though
        # its annotations name only the models.
        self.core.create_node({"metadata": {"name": self.node_name}})  # type: ignore[arg-type]
        self.create_device_classes(self.kinds)
        self.kubelet = KubeletEmulator(str(self.registrar_dir))
        self.pod_resources = PodResourcesServer(self.pod_resources_socket)
        self.allocator = Allocator(self.api_client, node_name=self.node_name)

    def stop(self) -> None:
        """Stop every plugin started here, the emulator and the API stand-in."""
        for plugin in self._plugins:
            if plugin.process.poll() is None:
                plugin.stop(signal.SIGKILL)
        if self.kubelet is not None:
            self.kubelet.close()
        if self.pod_resources is not None:
            self.pod_resources.stop()
        if self.api_client is not None:
            self.api_client.close()
        self.api.stop()

    def create_device_classes(self, kinds: Sequence[str] = ()) -> list[str]:
        """Create the missing DeviceClasses of simdra's kinds and `kinds`; their names."""
        return create_device_classes(self.api, self.resource, self.driver_name, kinds)

    # -- the plugin ---------------------------------------------------------------------

    @property
    def pod_resources_socket(self) -> Path:
        """Where this node's kubelet serves its PodResources API."""
        return self.workdir / "pod-resources.sock"

    @property
    def data_dir(self) -> Path:
        """The plugin's data directory (DRA socket, claim records)."""
        return self.plugins_dir / self.driver_name

    def plugin_args(
        self, *, profile: str = "gpu", num_devices: int = 8, extra: Sequence[str] = ()
    ) -> list[str]:
        """The `simdra run` arguments this node's plugin gets."""
        return [
            "--node-name",
            self.node_name,
            "--driver-name",
            self.driver_name,
            "--kubeconfig",
            str(self.kubeconfig),
            "--kubelet-registrar-directory-path",
            str(self.registrar_dir),
            "--kubelet-plugins-directory-path",
            str(self.plugins_dir),
            "--cdi-root",
            str(self.cdi_root),
            "--pod-resources-socket",
            str(self.pod_resources_socket),
            # The pod the emulated kubelet's PodResources API lists as the plugin's own.
            "--pod-namespace",
            PLUGIN_POD[0],
            "--pod-name",
            PLUGIN_POD[1],
            "--device-profile",
            profile,
            "--num-devices",
            str(num_devices),
            *extra,
        ]

    def start_plugin(
        self,
        *,
        profile: str = "gpu",
        num_devices: int = 8,
        pod_uid: str | None = None,
        extra: Sequence[str] = (),
        wait: bool = True,
        timeout: float = 60.0,
    ) -> PluginProcess:
        """Start `simdra run` for this node (with `--pod-uid` when given: rolling-update
        socket names); by default wait until this very process is registered with the
        kubelet emulator and its pools are completely published (the DeviceClasses of
        the kinds `--kind` names in `extra` first)."""
        if kinds := kind_values(extra):
            with contextlib.suppress(KindRegistrationError):  # the plugin itself says so
                self.create_device_classes(kinds)
        env = {k: v for k, v in os.environ.items() if k not in _PLUGIN_ENV}
        args = self.plugin_args(profile=profile, num_devices=num_devices, extra=extra)
        if pod_uid:
            args += ["--pod-uid", pod_uid]
        socket_path = self.registration_socket(pod_uid)
        # A socket left by a killed predecessor must not count as this plugin's.
        leftover = _identity(socket_path)
        plugin = PluginProcess(args, env, self.workdir / f"plugin-{len(self._plugins)}.log")
        plugin.registration_socket = socket_path
        self._plugins.append(plugin)
        if wait:
            self.wait_ready(plugin, timeout, not_socket=leftover)
        return plugin

    def registration_socket(self, pod_uid: str | None = None) -> Path:
        """Where a plugin started with this pod UID creates its registration socket."""
        return Path(registration_socket_path(str(self.registrar_dir), self.driver_name,
                                             pod_uid or ""))

    def wait_ready(
        self,
        plugin: PluginProcess,
        timeout: float = 60.0,
        not_socket: tuple[int, int] | None = None,
    ) -> None:
        """Wait until the plugin says it started (the kubelet's sockets serve before
        start-up recovery is done), the kubelet emulator registered its own registration
        socket (not `not_socket`, a stale one left by a predecessor) and its pools are
        completely published."""
        assert self.kubelet is not None
        deadline = time.monotonic() + timeout
        while True:
            if plugin.process.poll() is not None:
                raise RuntimeError(
                    f"plugin exited with {plugin.process.returncode}; log:\n{plugin.log()}"
                )
            if self.api.internal_errors:  # a stand-in bug: waiting longer cannot help
                raise RuntimeError(f"API stand-in failed: {self.api.internal_errors[0]}")
            log = plugin.log()
            if INVALID_POOL in log:  # the plugin keeps serving; its pool never appears
                raise RuntimeError(f"plugin published an invalid pool; log:\n{log}")
            started = " started: " in log
            if started and self._registered(plugin, not_socket) and self.complete_pools():
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"plugin not ready in {timeout}s; log:\n{plugin.log()}")
            time.sleep(0.05)

    def _registered(self, plugin: PluginProcess, not_socket: tuple[int, int] | None) -> bool:
        assert self.kubelet is not None
        assert plugin.registration_socket is not None  # start_plugin sets it
        identity = _identity(plugin.registration_socket)
        if identity is None or identity == not_socket:
            return False
        self.kubelet.sync()
        return any(i.registration_socket == str(plugin.registration_socket)
                   for i in self.kubelet.instances)

    # -- the API ------------------------------------------------------------------------

    def slices(self) -> list[JSON]:
        """Our driver's ResourceSlices on this node, as stored, sorted by name."""
        return [
            s
            for s in self.api.objects("resourceslices")
            if s["spec"].get("driver") == self.driver_name
            and s["spec"].get("nodeName") == self.node_name
        ]

    def complete_pools(self) -> dict[str, list[JSON]]:
        """Pool name -> slices, for pools whose newest generation is completely published."""
        return complete_pools(self.slices())

    def published_devices(self) -> dict[str, JSON]:
        """Device name -> device JSON over all complete pools."""
        return {
            d["name"]: d
            for items in self.complete_pools().values()
            for s in items
            for d in s["spec"].get("devices", [])
        }

    def create_claim(
        self,
        name: str,
        *requests: JSON,
        namespace: str = "default",
        config: list[JSON] | None = None,
    ) -> JSON:
        """Create a ResourceClaim with these requests (`simdra.testing.exactly` builds one)."""
        body = claim_json(name, *requests, namespace=namespace, config=config)
        body["metadata"].pop("uid")  # the server assigns it
        response = self.resource.create_namespaced_resource_claim(
            namespace, body, _preload_content=False  # type: ignore[arg-type]  # a dict: see start()
        )
        created: JSON = response_json(response)
        return created

    def allocate(self, name: str, namespace: str = "default") -> JSON:
        """Allocate the claim on this node and reserve it for a pod, as the scheduler does."""
        return self.allocator.allocate(
            namespace,
            name,
            pod_name=f"pod-{name}",
            pod_uid=f"pod-uid-{name}",
            node_name=self.node_name,
        )

    def claim_ref(self, name: str, namespace: str = "default") -> ClaimRef:
        """The (namespace, name, uid) the kubelet would send for a claim."""
        stored = self.api.get_object("resourceclaims", name, namespace)
        if stored is None:
            raise KeyError(f"claim {namespace}/{name} does not exist")
        return ClaimRef(namespace, name, stored["metadata"]["uid"])

    # -- the kubelet --------------------------------------------------------------------

    def prepare(self, *names: str, version: str | None = None) -> dict[str, JSON]:
        """NodePrepareResources for these claims through the kubelet emulator: claim UID
        -> {"devices": [...], "error": str}, each device a dict of request_names,
        pool_name, device_name, cdi_device_ids and share_id (None when unset)."""
        assert self.kubelet is not None
        return self.kubelet.prepare(
            [self.claim_ref(n) for n in names], driver_name=self.driver_name, version=version
        )

    def device_env(self, claim_uid: str) -> dict[str, dict[str, str]]:
        """The env a container of a prepared claim gets, by device: device name ->
        {KEY: value} of its SIMDRA_DEVICE_<ID>_<KEY> variables (NAME, CAPACITY_..., the
        kind's keys); {} before the claim is prepared."""
        return claim_device_env(self.cdi_root, claim_uid)

    def unprepare(self, *refs: ClaimRef, version: str | None = None) -> dict[str, JSON]:
        """NodeUnprepareResources for these claims through the kubelet emulator."""
        assert self.kubelet is not None
        return self.kubelet.unprepare(list(refs), driver_name=self.driver_name, version=version)


def complete_pools(slices: Iterable[JSON]) -> dict[str, list[JSON]]:
    """Pool name -> its slices of the newest generation, for the pools whose newest
    generation is completely published (as many slices as resourceSliceCount says), as
    a scheduler sees them."""
    by_pool: dict[str, list[JSON]] = {}
    for item in slices:
        by_pool.setdefault(item["spec"]["pool"]["name"], []).append(item)
    complete = {}
    for pool, items in by_pool.items():
        newest = max(s["spec"]["pool"]["generation"] for s in items)
        current = [s for s in items if s["spec"]["pool"]["generation"] == newest]
        if len(current) == current[0]["spec"]["pool"]["resourceSliceCount"]:
            complete[pool] = current
    return complete


def wait_until(predicate: Callable[[], T], timeout: float = 15.0,
               what: str = "condition") -> T:
    """Poll `predicate` until it returns something truthy and return that; AssertionError
    naming `what` after `timeout` seconds (for tests and demos)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_mtime_ns


# Settings of the calling environment that must not leak into the plugin under test.
_PLUGIN_ENV = frozenset({
    "NODE_NAME", "DRIVER_NAME", "KINDS", "KUBECONFIG", "KUBELET_REGISTRAR_DIRECTORY_PATH",
    "KUBELET_PLUGINS_DIRECTORY_PATH", "CDI_ROOT", "DEVICE_BACKEND", "DEVICE_PROFILE",
    "NUM_DEVICES", "POD_UID", "HEALTHCHECK_PORT", "METRICS_PORT", "SYSFS_ROOT", "DEV_ROOT",
    "PROC_ROOT", "SYSFS_ALLOW", "SYSFS_DENY", "DEVICE_METADATA", "CLAIM_STATUS",
    "POD_NAMESPACE", "POD_NAME",
})
