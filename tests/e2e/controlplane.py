"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager
and kube-scheduler, built from their source modules by tests/e2e/build.sh.

    with ControlPlane(bin_dir, workdir) as cp:
        api = cp.api_client()          # the official client, as cluster-admin
        cp.kubeconfig                  # a kubeconfig file for kubectl and the plugin

Everything lives in `workdir` (certificates, etcd data, one log file per component) and
listens on 127.0.0.1 ports chosen free at start. stop() ends every process it started,
also after a failed start; each failure names the component and its log file.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client, config

# DRA capabilities simdra publishes or exercises, by the gate that guards them. A gate
# that a release does not know (graduated and removed) is left out for that release.
DRA_GATES = (
    "DRAConsumableCapacity",
    "DRAPartitionableDevices",
    "DRADeviceTaints",
    "DRADeviceTaintRules",
    "DRAAdminAccess",
    "DRAResourceClaimDeviceStatus",
    "DRAPrioritizedList",
    "DRADeviceBindingConditions",
    "DRAExtendedResource",
    "ResourceHealthStatus",
    "DRAWorkloadResourceClaims",
    "GenericWorkload",
    "DRAListTypeAttributes",
    "DRAFractionalCapacityRange",
    "DRANodeAllocatableResources",
    # 1.37 alphas: optional node operations (needs NodeDeclaredFeatures, GA and locked on
    # in 1.37), compatibility groups, partition types (needs DRAResourcePoolStatus).
    "DRAOptionalNodeOperations",
    "DRADeviceCompatibilityGroups",
    "DRAResourcePoolStatus",
    "DRAPartitionableDevicesType",
)
# Gates set only where the gate that needs them is known too: GenericWorkload (the
# Workload/PodGroup API, alpha in 1.35) is on for DRAWorkloadResourceClaims (1.36+), not
# for a release that could only change how it schedules without any claim using it.
ONLY_WITH = {"GenericWorkload": "DRAWorkloadResourceClaims"}
# The scheduling.k8s.io version that serves PodGroups, by minor release: off by default
# (alpha, then beta), so --runtime-config names it where DRAWorkloadResourceClaims is on.
WORKLOAD_API = {36: "scheduling.k8s.io/v1alpha2", 37: "scheduling.k8s.io/v1beta1"}
# Every served version of resource.k8s.io: v1alpha3 carries DeviceTaintRule while the
# rule is alpha; the betas are what older clients and kubectl explain read.
RUNTIME_CONFIG = ",".join(
    f"resource.k8s.io/{v}=true" for v in ("v1alpha3", "v1beta1", "v1beta2")
)
ADMIN_TOKEN = "simdra-e2e-admin-token"  # loopback only; the cluster lives for one run
NODE_TOKEN_PREFIX = "simdra-e2e-node-token-"
START_TIMEOUT = 90.0
# How long the scheduler waits in PreBind for a device's binding conditions before it gives
# up and clears the allocation (DynamicResourcesArgs.bindingTimeout; default 600 s). Short
# here so that the timeout scenario (node_scenarios/test_binding_conditions.py) sees the
# scheduler give up within a minute; still ten times the few seconds a scenario that plays
# the attaching controller takes to set the condition after BindingConditionsPending.
BINDING_TIMEOUT_SECONDS = 30


class ComponentError(RuntimeError):
    """A control-plane component failed to start or died; names it and its log."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Component:
    """One process of the cluster and where its output goes."""

    name: str
    args: list[str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self, env: dict[str, str] | None = None) -> None:
        """Start it with its output appended to its log file."""
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.args, stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,  # a Ctrl-C of the test run reaches us, not them
            )
        record_pid(self.process.pid)

    def alive(self) -> bool:
        """True while the process runs."""
        return self.process is not None and self.process.poll() is None

    def check(self) -> None:
        """Raise ComponentError if the process has exited."""
        if self.process is not None and self.process.poll() is not None:
            raise ComponentError(
                f"{self.name} exited with {self.process.returncode}; log: {self.log_path}\n"
                + tail(self.log_path)
            )

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `timeout` seconds."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def record_pid(pid: int) -> None:
    """Note a started process in $SIMDRA_E2E_LOGS/pids, so hack/e2e.sh can end it even
    when pytest itself was killed."""
    logs = os.environ.get("SIMDRA_E2E_LOGS")
    if logs:
        with open(Path(logs) / "pids", "a") as pids:
            pids.write(f"{pid}\n")


def tail(path: Path, lines: int = 15) -> str:
    """The last lines of a log file (for one-glance failure messages)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@dataclass
class Certificates:
    """A throwaway CA, the API server's serving certificate and the service-account keys."""

    directory: Path
    ca_cert: Path = field(init=False)
    ca_key: Path = field(init=False)
    serving_cert: Path = field(init=False)
    serving_key: Path = field(init=False)
    sa_key: Path = field(init=False)
    sa_pub: Path = field(init=False)

    def __post_init__(self) -> None:
        d = self.directory
        self.ca_cert, self.ca_key = d / "ca.crt", d / "ca.key"
        self.serving_cert, self.serving_key = d / "apiserver.crt", d / "apiserver.key"
        self.sa_key, self.sa_pub = d / "sa.key", d / "sa.pub"

    def create(self) -> None:
        """Write every file with openssl (the machine's own; nothing is downloaded)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                 "-subj", "/CN=simdra-e2e-ca", "-keyout", self.ca_key, "-out", self.ca_cert)
        csr = self.directory / "apiserver.csr"
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=kube-apiserver",
                 "-keyout", self.serving_key, "-out", csr)
        ext = self.directory / "apiserver.ext"
        ext.write_text(
            "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,"
            "DNS:kubernetes.default,DNS:kubernetes.default.svc\n"
            "extendedKeyUsage=serverAuth\n"
        )
        _openssl("x509", "-req", "-in", csr, "-CA", self.ca_cert, "-CAkey", self.ca_key,
                 "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", self.serving_cert)
        _openssl("genrsa", "-out", self.sa_key, "2048")
        _openssl("rsa", "-in", self.sa_key, "-pubout", "-out", self.sa_pub)


def _openssl(*args: object) -> None:
    result = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True)
    if result.returncode != 0:
        raise ComponentError(f"openssl {args[0]} failed: {result.stderr.strip()[-300:]}")


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler. A context manager."""

    def __init__(
        self,
        bin_dir: str | Path,
        workdir: str | Path,
        *,
        node_names: Sequence[str] = (),
        extra_gates: Sequence[str] = (),
        client_qps: float | None = None,
    ) -> None:
        self.bin = Path(bin_dir)
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.certs = Certificates(self.workdir / "pki")
        self.node_names = list(node_names)  # each gets a bearer token for a kubelet
        self.extra_gates = list(extra_gates)
        # The controller-manager's and scheduler's API client rate (their defaults, 20 and
        # 50 QPS, are what the e2e runs; a scale bench raises them, as scale clusters do).
        self.client_qps = client_qps
        self.components: list[Component] = []
        self.port = 0
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self._api_client: client.ApiClient | None = None
        self._features: dict[str, bool] | None = None
        self._etcd_url = ""
        # The scheduler's bindingTimeout when this run set it (see _scheduler_config).
        self.binding_timeout: int | None = None

    # -- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def kubectl_path(self) -> Path:
        """kubectl of this very release (tests/e2e/build.sh builds it with the rest)."""
        path = self.bin / "kubectl"
        if not path.exists():
            raise ComponentError(f"no kubectl in {self.bin}: rerun tests/e2e/build.sh")
        return path

    @property
    def server(self) -> str:
        """The API server's URL."""
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the four components in order, each waited for until it answers."""
        self.certs.create()
        self._write_tokens()
        gates = self.feature_gates()
        self._etcd_url = self._start_etcd()
        self.port = free_port()
        self._start_apiserver(self._etcd_url, gates)
        self.write_kubeconfig(self.kubeconfig, token=ADMIN_TOKEN, user="admin")
        self._start_controller_manager(gates)
        self._start_scheduler(gates)

    def upgrade(self, bin_dir: str | Path) -> None:
        """Replace the API server, controller-manager and scheduler by another release's,
        in place: the same etcd, port, certificates and tokens, so clients (kubelets,
        plugins, their kubeconfigs and service-account tokens) reconnect to the new
        release as they would after a real control-plane upgrade. Gates follow the new
        release; logs go on in the same files."""
        kept = [c for c in self.components if c.name == "etcd"]
        for component in reversed(self.components):
            if component not in kept:
                component.stop()
        self.components = kept
        # The clients stay: the same URL and token, they reconnect as any client would.
        self.bin, self._features = Path(bin_dir), None
        gates = self.feature_gates()
        self._start_apiserver(self._etcd_url, gates)
        self._start_controller_manager(gates)
        self._start_scheduler(gates)

    def stop(self) -> None:
        """Stop every component (newest first) and close the client."""
        if self._api_client is not None:
            self._api_client.close()
            self._api_client = None
        for component in reversed(self.components):
            component.stop()

    def check(self) -> None:
        """Raise ComponentError naming the first component that died."""
        for component in self.components:
            component.check()

    # -- configuration ------------------------------------------------------------------

    def version(self) -> str:
        """The Kubernetes version of these binaries, e.g. 'v1.36.3'."""
        stamp = self.bin / "VERSION"
        if stamp.exists():
            return stamp.read_text().strip()
        out = subprocess.run([self.bin / "kube-apiserver", "--version"],
                             capture_output=True, text=True).stdout
        return out.split()[-1]

    def minor(self) -> int:
        """The minor release of these binaries (36 for v1.36.3)."""
        return int(self.version().lstrip("v").split(".")[1])

    def known_gates(self) -> set[str]:
        """The gates of DRA_GATES this release lets us set: its --help lists the alpha and
        beta ones; a GA gate is locked on and absent there (see features())."""
        help_text = subprocess.run([self.bin / "kube-apiserver", "--help"],
                                   capture_output=True, text=True).stdout
        known = {g for g in DRA_GATES + tuple(self.extra_gates) if f"{g}=true|false" in help_text}
        return {g for g in known if ONLY_WITH.get(g, g) in known}

    def runtime_config(self, gates: str) -> str:
        """--runtime-config: RUNTIME_CONFIG, and the PodGroup API where `gates` (the
        --feature-gates value) turns DRAWorkloadResourceClaims on."""
        if "DRAWorkloadResourceClaims=true" not in gates.split(","):
            return RUNTIME_CONFIG
        newest = WORKLOAD_API[max(WORKLOAD_API)]
        return f"{RUNTIME_CONFIG},{WORKLOAD_API.get(self.minor(), newest)}=true"

    def features(self) -> dict[str, bool]:
        """Every feature gate of the running API server, GA included, and whether it is on:
        the release's own list, from its `kubernetes_feature_enabled` metric."""
        if self._features is None:
            request = urllib.request.Request(
                f"{self.server}/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
            context = ssl.create_default_context(cafile=str(self.certs.ca_cert))
            with urllib.request.urlopen(request, timeout=10, context=context) as response:
                text = response.read().decode()
            self._features = parse_feature_metric(text)
        return dict(self._features)

    def feature_gates(self) -> str:
        """The --feature-gates value every component gets."""
        return ",".join(f"{g}=true" for g in sorted(self.known_gates()))

    def _write_tokens(self) -> None:
        lines = [f"{ADMIN_TOKEN},admin,admin-uid,system:masters"]
        lines += [
            f"{NODE_TOKEN_PREFIX}{n},system:node:{n},node-{n},system:nodes"
            for n in self.node_names
        ]
        (self.workdir / "tokens.csv").write_text("\n".join(lines) + "\n")

    def write_kubeconfig(self, path: Path, *, token: str, user: str) -> Path:
        """A kubeconfig for this cluster that authenticates with a bearer token."""
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: e2e\n  cluster:\n    server: {self.server}\n"
            f"    certificate-authority: {self.certs.ca_cert}\n"
            f"users:\n- name: {user}\n  user:\n    token: {token}\n"
            f"contexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: {user}\n"
            "current-context: e2e\n"
        )
        path.chmod(0o600)
        return path

    def node_kubeconfig(self, node_name: str) -> Path:
        """A kubeconfig for a kubelet of `node_name` (one of node_names)."""
        return self.write_kubeconfig(self.workdir / f"kubelet-{node_name}.kubeconfig",
                                     token=f"{NODE_TOKEN_PREFIX}{node_name}",
                                     user=f"system:node:{node_name}")

    # -- components ---------------------------------------------------------------------

    def _component(self, name: str, args: list[str]) -> Component:
        component = Component(name, [str(self.bin / name), *args],
                              self.workdir / f"{name}.log")
        self.components.append(component)
        component.start()
        return component

    def _start_etcd(self) -> str:
        client_port, peer_port = free_port(), free_port()
        url, peer = f"http://127.0.0.1:{client_port}", f"http://127.0.0.1:{peer_port}"
        etcd = self._component("etcd", [
            "--name", "e2e",
            "--data-dir", str(self.workdir / "etcd"),
            "--listen-client-urls", url, "--advertise-client-urls", url,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"e2e={peer}",
            "--unsafe-no-fsync",  # a cluster for one test run: speed over durability
            "--log-level", "warn",
        ])
        self._wait(etcd, lambda: _http_ok(f"{url}/health"), "etcd /health")
        return url

    def _start_apiserver(self, etcd_url: str, gates: str) -> None:
        c = self.certs
        apiserver = self._component("kube-apiserver", [
            "--etcd-servers", etcd_url,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            # 1.37 refuses a loopback advertise address for the `kubernetes` Service's
            # endpoints; the node reaches the server through its own DNAT (node.py).
            "--endpoint-reconciler-type", "none",
            "--secure-port", str(self.port),
            "--tls-cert-file", str(c.serving_cert), "--tls-private-key-file", str(c.serving_key),
            "--client-ca-file", str(c.ca_cert),
            "--token-auth-file", str(self.workdir / "tokens.csv"),
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-account-key-file", str(c.sa_pub),
            "--service-account-signing-key-file", str(c.sa_key),
            "--service-cluster-ip-range", "10.96.0.0/16",
            "--authorization-mode", "Node,RBAC",
            "--enable-admission-plugins", "NodeRestriction",
            "--feature-gates", gates,
            "--runtime-config", self.runtime_config(gates),
            "--allow-privileged=true",
            "--profiling=false",
            "--v=1",
        ])
        self._wait(apiserver, self._apiserver_ready, "kube-apiserver /readyz")

    def _start_controller_manager(self, gates: str) -> None:
        c, port = self.certs, free_port()
        cm = self._component("kube-controller-manager", [
            "--kubeconfig", str(self.kubeconfig),
            "--authentication-kubeconfig", str(self.kubeconfig),
            "--authorization-kubeconfig", str(self.kubeconfig),
            "--bind-address", "127.0.0.1", "--secure-port", str(port),
            "--leader-elect=false",
            "--service-account-private-key-file", str(c.sa_key),
            "--root-ca-file", str(c.ca_cert),
            "--feature-gates", gates,
            "--controllers", "*",
            *self._qps_flags(),
            "--v=1",
        ])
        self._wait(cm, lambda: _https_ok(f"https://127.0.0.1:{port}/healthz"),
                   "kube-controller-manager /healthz")

    def _scheduler_config(self) -> list[str]:
        """`--config` with DynamicResources' bindingTimeout set to BINDING_TIMEOUT_SECONDS
        where the release takes it (1.35+, with DRADeviceBindingConditions and
        DRAResourceClaimDeviceStatus on; it refuses the field otherwise); nothing else."""
        features = self.features()  # the API server's: the same release and gates
        if self.minor() < 35 or not (features.get("DRADeviceBindingConditions")
                                     and features.get("DRAResourceClaimDeviceStatus")):
            return []
        path = self.workdir / "kube-scheduler-config.yaml"
        path.write_text(json.dumps({  # JSON is YAML
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            # With --config the scheduler ignores --kubeconfig: it goes here.
            "clientConnection": {"kubeconfig": str(self.kubeconfig),
                                 **({"qps": self.client_qps, "burst": int(2 * self.client_qps)}
                                    if self.client_qps else {})},
            "leaderElection": {"leaderElect": False},
            "profiles": [{
                "schedulerName": "default-scheduler",
                "pluginConfig": [{
                    "name": "DynamicResources",
                    "args": {"bindingTimeout": f"{BINDING_TIMEOUT_SECONDS}s"},
                }],
            }],
        }, indent=2))
        self.binding_timeout = BINDING_TIMEOUT_SECONDS
        return ["--config", str(path)]

    def _qps_flags(self) -> list[str]:
        """--kube-api-qps/--kube-api-burst where client_qps is set."""
        if not self.client_qps:
            return []
        return ["--kube-api-qps", f"{self.client_qps:g}",
                "--kube-api-burst", str(int(2 * self.client_qps))]

    def _start_scheduler(self, gates: str) -> None:
        port = free_port()
        config = self._scheduler_config()
        scheduler = self._component("kube-scheduler", [
            *(config or self._qps_flags()),  # with --config, its clientConnection has them
            "--kubeconfig", str(self.kubeconfig),
            "--authentication-kubeconfig", str(self.kubeconfig),
            "--authorization-kubeconfig", str(self.kubeconfig),
            "--bind-address", "127.0.0.1", "--secure-port", str(port),
            "--leader-elect=false",
            "--feature-gates", gates,
            # Its allocator says why a device was passed over from -v=7 on.
            f"--v={os.environ.get('SIMDRA_E2E_SCHEDULER_V', '2')}",
        ])
        self._wait(scheduler, lambda: _https_ok(f"https://127.0.0.1:{port}/healthz"),
                   "kube-scheduler /healthz")

    # -- waiting ------------------------------------------------------------------------

    def _wait(self, component: Component, ready: object, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            component.check()
            try:
                if callable(ready) and ready():
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise ComponentError(
                    f"{component.name}: no {what} after {START_TIMEOUT:.0f}s; "
                    f"log: {component.log_path}\n{tail(component.log_path)}"
                )
            time.sleep(0.2)

    def _apiserver_ready(self) -> bool:
        request = urllib.request.Request(
            f"{self.server}/readyz", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
        context = ssl.create_default_context(cafile=str(self.certs.ca_cert))
        try:
            with urllib.request.urlopen(request, timeout=2, context=context) as response:
                return bool(response.status == 200)
        except (OSError, ValueError):
            return False

    # -- clients ------------------------------------------------------------------------

    def api_client(self) -> client.ApiClient:
        """The official client, authenticated as cluster-admin (one per control plane)."""
        if self._api_client is None:
            self._api_client = config.new_client_from_config(str(self.kubeconfig))
        return self._api_client

    def kubectl(self, *args: str, check: bool = True,
                input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster."""
        result = subprocess.run(
            [str(self.kubectl_path), "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True, text=True, input=input, timeout=120,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
        return result


def parse_feature_metric(text: str) -> dict[str, bool]:
    """Gate name -> enabled, from Prometheus lines such as
    `kubernetes_feature_enabled{name="DRAAdminAccess",stage=""} 1`."""
    found = {}
    for line in text.splitlines():
        if line.startswith("kubernetes_feature_enabled{"):
            labels, _, value = line.rpartition("} ")
            name = labels.split('name="', 1)[1].split('"', 1)[0]
            found[name] = value.strip() == "1"
    return found


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False


def _https_ok(url: str) -> bool:
    context = ssl._create_unverified_context()  # a self-signed health port on loopback
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False
