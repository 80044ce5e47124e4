"""A real Kubernetes node for the e2e suite: containerd (CDI on) and the kubelet.

`Node.start()` starts containerd with a private root, state and socket, imports the
images `tests/e2e/images.sh` exported, then starts the kubelet (private root dir,
cgroupfs under a cgroup root of its own, DRA feature gates) and waits until the Node is
Ready. `Node.stop()` stops every process it started and leaves the machine as it found
it: pods' containers and their shims, mounts under the run directory, the CNI bridge,
iptables rules and chains, kernel tunables the kubelet sets, the cgroups, and CDI spec
files that appeared in /etc/cdi and /var/run/cdi. Call it in a `finally` (it is safe to
call after a failed or partial start, and twice).

It runs a real kubelet as root, so it refuses to start unless CI=true or
SIMDRA_E2E_DISPOSABLE=1 says the machine is disposable.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))
# Host directories containerd and the kubelet write to whatever their configuration:
# new entries are removed at stop, and the directory too when it was not there before.
# (containerd's shim sockets live in /run/containerd/s; the kubelet links container logs
# in /var/log/containers.)
HOST_DIRS = (*CDI_DIRS, Path("/run/containerd"), Path("/var/log/containers"), Path("/var/log/pods"))
HOSTS_FILE = Path("/etc/hosts")
CGROUP_FS = Path("/sys/fs/cgroup")
BRIDGE = "simdra-e2e0"
POD_SUBNET = "10.244.0.0/24"
PAUSE_IMAGE = "localhost/simdra-e2e/pause:1"
BUSYBOX_IMAGE = "localhost/simdra-e2e/busybox:1"
SIMDRA_IMAGE = "localhost/simdra:e2e"
# The example driver built on simdra (docs/examples/crypto-driver), same archive dir.
CRYPTO_DRIVER_IMAGE = "localhost/crypto-driver:e2e"
# Kernel tunables the kubelet sets at start (protectKernelDefaults=false) and the CNI
# bridge may touch; restored at stop.
SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
)


SERVICE_IP = "10.96.0.1"  # the `kubernetes` Service of the control plane's service range
SERVICE_RANGE = "10.96.0.0/16"
# The node's address (the kubelet refuses a loopback one): on `lo` for the run, so the
# API server reaches the kubelet (logs, exec) and nothing off this machine does.
NODE_IP = "10.244.255.1"


class NodeError(RuntimeError):
    """The e2e node could not start or stop; the message names the component and log."""


def require_disposable() -> None:
    """Refuse unless the environment says this machine may be changed as root."""
    if os.environ.get("CI") != "true" and os.environ.get("SIMDRA_E2E_DISPOSABLE") != "1":
        raise NodeError(
            "e2e node: refusing to run a real kubelet and containerd as root: set CI=true "
            "or SIMDRA_E2E_DISPOSABLE=1 on a disposable machine"
        )


@dataclass
class NodeBinaries:
    """Where the node's programs are (build-node.sh and the control plane build)."""

    kubelet: Path
    containerd_bin: Path  # containerd, containerd-shim-runc-v2, ctr
    runc: Path = Path("/usr/sbin/runc")
    cni_bin: Path = Path("/usr/lib/cni")


def wait_for(what: str, check: Callable[[], bool], timeout: float, log: Path | None) -> None:
    """Poll `check` until true; else NodeError naming `what` and the log file."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    where = f" (log: {log})" if log else ""
    raise NodeError(f"e2e node: {what} not within {timeout:.0f} s{where}")


def _run(args: list[str], timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=check)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServiceProxy:
    """What kube-proxy does for the `kubernetes` Service, for this node only: pods reach
    SERVICE_IP:443 (the in-cluster address the kubelet puts in their environment) and
    get the API server on loopback. The address sits on `lo` for the run (Node adds
    it); the bridge's gateway routes pods to it."""

    def __init__(
        self, target: tuple[str, int], listen: tuple[str, int] = (SERVICE_IP, 443)
    ) -> None:
        self.target, self.listen = target, listen
        self._sock: socket.socket | None = None

    def start(self) -> None:
        """Accept connections in a thread."""
        self._sock = socket.create_server(self.listen)
        threading.Thread(target=self._accept, name="e2e-service-proxy", daemon=True).start()

    def _accept(self) -> None:
        assert self._sock is not None
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed by stop()
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                conn.close()
                continue
            upstream.settimeout(None)
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    def stop(self) -> None:
        """Stop accepting."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass  # either side closed: close both
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


@dataclass
class _HostState:
    """What the node had before start, to put back (or remove what is new) at stop."""

    dirs: dict[Path, set[str] | None] = field(default_factory=dict)  # None: no dir
    sysctls: dict[str, str] = field(default_factory=dict)
    iptables: dict[str, str] = field(default_factory=dict)
    bridge_existed: bool = False

    @classmethod
    def capture(cls) -> _HostState:
        state = cls()
        for d in HOST_DIRS:
            state.dirs[d] = set(os.listdir(d)) if d.is_dir() else None
        for key in SYSCTLS:
            p = Path("/proc/sys") / key
            if p.exists():
                state.sysctls[key] = p.read_text().strip()
        for tool in ("iptables", "ip6tables"):
            if shutil.which(f"{tool}-save"):
                state.iptables[tool] = _run([f"{tool}-save"], check=False).stdout
        state.bridge_existed = Path(f"/sys/class/net/{BRIDGE}").exists()
        return state


class Node:
    """containerd + kubelet joined to a control plane as node `name`."""

    def __init__(
        self,
        name: str,
        kubeconfig: Path,
        binaries: NodeBinaries,
        images_dir: Path,
        feature_gates: dict[str, bool],
        run_root: Path = Path("/var/lib/simdra-e2e"),
        log_dir: Path | None = None,
        api_server: tuple[str, int] | None = None,
        kubelet_root: Path = Path("/var/lib/kubelet"),
        labels: dict[str, str] | None = None,
        on_spawn: Callable[[int], None] | None = None,
    ) -> None:
        self.name = name
        self.kubeconfig = kubeconfig
        self.bin = binaries
        self.images_dir = images_dir
        self.feature_gates = dict(feature_gates)
        run_id = uuid.uuid4().hex[:8]
        self.run_dir = run_root / run_id
        self.log_dir = (
            log_dir or Path(os.environ.get("TMPDIR", "/tmp")) / f"simdra-e2e-node-{run_id}"
        )
        self.cgroup_root = f"/simdra-e2e-{run_id}"
        # The kubelet's usual root dir, so deploy/ runs unchanged (its hostPaths name
        # /var/lib/kubelet); start() refuses if another kubelet left anything there.
        self.kubelet_root = kubelet_root
        self.labels = dict(labels or {})
        self.proxy = ServiceProxy(api_server) if api_server else None
        self._made_kubelet_root = False
        self.containerd_sock = self.run_dir / "containerd" / "containerd.sock"
        self.containerd_log = self.log_dir / "containerd.log"
        self.kubelet_log = self.log_dir / "kubelet.log"
        self._procs: dict[str, subprocess.Popen] = {}
        self._host: _HostState | None = None
        self._cgroups_made: list[Path] = []
        self._lo_added: list[str] = []
        self._hosts_line = ""
        self._on_spawn = on_spawn  # e.g. note the pid for a cleanup outside pytest

    # ----- start ---------------------------------------------------------------

    def start(self, ready_timeout: float = 180) -> None:
        """Start containerd and the kubelet, import images, wait for Node Ready."""
        require_disposable()
        if self.kubelet_root.exists() and any(self.kubelet_root.iterdir()):
            raise NodeError(
                f"e2e node: {self.kubelet_root} is not empty: is another kubelet on this "
                "machine? Remove it first"
            )
        self._host = _HostState.capture()
        self.run_dir.mkdir(parents=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for d in CDI_DIRS:
            d.mkdir(parents=True, exist_ok=True)  # containerd reads them; removed at stop if new
        self._write_cni()
        self._add_lo_address(NODE_IP)
        self._add_hosts_entry()
        if self.proxy:
            self._add_lo_address(SERVICE_IP)
            self.proxy.start()
        self._timed("containerd started", self._start_containerd)
        self._timed(
            "images imported", lambda: self.import_images(sorted(self.images_dir.glob("*.tar")))
        )
        self._make_cgroup_root()
        self._start_kubelet()
        self._timed(
            "kubelet Ready",
            lambda: wait_for(
                f"kubelet: node {self.name} Ready", self.is_ready, ready_timeout, self.kubelet_log
            ),
        )

    def restart_kubelet(
        self, while_stopped: Callable[[], object] = lambda: None, ready_timeout: float = 180
    ) -> None:
        """Stop the kubelet (containers keep running), run `while_stopped`, start it again
        with the same configuration and wait for Node Ready."""
        self._terminate("kubelet", 20)
        while_stopped()
        made_root = self._made_kubelet_root  # ours still: stop() removes it
        self._start_kubelet()
        self._made_kubelet_root = made_root
        wait_for(f"kubelet: node {self.name} Ready after a restart", self.is_ready,
                 ready_timeout, self.kubelet_log)

    def reboot(
        self, while_down: Callable[[], object] = lambda: None, ready_timeout: float = 180
    ) -> None:
        """What a reboot does to the node's software: the kubelet and containerd stop,
        every container dies at once (SIGKILL), every mount goes, and what lives on tmpfs
        is gone (containerd's and runc's state, the CDI specs in /var/run/cdi); disks keep
        the rest (/var/lib/kubelet, plugin state, images). Then `while_down` runs, and
        containerd and the kubelet start again, the Node waited Ready."""
        self._terminate("kubelet", 20)
        self._remove_containers()
        self._terminate("containerd", 20)
        self._kill_leftover_processes()
        self._unmount()
        for tmpfs in (self.run_dir / "containerd" / "state", self.run_dir / "containerd" / "runc"):
            shutil.rmtree(tmpfs, ignore_errors=True)
        run_cdi = Path("/var/run/cdi")  # /etc/cdi is on disk
        for spec in run_cdi.glob("k8s.*.json") if run_cdi.is_dir() else ():
            spec.unlink(missing_ok=True)
        while_down()
        made_root = self._made_kubelet_root  # ours still: stop() removes it
        self._start_containerd()
        self._start_kubelet()
        self._made_kubelet_root = made_root
        wait_for(f"kubelet: node {self.name} Ready after a reboot", self.is_ready,
                 ready_timeout, self.kubelet_log)

    def _timed(self, what: str, step: Callable[[], object]) -> None:
        """Run a step and note how long it took in node-steps.log (budgets)."""
        began = time.monotonic()
        try:
            step()
        finally:
            with (self.log_dir / "node-steps.log").open("a") as f:
                f.write(f"{what}: {time.monotonic() - began:.1f} s\n")

    def _write_cni(self) -> None:
        conf = {
            "cniVersion": "1.0.0",
            "name": "simdra-e2e",
            "plugins": [
                {
                    # A bridge with no uplink and no masquerading: pods reach each other
                    # and this host (the gateway, for the API server's service address),
                    # nothing leaves the machine, no iptables rules. The plugin turns on
                    # ip_forward; stop() puts it back.
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_SUBNET}]],
                        # Only the service range goes to the gateway: no default route.
                        "routes": [{"dst": SERVICE_RANGE}],
                        "dataDir": str(self.run_dir / "cni" / "ipam"),
                    },
                },
                {"type": "loopback"},
            ],
        }
        conf_dir = self.run_dir / "cni" / "net.d"
        conf_dir.mkdir(parents=True)
        (conf_dir / "10-simdra-e2e.conflist").write_text(json.dumps(conf, indent=2))

    def _add_hosts_entry(self) -> None:
        # The API server dials a kubelet (logs, exec) by the node's Hostname address
        # first; make that name resolve to the node's address for the run.
        line = f"{NODE_IP} {self.name}  # simdra-e2e {self.run_dir.name}"
        with HOSTS_FILE.open("a") as f:
            f.write(line + "\n")
        self._hosts_line = line

    def _add_lo_address(self, ip: str) -> None:
        if f"inet {ip}/" not in _run(["ip", "-4", "addr", "show", "dev", "lo"]).stdout:
            _run(["ip", "addr", "add", f"{ip}/32", "dev", "lo"])
            self._lo_added.append(ip)

    def _containerd_config(self) -> str:
        cd = self.run_dir / "containerd"
        cdi_dirs = ", ".join(f'"{d}"' for d in CDI_DIRS)
        return f"""version = 3
root = "{cd / "root"}"
state = "{cd / "state"}"

[grpc]
  address = "{self.containerd_sock}"

[ttrpc]
  address = "{cd / "containerd.sock.ttrpc"}"

[debug]
  address = "{cd / "debug.sock"}"

[metrics]
  address = ""

[plugins.'io.containerd.grpc.v1.cri']
  # no streaming server on the network
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins.'io.containerd.cri.v1.runtime']
  cdi_spec_dirs = [{cdi_dirs}]
  # network namespaces under the state dir, not the host's /var/run/netns
  netns_mounts_under_state_dir = true
  # The kubelet asks for oom_score_adj -998 for sandboxes; lowering it needs
  # CAP_SYS_RESOURCE, which root lacks on these machines: clamp to containerd's own.
  restrict_oom_score_adj = true

[plugins.'io.containerd.cri.v1.runtime'.containerd]
  default_runtime_name = "runc"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = "{self.bin.runc}"
  SystemdCgroup = false
  # runc's state in the run dir, not the host's /run/containerd/runc
  Root = "{cd / "runc"}"

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ["{self.bin.cni_bin}"]
  conf_dir = "{self.run_dir / "cni" / "net.d"}"

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "{PAUSE_IMAGE}"
"""

    def _start_containerd(self) -> None:
        cfg = self.run_dir / "containerd" / "config.toml"
        cfg.parent.mkdir(parents=True, exist_ok=True)  # a reboot starts it again
        cfg.write_text(self._containerd_config())
        env = dict(
            os.environ,
            PATH=f"{self.bin.containerd_bin}:{self.bin.runc.parent}:{os.environ['PATH']}",
        )
        self._spawn(
            "containerd",
            [str(self.bin.containerd_bin / "containerd"), "--config", str(cfg)],
            env,
            self.containerd_log,
        )
        wait_for(
            "containerd: socket answering",
            lambda: (
                self._alive("containerd") and self.ctr(["version"], check=False).returncode == 0
            ),
            60,
            self.containerd_log,
        )

    def ctr(
        self, args: list[str], check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess:
        """Run `ctr` against this node's containerd in the k8s.io namespace."""
        cmd = [
            str(self.bin.containerd_bin / "ctr"),
            "--address",
            str(self.containerd_sock),
            "--namespace",
            "k8s.io",
            *args,
        ]
        res = _run(cmd, timeout=timeout, check=False)
        if check and res.returncode != 0:
            raise NodeError(f"e2e node: ctr {' '.join(args)} failed: {res.stderr.strip()[-300:]}")
        return res

    def import_images(self, archives: Iterable[Path]) -> None:
        """Import image archives (docker-archive or OCI) into containerd's k8s.io namespace."""
        for archive in archives:
            res = self.ctr(["images", "import", str(archive)], check=False, timeout=600)
            if res.returncode != 0:
                raise NodeError(
                    f"e2e node: importing image {archive} into containerd failed: "
                    f"{res.stderr.strip()[-300:]} (log: {self.containerd_log})"
                )

    def _cgroup_hierarchies(self) -> list[Path]:
        return (
            [p for p in CGROUP_FS.iterdir() if p.is_dir() and (p / "cgroup.procs").exists()]
            if CGROUP_FS.is_dir()
            else []
        )

    def _make_cgroup_root(self) -> None:
        # The kubelet requires its cgroup root to exist in every hierarchy; a private one
        # keeps its kubepods tree apart from the host's and makes cleanup one subtree.
        for h in self._cgroup_hierarchies():
            d = h / self.cgroup_root.lstrip("/")
            d.mkdir(exist_ok=True)
            self._cgroups_made.append(d)
            if h.name == "cpuset":
                for f in ("cpuset.cpus", "cpuset.mems"):
                    (d / f).write_text((h / f).read_text())

    def _kubelet_config(self) -> dict:
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # Kubernetes >= 1.35 refuses cgroup v1 unless told (these machines are hybrid v1).
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "containerRuntimeEndpoint": f"unix://{self.containerd_sock}",
            "address": NODE_IP,
            "port": _free_port(),
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": _free_port(),
            "podLogsDir": str(self.run_dir / "pod-logs"),
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "featureGates": self.feature_gates,
            "failSwapOn": False,
            "registerNode": True,
            # No host iptables chains from the kubelet.
            "makeIPTablesUtilChains": False,
            "resolvConf": "",
            "serializeImagePulls": False,
            # Images are imported, never pulled; keep them.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
            },
            "syncFrequency": "5s",
            "fileCheckFrequency": "5s",
            "nodeStatusUpdateFrequency": "5s",
            "shutdownGracePeriod": "0s",
        }

    def _start_kubelet(self) -> None:
        self._made_kubelet_root = not self.kubelet_root.exists()
        self.kubelet_root.mkdir(parents=True, exist_ok=True)
        cfg = self.run_dir / "kubelet-config.yaml"
        if not cfg.exists():  # a restart keeps it: same ports, so the API server finds us
            cfg.write_text(json.dumps(self._kubelet_config(), indent=2))  # JSON is YAML
        args = [
            str(self.bin.kubelet),
            f"--config={cfg}",
            f"--kubeconfig={self.kubeconfig}",
            f"--root-dir={self.kubelet_root}",
            f"--cert-dir={self.run_dir / 'kubelet-pki'}",
            f"--hostname-override={self.name}",
            f"--node-ip={NODE_IP}",
            *(
                [f"--node-labels={','.join(f'{k}={v}' for k, v in self.labels.items())}"]
                if self.labels
                else []
            ),
            "--v=2",
        ]
        env = dict(os.environ, PATH=f"{self.bin.containerd_bin}:{os.environ['PATH']}")
        self._spawn("kubelet", args, env, self.kubelet_log)

    def _spawn(self, name: str, args: list[str], env: dict[str, str], log: Path) -> None:
        with open(log, "ab") as out:
            # Own session: Ctrl-C reaches pytest, whose finally stops us in order.
            self._procs[name] = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        if self._on_spawn:
            self._on_spawn(self._procs[name].pid)

    def _alive(self, name: str) -> bool:
        p = self._procs.get(name)
        if p is None or p.poll() is not None:
            log = self.kubelet_log if name == "kubelet" else self.containerd_log
            raise NodeError(
                f"e2e node: {name} exited with status {p.returncode if p else '?'} (log: {log})"
            )
        return True

    def is_ready(self) -> bool:
        """The Node object's Ready condition is True (and the kubelet still runs)."""
        self._alive("kubelet")
        res = self.kubectl(
            [
                "get",
                "node",
                self.name,
                "-o",
                'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
            ],
            check=False,
        )
        return res.returncode == 0 and res.stdout.strip() == "True"

    def kubectl(
        self, args: list[str], check: bool = True, timeout: float = 60, input: str | None = None
    ) -> subprocess.CompletedProcess:
        """kubectl against the control plane this node joined."""
        res = subprocess.run(
            [str(self.bin.kubelet.parent / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
        )
        if check and res.returncode != 0:
            raise NodeError(
                f"e2e node: kubectl {' '.join(args)} failed: {res.stderr.strip()[-400:]}"
            )
        return res

    # ----- stop ----------------------------------------------------------------

    def stop(self) -> None:
        """Stop everything started and put the node back as it was (idempotent)."""
        errors: list[str] = []
        for name, step in (
            ("stop kubelet", lambda: self._terminate("kubelet", 20)),
            ("remove containers", self._remove_containers),
            ("stop containerd", lambda: self._terminate("containerd", 20)),
            ("kill leftovers", self._kill_leftover_processes),
            ("unmount", self._unmount),
            ("remove cgroups", self._remove_cgroups),
            ("remove bridge", self._remove_bridge),
            ("restore host", self._restore_host),
            ("remove run dir", self._remove_run_dir),
        ):
            try:
                if self.log_dir.is_dir():
                    self._timed(name, step)
                else:
                    step()
            except Exception as exc:  # keep cleaning up; report all at the end
                errors.append(f"{name}: {exc}")
        if errors:
            raise NodeError(f"e2e node: cleanup incomplete: {'; '.join(errors)}")

    def _terminate(self, name: str, grace: float) -> None:
        p = self._procs.pop(name, None)
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)

    def _remove_containers(self) -> None:
        if "containerd" not in self._procs or self._procs["containerd"].poll() is not None:
            return
        tasks = self.ctr(["tasks", "ls", "-q"], check=False).stdout.split()
        # Workload containers before sandboxes (pause) so shims exit cleanly.
        for task in tasks:
            self.ctr(["tasks", "kill", "-s", "SIGKILL", task], check=False, timeout=30)
        for task in tasks:
            self.ctr(["tasks", "delete", "-f", task], check=False, timeout=30)
        for c in self.ctr(["containers", "ls", "-q"], check=False).stdout.split():
            self.ctr(["containers", "delete", c], check=False, timeout=30)

    def _our_pids(self) -> list[int]:
        """Processes tied to this run: shims started for our containerd and anything
        left in our cgroup tree."""
        pids: set[int] = set()
        marker = str(self.run_dir).encode()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                if marker in (proc / "cmdline").read_bytes():
                    pids.add(int(proc.name))
            except OSError:
                continue
        for d in self._cgroups_made:
            for procs in d.rglob("cgroup.procs"):
                try:
                    pids.update(int(x) for x in procs.read_text().split())
                except OSError:
                    continue
        pids.discard(os.getpid())
        return sorted(pids)

    def _kill_leftover_processes(self) -> None:
        for _ in range(3):
            pids = self._our_pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)
        left = self._our_pids()
        if left:
            raise NodeError(f"processes of the e2e node still running: {left}")

    def _mounts_under(self, root: Path) -> list[str]:
        prefix = str(root) + "/"
        found = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            mnt = line.split()[4].replace("\\040", " ")
            if mnt.startswith(prefix) or mnt == str(root):
                found.append(mnt)
        return found

    def _unmount(self) -> None:
        roots = (self.run_dir, self.kubelet_root)
        for _ in range(5):
            mounts = [m for r in roots for m in self._mounts_under(r)]
            if not mounts:
                return
            for m in sorted(mounts, key=len, reverse=True):
                subprocess.run(["umount", "-l", m], capture_output=True, check=False)
        left = [m for r in roots for m in self._mounts_under(r)]
        if left:
            raise NodeError(f"mounts of the e2e node left: {left[:5]}")

    def _remove_cgroups(self) -> None:
        left = []
        for top in self._cgroups_made:
            if not top.exists():
                continue
            dirs = sorted(
                (p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
            )
            for d in [*dirs, top]:
                for _ in range(20):
                    try:
                        d.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.1)
                else:
                    left.append(str(d))
        self._cgroups_made = [] if not left else self._cgroups_made
        if left:
            raise NodeError(f"cgroups of the e2e node left: {left[:5]}")

    def _remove_bridge(self) -> None:
        if (
            self._host
            and not self._host.bridge_existed
            and Path(f"/sys/class/net/{BRIDGE}").exists()
        ):
            _run(["ip", "link", "delete", BRIDGE], check=False)

    def _restore_host(self) -> None:
        host = self._host
        if host is None:
            return
        for d, before in host.dirs.items():
            if before is None:
                shutil.rmtree(d, ignore_errors=True)
            elif d.is_dir():
                for name in set(os.listdir(d)) - before:
                    p = d / name
                    if p.is_dir() and not p.is_symlink():
                        shutil.rmtree(p, ignore_errors=True)
                    else:
                        p.unlink(missing_ok=True)
        if self._hosts_line and HOSTS_FILE.exists():
            lines = HOSTS_FILE.read_text().splitlines(keepends=True)
            HOSTS_FILE.write_text("".join(x for x in lines if x.rstrip("\n") != self._hosts_line))
            self._hosts_line = ""
        for key, value in host.sysctls.items():
            p = Path("/proc/sys") / key
            if p.read_text().strip() != value:
                p.write_text(value)
        for tool, before in host.iptables.items():
            _restore_iptables(tool, before, _run([f"{tool}-save"], check=False).stdout)

    def _remove_run_dir(self) -> None:
        if self.proxy:
            self.proxy.stop()
        while self._lo_added:
            _run(["ip", "addr", "del", f"{self._lo_added.pop()}/32", "dev", "lo"], check=False)
        if self.run_dir.exists() and not self._mounts_under(self.run_dir):
            shutil.rmtree(self.run_dir, ignore_errors=True)
            with contextlib.suppress(OSError):
                self.run_dir.parent.rmdir()  # the run root, when no other run uses it
        if self._made_kubelet_root and not self._mounts_under(self.kubelet_root):
            shutil.rmtree(self.kubelet_root, ignore_errors=True)
            self._made_kubelet_root = False


def _restore_iptables(tool: str, before: str, after: str) -> None:
    """Delete rules and chains that appeared since `before` (iptables-save texts)."""
    old_rules, old_chains = _parse_iptables(before)
    new_rules, new_chains = _parse_iptables(after)
    for table, rule in new_rules - old_rules:
        subprocess.run(
            [tool, "-t", table, "-D", *shlex.split(rule)[1:]], capture_output=True, check=False
        )
    for table, chain in new_chains - old_chains:
        subprocess.run([tool, "-t", table, "-F", chain], capture_output=True, check=False)
        subprocess.run([tool, "-t", table, "-X", chain], capture_output=True, check=False)


def _parse_iptables(text: str) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    rules: set[tuple[str, str]] = set()
    chains: set[tuple[str, str]] = set()
    table = ""
    for line in text.splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith(":"):
            chains.add((table, line[1:].split()[0]))
        elif line.startswith("-A "):
            rules.add((table, line))
    return rules, chains
