"""A node of the real control plane whose kubelet is our emulator: a Node object kept alive
by a Lease heartbeat, `simdra run` as a host process publishing to the real API server, and
the kubelet emulator preparing the real claims of the pods the real scheduler bound here.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import threading
import urllib.request
from pathlib import Path
from typing import Any

from kubernetes import client

from simdra._driver.claims.types import ClaimRef
from simdra._driver.kubelet.sockets import registration_socket_path
from simdra._driver.testing.cluster import PluginProcess, complete_pools, wait_until
from simdra._driver.testing.kubelet import KubeletEmulator

from .controlplane import ControlPlane, free_port, record_pid

JSON = dict[str, Any]
DRIVER = "dra.example.com"
LEASE_NAMESPACE = "kube-node-lease"
HEARTBEAT = 10.0  # seconds; the node lifecycle controller waits 50 s before it gives up
# Emulated nodes run no pods: the taint keeps DaemonSets (our own, in the node scenarios)
# off them; the e2e's workloads tolerate it.
EMULATED_TAINT = {"key": "simdra.e2e/emulated", "value": "true", "effect": "NoSchedule"}


class HostNode:
    """One emulated node: its Node object, heartbeat, plugin process and kubelet emulator."""

    def __init__(self, cp: ControlPlane, name: str, workdir: Path, profile: str,
                 num_devices: int, extra_args: tuple[str, ...] = (),
                 kubeconfig: Path | None = None) -> None:
        self.cp, self.name, self.workdir = cp, name, workdir
        self.kubeconfig = kubeconfig or cp.kubeconfig  # what the plugin authenticates with
        self.profile, self.num_devices, self.extra_args = profile, num_devices, extra_args
        self.registry = workdir / "registry"
        self.plugins = workdir / "plugins"
        self.cdi_root = workdir / "cdi"
        self.metrics_port = free_port()
        self.core = client.CoreV1Api(cp.api_client())
        self.coordination = client.CoordinationV1Api(cp.api_client())
        self.resource = client.ResourceV1Api(cp.api_client())
        self.kubelet = KubeletEmulator(str(self.registry))
        self.plugin: PluginProcess | None = None
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Register the Node, keep it Ready, start the plugin and wait for registration
        with the emulator and complete pools in the real API server."""
        self.register()
        self.start_plugin()

    def register(self) -> None:
        """Create the Node and keep it Ready with a heartbeat, until it is schedulable."""
        for path in (self.registry, self.plugins, self.cdi_root):
            path.mkdir(parents=True, exist_ok=True)
        self._register_node()
        self._heartbeat = threading.Thread(target=self._beat, name=f"lease-{self.name}",
                                           daemon=True)
        self._heartbeat.start()
        wait_until(self._ready, 60, f"node {self.name} Ready (not-ready taint removed)")

    def start_plugin(self) -> PluginProcess:
        """Start `simdra run` for this node and wait until it is registered and published."""
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NODE_NAME")}
        args = [
            "--node-name", self.name, "--driver-name", DRIVER,
            "--kubeconfig", str(self.kubeconfig),
            "--kubelet-registrar-directory-path", str(self.registry),
            "--kubelet-plugins-directory-path", str(self.plugins),
            "--cdi-root", str(self.cdi_root),
            "--device-profile", self.profile, "--num-devices", str(self.num_devices),
            "--metrics-port", str(self.metrics_port), "--rescan-interval", "1",
            *self.extra_args,
        ]
        self.plugin = PluginProcess(args, env, self.workdir / "plugin.log")
        record_pid(self.plugin.pid)
        self.plugin.registration_socket = Path(
            registration_socket_path(str(self.registry), DRIVER, ""))
        wait_until(self._registered, 60, f"plugin of {self.name} registered")
        wait_until(self.pools_complete, 60, f"pools of {self.name} published")
        return self.plugin

    def stop(self) -> None:
        """Stop the heartbeat, the plugin and the emulator."""
        self._stop.set()
        if self.plugin is not None and self.plugin.process.poll() is None:
            self.plugin.stop()
        self.kubelet.close()

    def _registered(self) -> bool:
        assert self.plugin is not None
        if self.plugin.process.poll() is not None:
            raise AssertionError(f"plugin of {self.name} exited "
                                 f"{self.plugin.process.returncode}; log: {self.plugin.log_path}")
        self.kubelet.sync()
        return bool(self.kubelet.instances)

    # -- the Node -----------------------------------------------------------------------

    def _register_node(self) -> None:
        self.core.create_node({
            "metadata": {"name": self.name, "labels": {
                "kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux",
                "simdra.e2e/emulated": "true"}},
            "spec": {"taints": [EMULATED_TAINT]},
        })
        self._set_ready()

    def _set_ready(self) -> None:
        now = _now()
        status = {
            "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "simdra e2e emulated kubelet",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "nodeInfo": {"kubeletVersion": self.cp.version()},
        }
        self.core.patch_node_status(self.name, {"status": status})

    def _beat(self) -> None:
        lease = {"metadata": {"name": self.name, "namespace": LEASE_NAMESPACE},
                 "spec": {"holderIdentity": self.name, "leaseDurationSeconds": 40}}
        while not self._stop.is_set():
            try:
                body = {**lease, "spec": {**lease["spec"], "renewTime": _micro_now()}}
                try:
                    self.coordination.replace_namespaced_lease(self.name, LEASE_NAMESPACE,
                                                               self._with_version(body))
                except client.ApiException as err:
                    if err.status != 404:
                        raise
                    self.coordination.create_namespaced_lease(LEASE_NAMESPACE, body)
                self._set_ready()
            except Exception:  # a missed beat is retried; a dead node fails its own test
                pass
            self._stop.wait(HEARTBEAT)

    def _with_version(self, body: JSON) -> JSON:
        current = self.coordination.read_namespaced_lease(self.name, LEASE_NAMESPACE)
        body = dict(body)
        body["metadata"] = {**body["metadata"],
                            "resourceVersion": current.metadata.resource_version}
        return body

    def _ready(self) -> bool:
        node = self.core.read_node(self.name)
        return [t.key for t in node.spec.taints or []] == [EMULATED_TAINT["key"]]

    # -- slices -------------------------------------------------------------------------

    def slices(self) -> list[JSON]:
        """Our driver's ResourceSlices for this node, as the real API server stores them."""
        raw = self.resource.list_resource_slice(
            field_selector=f"spec.nodeName={self.name},spec.driver={DRIVER}",
            _preload_content=False)
        return list(json.loads(raw.data)["items"])

    def pools_complete(self) -> dict[str, list[JSON]]:
        """Pool -> slices of its newest generation, when every pool is complete; else {}."""
        slices = self.slices()
        complete = complete_pools(slices)
        pools = {s["spec"]["pool"]["name"] for s in slices}
        return complete if set(complete) == pools else {}

    def metrics(self) -> dict[str, float]:
        """The plugin's Prometheus samples, 'name{labels}' -> value."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        samples = {}
        for line in text.splitlines():
            match = re.match(r"^([a-zA-Z_:][\w:]*(?:\{[^}]*\})?)\s+(\S+)$", line)
            if match:
                samples[match.group(1)] = float(match.group(2))
        return samples

    # -- acting as the kubelet ------------------------------------------------------------

    def pod_claims(self, namespace: str, pod_name: str) -> list[ClaimRef]:
        """The claims of a pod bound here, as the kubelet finds them (names from the pod's
        status for templates, UIDs from the claims)."""
        pod = self.core.read_namespaced_pod(pod_name, namespace)
        assert pod.spec.node_name == self.name, f"pod {pod_name} is on {pod.spec.node_name}"
        names = {s.name: s.resource_claim_name
                 for s in (pod.status.resource_claim_statuses or [])}
        refs = []
        for entry in pod.spec.resource_claims or []:
            claim_name = entry.resource_claim_name or names.get(entry.name)
            assert claim_name, f"pod {pod_name}: claim {entry.name} not created yet"
            claim = self.resource.read_namespaced_resource_claim(claim_name, namespace)
            refs.append(ClaimRef(namespace, claim_name, claim.metadata.uid))
        return refs

    def prepare_pod(self, namespace: str, pod_name: str) -> dict[str, JSON]:
        """NodePrepareResources for a bound pod's claims; raises naming any claim error."""
        refs = self.pod_claims(namespace, pod_name)
        answer = self.kubelet.prepare(refs, driver_name=DRIVER)
        errors = {uid: a["error"] for uid, a in answer.items() if a["error"]}
        assert not errors, f"prepare of pod {namespace}/{pod_name} failed: {errors}"
        return answer

    def unprepare_pod(self, refs: list[ClaimRef]) -> None:
        """NodeUnprepareResources for these claims; raises naming any claim error."""
        answer = self.kubelet.unprepare(refs, driver_name=DRIVER)
        errors = {uid: a["error"] for uid, a in answer.items() if a["error"]}
        assert not errors, f"unprepare failed: {errors}"

    def cdi_specs(self) -> dict[str, JSON]:
        """CDI spec file name -> content, in this node's CDI root."""
        return {p.name: json.loads(p.read_text()) for p in sorted(self.cdi_root.iterdir())
                if p.suffix in (".json", ".yaml")}


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

