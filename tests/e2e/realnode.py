"""Fixtures and helpers for the real-node scenarios (tests/e2e/node_scenarios/).

`real_node`: containerd + the real kubelet joined to the run's control plane as
REAL_NODE (tests/e2e/node.py). `plugin`: our DaemonSet applied with
`kubectl apply -k` from an overlay of deploy/overlays/<name> that only sets the image to
the locally built tag and keeps the DaemonSet on the real node (the run's other nodes
are emulated). `kube`: pods and claim templates in NAMESPACE, removed after each test.

Every wait is bounded and fails with one line naming the scenario step, the object and
the log file to read.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from prometheus_client.parser import text_string_to_metric_families

from . import releases
from .controlplane import DRA_GATES, ControlPlane, record_pid
from .kubectl_plugin import why_agrees_pending
from .node import SIMDRA_IMAGE, Node, NodeBinaries, NodeError, require_disposable

REPO = Path(__file__).resolve().parents[2]
REAL_NODE = "e2e-node"
NAMESPACE = "e2e-node"
PLUGIN_NAMESPACE = "simdra"
DRIVER = "dra.example.com"
NODE_LABEL = "simdra.e2e/real-node"
CDI_ROOT = Path("/var/run/cdi")
PLUGINS_DIR = Path("/var/lib/kubelet/plugins")  # KUBELET_PLUGINS_DIRECTORY_PATH
# The plugin's state: deploy/base mounts this one directory (hostPath) at the same path.
DATA_DIR = f"{PLUGINS_DIR}/{DRIVER}"
JSON = dict[str, Any]
# A container's idle tail that ends at the kubelet's SIGTERM: a shell or sleep as PID 1
# ignores it, and each deletion would wait out the grace period (at least 2 s).
HOLD = "trap 'exit 0' TERM; sleep 3600 & wait"
PRINT_ENV = f"env | grep ^SIMDRA_ | sort; {HOLD}"
BUSYBOX = "localhost/simdra-e2e/busybox:1"  # tests/e2e/images.sh, imported by the node


def _script(name: str, *args: str) -> Path:
    """Run a build script of tests/e2e; its last stdout line is the path it made."""
    res = subprocess.run(
        ["bash", str(REPO / "tests/e2e" / name), *args], capture_output=True, text=True
    )
    if res.returncode != 0:
        lines = res.stderr.strip().splitlines() or [f"{name} exited {res.returncode}"]
        pytest.fail(lines[-1], pytrace=False)
    return Path(res.stdout.strip().splitlines()[-1])


def _logs_dir() -> Path:
    from .conftest import logs_dir

    return logs_dir()


def gates_of(cp: ControlPlane) -> dict[str, bool]:
    """The control plane's --feature-gates as a KubeletConfiguration map."""
    pairs = (g.split("=") for g in cp.feature_gates().split(",") if g)
    return {k: v == "true" for k, v in pairs}


def kubelet_gates(cp: ControlPlane, kubelet: Path) -> dict[str, bool]:
    """The feature gates for a kubelet of `cp`'s cluster, which may be of an older release
    (tests/e2e/build.sh: KUBELET_VERSION): the control plane's, less those this kubelet
    does not know (it refuses an unknown gate), plus, on, each DRA gate this kubelet still
    has that the control plane has graduated (the cluster has the feature)."""
    help_text = subprocess.run([kubelet, "--help"], capture_output=True, text=True).stdout
    known = {g for g in DRA_GATES if f"{g}=true|false" in help_text}
    wanted = gates_of(cp)
    gates = {g: on for g, on in wanted.items() if g in known}
    graduated = {g for g, on in cp.features().items() if on and g not in cp.known_gates()}
    gates.update({g: True for g in known & graduated})
    return gates


def require_feature(cp: ControlPlane, gate: str) -> None:
    """Skip the scenario, naming the release, when this Kubernetes lacks `gate` (or has it
    off); a release that has it, GA included, always runs the scenario."""
    state = cp.features().get(gate)
    if not state:
        why = "has it off" if state is False else "has no such feature gate"
        pytest.skip(f"Kubernetes {cp.version()} {why}: {gate}")


def incidental_capacity(cp: ControlPlane, amount: str) -> dict[str, str] | None:
    """The bandwidth request of a scenario about something else: asked for where the
    release can allocate it, left to the NIC's default elsewhere (1.34)."""
    return {"bandwidth": amount} if releases.capacity_requests_allocate(cp) else None


def node_kubeconfig(cp: ControlPlane, node: str, directory: Path) -> Path:
    """A kubeconfig with a client certificate for `system:node:<node>` (group
    system:nodes) signed by the control plane's CA: the kubelet's own identity, so the
    Node authorizer and NodeRestriction judge what it does, as in a real cluster."""
    directory.mkdir(parents=True, exist_ok=True)
    key, csr, crt = directory / "kubelet.key", directory / "kubelet.csr", directory / "kubelet.crt"
    for args in (
        [
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            f"/O=system:nodes/CN=system:node:{node}",
            "-keyout",
            key,
            "-out",
            csr,
        ],
        [
            "x509",
            "-req",
            "-in",
            csr,
            "-CA",
            cp.certs.ca_cert,
            "-CAkey",
            cp.certs.ca_key,
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            crt,
        ],
    ):
        res = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True)
        if res.returncode != 0:
            pytest.fail(
                f"kubelet client certificate: openssl {args[0]}: {res.stderr.strip()[-200:]}",
                pytrace=False,
            )
    path = directory / "kubelet.kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: e2e\n  cluster:\n    server: {cp.server}\n"
        f"    certificate-authority: {cp.certs.ca_cert}\n"
        f"users:\n- name: kubelet\n  user:\n    client-certificate: {crt}\n    client-key: {key}\n"
        "contexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: kubelet\n"
        "current-context: e2e\n"
    )
    path.chmod(0o600)
    return path


@pytest.fixture(scope="session")
def node_bin() -> Path:
    """containerd, ctr, the shim and pause (tests/e2e/build-node.sh, cached)."""
    # Before anything is installed: build-node.sh may apt-get install as root.
    try:
        require_disposable()
    except NodeError as err:
        pytest.fail(str(err), pytrace=False)
    return _script("build-node.sh")


@pytest.fixture(scope="session")
def node_images(node_bin: Path) -> Path:
    """Image archives for containerd (tests/e2e/images.sh, cached)."""
    return _script("images.sh", str(node_bin / "pause"))


# Package scope (registered by node_scenarios/conftest.py): the node and its DaemonSet
# exist only while the node scenarios run, so the run's other scenarios (emulated nodes,
# "stays Pending" checks) never see its devices, and every scenario file shares them.
@pytest.fixture(scope="package")
def real_node(
    control_plane: ControlPlane, e2e_bin: Path, node_bin: Path, node_images: Path
) -> Iterator[Node]:
    """The real kubelet on containerd, Ready as REAL_NODE; the machine restored after."""
    cp = control_plane
    kubeconfig = node_kubeconfig(cp, REAL_NODE, _logs_dir() / f"{REAL_NODE}-pki")
    node = Node(
        REAL_NODE,
        kubeconfig,
        NodeBinaries(kubelet=e2e_bin / "kubelet", containerd_bin=node_bin),
        node_images,
        kubelet_gates(cp, e2e_bin / "kubelet"),
        log_dir=_logs_dir() / REAL_NODE,
        api_server=("127.0.0.1", cp.port),
        labels={NODE_LABEL: "true"},
        on_spawn=record_pid,  # hack/e2e.sh ends them even if pytest is killed
    )
    try:
        try:
            node.start()
        except NodeError as err:
            pytest.fail(str(err), pytrace=False)
        yield node
    finally:
        try:
            node.stop()
        finally:
            # The Node object and its slices go too: the scheduler must not pick them.
            cp.kubectl("delete", "node", REAL_NODE, "--ignore-not-found", check=False)
            cp.kubectl(
                "delete",
                "resourceslices",
                f"--field-selector=spec.nodeName={REAL_NODE}",
                check=False,
            )


# -- the plugin's DaemonSet --------------------------------------------------------------


# (overlay, inventory, pod_patch): what the DaemonSet runs, see PluginDeployment.
_Overlay = tuple[str, str | None, JSON | None]


@dataclass
class PluginDeployment:
    """Our DaemonSet, applied from a temporary overlay of one of deploy/overlays."""

    cp: ControlPlane
    node: Node
    overlay: str
    workdir: Path
    tag: str = "e2e"
    inventory: str | None = None  # replaces the inventory file of fake-inventory
    # A strategic merge patch of the DaemonSet's pod template spec (env, volumes), on top
    # of the overlay: e.g. the sysfs overlay pointed at a simulated tree.
    pod_patch: JSON | None = None
    # What `restore()` returns to: the overlay the DaemonSet was applied with.
    _default: _Overlay = field(init=False)
    _default_devices: set[tuple[str, str]] | None = field(default=None, init=False)
    _open: int = field(default=0, init=False)  # `using` blocks not yet left

    def __post_init__(self) -> None:
        self._default = self._state()

    @property
    def kustomization(self) -> Path:
        return self.workdir / "kustomization.yaml"

    def write(self) -> None:
        """An overlay that changes only the image and where the DaemonSet runs."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        name, _, _ = SIMDRA_IMAGE.rpartition(":")
        # kustomize takes only relative paths to other kustomizations.
        base = os.path.relpath(REPO / "deploy/overlays" / self.overlay, self.workdir)
        self.kustomization.write_text(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
            f"resources:\n  - {base}\n"
            f"images:\n  - name: simdra\n    newName: {name}\n    newTag: {self.tag}\n"
            "patches:\n  - target: {kind: DaemonSet, name: simdra-kubelet-plugin}\n"
            "    patch: |-\n"
            "      - op: add\n        path: /spec/template/spec/nodeSelector\n"
            f'        value: {{{NODE_LABEL}: "true"}}\n'
            + self._inventory_patches()
            + self._pod_patch()
        )

    def _pod_patch(self) -> str:
        if self.pod_patch is None:
            return ""
        daemonset = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "simdra-kubelet-plugin", "namespace": PLUGIN_NAMESPACE},
            "spec": {"template": {"spec": self.pod_patch}},
        }
        return f"  - patch: {json.dumps(json.dumps(daemonset))}\n"

    def _inventory_patches(self) -> str:
        """With `inventory`: the ConfigMap's file replaced, and its hash in the pod
        template so that the DaemonSet rolls (a mounted ConfigMap alone does not)."""
        if self.inventory is None:
            return ""
        digest = hashlib.sha256(self.inventory.encode()).hexdigest()[:16]
        configmap = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "simdra-inventory", "namespace": PLUGIN_NAMESPACE},
            "data": {"inventory.yaml": self.inventory},
        }
        return (
            "      - op: add\n"
            "        path: /spec/template/metadata/annotations/simdra.e2e~1inventory\n"
            f"        value: {digest}\n"
            f"  - patch: {json.dumps(json.dumps(configmap))}\n"
        )

    def apply(self) -> None:
        """kubectl apply -k the overlay and wait until the plugin serves the node."""
        self.write()
        self.cp.kubectl("apply", "-k", str(self.workdir))
        self.wait_ready()

    def set_tag(self, tag: str) -> None:
        """A new image tag: the DaemonSet rolls its pod (kubectl apply -k again)."""
        self.tag = tag
        self.write()
        self.cp.kubectl("apply", "-k", str(self.workdir))

    def pods(self) -> list[JSON]:
        core = client.CoreV1Api(self.cp.api_client())
        items = core.list_namespaced_pod(
            PLUGIN_NAMESPACE, label_selector="app.kubernetes.io/name=simdra"
        ).items
        return [self.cp.api_client().sanitize_for_serialization(p) for p in items]

    def ready_pods(self) -> list[JSON]:
        return [
            p for p in self.pods() if _pod_ready(p) and not p["metadata"].get("deletionTimestamp")
        ]

    def wait_ready(self, timeout: float = 180) -> None:
        """One plugin pod Ready and the node's pools published."""
        wait(
            f"plugin DaemonSet pod Ready on {self.node.name}",
            lambda: bool(self.ready_pods()),
            timeout,
            self.node.kubelet_log,
            lambda: self.describe(),
        )
        wait(
            f"plugin ResourceSlices for {self.node.name}",
            lambda: bool(node_slices(self.cp, self.node.name)),
            timeout,
            self.node.kubelet_log,
            lambda: self.describe(),
        )

    def describe(self) -> str:
        """Plugin pods' phase and last container state, for failure messages."""
        parts = []
        for p in self.pods():
            statuses = p.get("status", {}).get("containerStatuses") or []
            state = statuses[0].get("state") if statuses else p.get("status", {}).get("conditions")
            parts.append(f"{p['metadata']['name']}: {p['status'].get('phase')} {state}")
        return "; ".join(parts) or "no plugin pods"

    @contextlib.contextmanager
    def using(self, overlay: str, inventory: str | None = None,
              pod_patch: JSON | None = None) -> Iterator[None]:
        """The DaemonSet on another overlay for the block (a rolling update, none when it
        runs that one already; `inventory`: its inventory file instead of the overlay's;
        `pod_patch`: see the field). The default overlay comes back lazily, when the next
        scenario that needs it calls `restore()` (node_scenarios/conftest.py does): a
        roll costs seconds, and scenarios on other overlays in a row then roll the
        DaemonSet once each instead of twice."""
        if self._default_devices is None and self._state() == self._default:
            self._default_devices = self.devices()
        self._switch((overlay, inventory, pod_patch))
        self._open += 1
        try:
            yield
        finally:
            self._open -= 1

    def restore(self) -> None:
        """The default overlay again, unless it runs or a `using` block is open, and wait
        until the node publishes exactly the devices it had on it."""
        if self._open or self._state() == self._default:
            return
        self._switch(self._default)
        if self._default_devices is not None:
            self.wait_devices(self._default_devices)

    def _state(self) -> _Overlay:
        return (self.overlay, self.inventory, self.pod_patch)

    def _switch(self, state: _Overlay) -> None:
        if state != self._state():
            self.overlay, self.inventory, self.pod_patch = state
            self.apply_and_roll()

    def devices(self) -> set[tuple[str, str]]:
        """(pool, device) of every device the node's slices publish."""
        return {
            (s["spec"]["pool"]["name"], d["name"])
            for s in node_slices(self.cp, self.node.name)
            for d in s["spec"].get("devices") or []
        }

    def wait_devices(self, expected: set[tuple[str, str]], timeout: float = 90) -> None:
        """Wait until the node publishes exactly `expected` (an old instance's slices
        replaced after a roll)."""
        wait(
            f"ResourceSlices of {self.node.name} publish {len(expected)} expected devices",
            lambda: self.devices() == expected,
            timeout,
            self.node.kubelet_log,
            lambda: f"differ in {sorted(self.devices() ^ expected)[:6]}",
        )

    def apply_and_roll(self, timeout: float = 180) -> None:
        """Apply the overlay and wait until only pods of the new template serve."""
        old = {p["metadata"]["uid"] for p in self.pods()}
        self.write()
        self.cp.kubectl("apply", "-k", str(self.workdir))
        self.wait_rolled(old, timeout)

    def wait_rolled(self, old_uids: set[str], timeout: float = 180) -> None:
        """Wait until no pod in `old_uids` is left and a new one is Ready."""

        def rolled() -> bool:
            pods = self.pods()
            return not any(p["metadata"]["uid"] in old_uids for p in pods) and any(
                _pod_ready(p) for p in pods
            )

        wait(
            f"plugin DaemonSet rolled to overlay {self.overlay} tag {self.tag}",
            rolled,
            timeout,
            self.node.kubelet_log,
            self.describe,
        )

    def exec(self, *command: str) -> str:
        """Run a command in the (one) Ready plugin pod; its stdout."""
        [pod] = self.ready_pods()
        res = self.cp.kubectl(
            "exec", "-n", PLUGIN_NAMESPACE, pod["metadata"]["name"], "--", *command
        )
        return res.stdout

    def logs(self) -> str:
        """The Ready plugin pod's log."""
        [pod] = self.ready_pods()
        return self.cp.kubectl("logs", "-n", PLUGIN_NAMESPACE, pod["metadata"]["name"]).stdout

    def metrics(self) -> str:
        """The Ready plugin pod's metrics page (the DaemonSet's METRICS_PORT, 9400)."""
        return self.exec("python", "-c", _FETCH_METRICS)

    def metric(self, name: str, **labels: str) -> float | None:
        """The sum of the series of metric `name` whose labels include `labels`; None
        when the plugin exposes no such series."""
        return metric_sum(self.metrics(), name, **labels)

    def prepares_of(self, claim: JSON) -> int:
        """How often the Ready plugin pod did the work of preparing `claim` (its
        "prepared claim ns/name (uid U)" log line; an answer from the record of an
        already prepared claim writes nothing and logs no such line)."""
        return self.logs().count(f"prepared claim {claim_ref(claim)}:")

    def delete(self) -> None:
        """Remove what the overlay made, except the DeviceClasses the run's other
        scenarios use too, and wait for the plugin pods to go."""
        rendered = self.cp.kubectl("kustomize", str(self.workdir), check=False).stdout
        docs = [d for d in rendered.split("\n---\n") if "\nkind: DeviceClass\n" not in f"\n{d}\n"]
        self.cp.kubectl(
            "delete",
            "-f",
            "-",
            "--ignore-not-found",
            "--wait=false",
            input="\n---\n".join(docs),
            check=False,
        )
        wait("plugin pods gone", lambda: not self.pods(), 90, self.node.kubelet_log, self.describe)
        # Its namespace too, so that whoever applies the manifests next gets a live one.
        core = client.CoreV1Api(self.cp.api_client())
        wait(f"namespace {PLUGIN_NAMESPACE} gone",
             lambda: PLUGIN_NAMESPACE not in {n.metadata.name for n in core.list_namespace().items},
             120, self.node.kubelet_log)


@pytest.fixture(scope="package")
def plugin(real_node: Node, control_plane: ControlPlane) -> Iterator[PluginDeployment]:
    """deploy/overlays/fake on the real node (8 GPUs, 8 NICs)."""
    with tempfile.TemporaryDirectory(prefix="simdra-e2e-overlay-") as tmp:
        dep = PluginDeployment(control_plane, real_node, "fake", Path(tmp))
        try:
            dep.apply()
            yield dep
        finally:
            dep.delete()


# -- waiting -----------------------------------------------------------------------------


def wait(
    what: str,
    check: Callable[[], bool],
    timeout: float,
    log: Path | None,
    detail: Callable[[], str] | None = None,
) -> None:
    """Poll `check` until true; else fail with one line: what, detail, log file."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    extra = ""
    if detail:
        try:
            extra = f": {detail()}"
        except Exception as exc:  # the detail is best effort
            extra = f": ({exc})"
    raise AssertionError(f"{what}: not within {timeout:.0f} s{extra} (log: {log})")


_FETCH_METRICS = (
    "import urllib.request; "
    "print(urllib.request.urlopen('http://127.0.0.1:9400/metrics', timeout=10).read().decode())"
)


def metric_sum(text: str, name: str, **labels: str) -> float | None:
    """The sum of the samples of `name` in a Prometheus text page whose labels include
    `labels`; None when there is none."""
    values = [sample.value for family in text_string_to_metric_families(text)
              for sample in family.samples
              if sample.name == name and all(sample.labels.get(k) == v
                                             for k, v in labels.items())]
    return sum(values) if values else None


def _pod_ready(pod: JSON) -> bool:
    conds = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def node_slices(cp: ControlPlane, node: str) -> list[JSON]:
    """The driver's ResourceSlices of `node`."""
    res = client.ResourceV1Api(cp.api_client())
    items = res.list_resource_slice(field_selector=f"spec.nodeName={node}").items
    out = [cp.api_client().sanitize_for_serialization(s) for s in items]
    return [s for s in out if s["spec"]["driver"] == DRIVER]


def plugin_usage() -> JSON:
    """`simdra usage -o json` over the plugin's state on the node (its hostPath)."""
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "simdra",
            "usage",
            "--plugin-dir",
            str(PLUGINS_DIR / DRIVER),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert res.returncode == 0, f"simdra usage on the node failed: {res.stderr.strip()[-300:]}"
    return json.loads(res.stdout)


def ledger_holders(device: str) -> list[str]:
    """Claim UIDs the plugin's ledger on the node holds `device` for (`plugin_usage`)."""
    return [h["claim"]["uid"] for d in plugin_usage()["devices"] if d["device"] == device
            for h in d["holders"]]


def driver_slices(cp: ControlPlane, node: str, driver: str) -> list[JSON]:
    """The ResourceSlices of `node` that driver `driver` publishes (any driver's)."""
    res = client.ResourceV1Api(cp.api_client())
    items = res.list_resource_slice(field_selector=f"spec.nodeName={node}").items
    out = [cp.api_client().sanitize_for_serialization(s) for s in items]
    return [s for s in out if s["spec"]["driver"] == driver]


def helm(*args: str) -> str:
    """Real helm (hack/build-helm.sh builds and caches it; $SIMDRA_HELM names a built one);
    its stdout, or AssertionError with the end of its stderr."""
    binary = os.environ.get("SIMDRA_HELM") or subprocess.run(
        ["bash", str(REPO / "hack/build-helm.sh")], capture_output=True, text=True,
        check=True).stdout.strip().splitlines()[-1]
    result = subprocess.run([binary, *args], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"helm {args[0]}: {result.stderr.strip()[-500:]}"
    return result.stdout


def slice_device(cp: ControlPlane, node: str, name: str) -> JSON | None:
    """Device `name` as the driver's ResourceSlices of `node` publish it, or None."""
    for s in node_slices(cp, node):
        for d in s["spec"].get("devices") or []:
            if d["name"] == name:
                return dict(d)
    return None


def served_version(cp: ControlPlane, group: str, resource: str) -> str | None:
    """The newest version of `group` whose discovery lists `resource`, or None."""
    found = json.loads(cp.kubectl("get", "--raw", f"/apis/{group}").stdout)
    for version in found.get("versions") or []:  # discovery lists the preferred first
        gv = version["groupVersion"]
        listed = json.loads(cp.kubectl("get", "--raw", f"/apis/{gv}").stdout)
        if any(r["name"] == resource for r in listed.get("resources") or []):
            return str(gv)
    return None


def cdi_files() -> set[str]:
    """The driver's CDI spec files on the node."""
    prefix = f"k8s.{DRIVER}-device_"
    return {n for n in os.listdir(CDI_ROOT) if n.startswith(prefix)} if CDI_ROOT.is_dir() else set()


# -- workloads ---------------------------------------------------------------------------


class Kube:
    """Pods and ResourceClaimTemplates in NAMESPACE on the real node."""

    def __init__(self, cp: ControlPlane, node: Node) -> None:
        self.cp, self.node = cp, node
        self.api = cp.api_client()
        self.core = client.CoreV1Api(self.api)
        self.resource = client.ResourceV1Api(self.api)

    def ensure_namespace(self) -> None:
        try:
            self.core.create_namespace({"metadata": {"name": NAMESPACE}})
        except ApiException as exc:
            if exc.status != 409:
                raise
        # The namespace's default ServiceAccount must exist before pods are admitted.
        wait(
            f"ServiceAccount default in {NAMESPACE}",
            lambda: bool(
                self.core.list_namespaced_service_account(
                    NAMESPACE, field_selector="metadata.name=default"
                ).items
            ),
            60,
            None,
        )

    def template(
        self,
        name: str,
        device_class: str,
        capacity: dict[str, str] | None = None,
        count: int = 1,
        selector: str | None = None,
    ) -> None:
        """A ResourceClaimTemplate with one request for `count` devices of a class
        (optionally with a CEL selector)."""
        fields: JSON = {"count": count}
        if capacity:
            fields["capacity"] = {"requests": capacity}
        self.claim_template(name, [exact_request("dev", device_class, selector, **fields)])

    def claim_template(
        self, name: str, requests: list[JSON], constraints: list[JSON] | None = None
    ) -> None:
        """A ResourceClaimTemplate with these resource.k8s.io/v1 requests (and
        constraints), for a claim that needs more than one plain request."""
        devices: JSON = {"requests": requests}
        if constraints:
            devices["constraints"] = constraints
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"spec": {"devices": devices}},
        }
        self.resource.create_namespaced_resource_claim_template(NAMESPACE, body)

    def pod(self, name: str, template: str, command: str = PRINT_ENV) -> None:
        """A busybox pod on the real node whose container uses one claim from `template`."""
        self.create_pod(
            name,
            [container("app", [{"name": "dev"}], command)],
            [{"name": "dev", "resourceClaimTemplateName": template}],
        )

    def create_pod(
        self, name: str, containers: list[JSON], resource_claims: list[JSON] | None = None
    ) -> None:
        """A pod on the real node with these containers (`container()`) and
        spec.resourceClaims."""
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": on_real_node({"containers": containers, "restartPolicy": "Never",
                                  "resourceClaims": resource_claims or []}),
        }
        self.core.create_namespaced_pod(NAMESPACE, body)

    def claim(self, name: str, requests: list[JSON], config: list[JSON] | None = None) -> JSON:
        """A ResourceClaim with these requests (`request()`) and opaque config entries."""
        devices: JSON = {"requests": requests, **({"config": config} if config else {})}
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"devices": devices},
        }
        return self.api.sanitize_for_serialization(
            self.resource.create_namespaced_resource_claim(NAMESPACE, body)
        )

    @contextlib.contextmanager
    def device_class(self, name: str, device_type: str, **spec: Any) -> Iterator[None]:
        """A DeviceClass of this driver's devices of `device_type`, with more spec fields
        (`config`, `extendedResourceName`); deleted after."""
        expression = (
            f'device.driver == "{DRIVER}" && '
            f'device.attributes["{DRIVER}"].type == "{device_type}"'
        )
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}], **spec},
        }
        self.resource.create_device_class(body)
        try:
            yield
        finally:
            self.resource.delete_device_class(name)

    def read_claim(self, name: str) -> JSON:
        """The ResourceClaim `name` of NAMESPACE as it is now."""
        return self.api.sanitize_for_serialization(
            self.resource.read_namespaced_resource_claim(name, NAMESPACE)
        )

    def get_pod(self, name: str) -> JSON | None:
        try:
            return self.api.sanitize_for_serialization(
                self.core.read_namespaced_pod(name, NAMESPACE)
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def pod_summary(self, name: str) -> str:
        """Phase, container state and the pod's last events, for failure messages."""
        pod = self.get_pod(name)
        if pod is None:
            return "pod gone"
        st = pod.get("status", {})
        cs = (st.get("containerStatuses") or [{}])[0].get("state")
        events = self.core.list_namespaced_event(
            NAMESPACE, field_selector=f"involvedObject.name={name}"
        ).items
        last = "; ".join(f"{e.reason}: {e.message}" for e in events[-3:])
        return f"phase {st.get('phase')}, state {cs}, events: {last}"

    def wait_running(self, name: str, timeout: float = 120) -> JSON:
        """Wait until the pod's container runs; return the pod."""
        wait(
            f"pod {NAMESPACE}/{name} Running on {self.node.name}",
            lambda: (self.get_pod(name) or {}).get("status", {}).get("phase") == "Running",
            timeout,
            self.node.kubelet_log,
            lambda: self.pod_summary(name),
        )
        return self.get_pod(name) or {}

    def wait_unschedulable(self, name: str, timeout: float = 90) -> None:
        """Wait until the scheduler has marked the pod Unschedulable (it stays Pending);
        `kubectl dra why` must agree."""

        def refused() -> bool:
            conds = ((self.get_pod(name) or {}).get("status") or {}).get("conditions") or []
            return any(
                c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conds
            )

        wait(
            f"pod {NAMESPACE}/{name} marked Unschedulable",
            refused,
            timeout,
            self.node.kubelet_log,
            lambda: self.pod_summary(name),
        )
        why_agrees_pending(self.cp, NAMESPACE, name)

    def wait_gone(self, name: str, timeout: float = 90) -> None:
        """Wait until the pod object is gone (deleted by someone else: an eviction)."""
        wait(
            f"pod {NAMESPACE}/{name} gone",
            lambda: self.get_pod(name) is None,
            timeout,
            self.node.kubelet_log,
            lambda: self.pod_summary(name),
        )

    def env(
        self, name: str, timeout: float = 60, container: str | None = None
    ) -> dict[str, str]:
        """The SIMDRA_ variables the pod's container printed (its log, via the kubelet);
        `container` names one of several."""
        out: dict[str, str] = {}

        def printed() -> bool:
            try:
                text = self.core.read_namespaced_pod_log(name, NAMESPACE, container=container)
            except ApiException:
                return False
            out.clear()
            out.update(line.split("=", 1) for line in text.splitlines() if "=" in line)
            return bool(out)

        wait(
            f"pod {NAMESPACE}/{name} {container or ''} printed its env",
            printed,
            timeout,
            self.node.kubelet_log,
            lambda: self.pod_summary(name),
        )
        return out

    def log(self, name: str, timeout: float = 60) -> str:
        """The pod's log once its container printed something (via the kubelet)."""
        out: list[str] = []

        def printed() -> bool:
            try:
                text = self.core.read_namespaced_pod_log(name, NAMESPACE)
            except ApiException:
                return False
            out[:] = [text]
            return bool(text.strip())

        wait(f"pod {NAMESPACE}/{name} printed", printed, timeout, self.node.kubelet_log,
             lambda: self.pod_summary(name))
        return out[0]

    def claim_of(self, pod: JSON) -> JSON:
        """The ResourceClaim the controller made for the pod's one claim."""
        name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        return self.api.sanitize_for_serialization(
            self.resource.read_namespaced_resource_claim(name, NAMESPACE)
        )

    def delete_pod(self, name: str, timeout: float = 90) -> None:
        """Delete and wait until the pod object is gone (the kubelet has unprepared)."""
        try:
            self.core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=1)
        except ApiException as exc:
            if exc.status != 404:
                raise
        wait(
            f"pod {NAMESPACE}/{name} deleted",
            lambda: self.get_pod(name) is None,
            timeout,
            self.node.kubelet_log,
        )

    def failed_prepares(self, *pods: str) -> list[str]:
        """Messages of FailedPrepareDynamicResources events of NAMESPACE's pods (of
        `pods` only, when named: Events outlive the pods of earlier scenarios)."""
        events = self.core.list_namespaced_event(
            NAMESPACE, field_selector="reason=FailedPrepareDynamicResources"
        ).items
        return [f"{e.involved_object.name}: {e.message}" for e in events
                if not pods or e.involved_object.name in pods]

    def delete_all(self) -> None:
        """Every pod, template and claim of NAMESPACE, waiting until all are gone.

        A template's claim outlives its pod until the claim controller deletes it, and
        until then the scheduler still counts its devices and capacity: the next
        scenario would find them taken (seen in CI: a 150m share left on gpu-0 kept
        the next scenario's 450m share Pending)."""
        for p in self.core.list_namespaced_pod(NAMESPACE).items:
            self.core.delete_namespaced_pod(p.metadata.name, NAMESPACE, grace_period_seconds=1)
        self.resource.delete_collection_namespaced_resource_claim_template(NAMESPACE)
        wait(
            f"pods in {NAMESPACE} deleted",
            lambda: not self.core.list_namespaced_pod(NAMESPACE).items,
            120,
            self.node.kubelet_log,
        )
        self.resource.delete_collection_namespaced_resource_claim(NAMESPACE)
        wait(
            f"claims in {NAMESPACE} deleted",
            lambda: not self.resource.list_namespaced_resource_claim(NAMESPACE).items,
            60,
            self.node.kubelet_log,
        )


@pytest.fixture
def kube(plugin: PluginDeployment, control_plane: ControlPlane, real_node: Node) -> Iterator[Kube]:
    """Workloads of one scenario on the real node, all deleted afterwards."""
    k = Kube(control_plane, real_node)
    k.ensure_namespace()
    try:
        yield k
    finally:
        k.delete_all()


def unit_env(env: dict[str, str]) -> dict[str, dict[str, str]]:
    """SIMDRA_DEVICE_<ID>_<KEY>=v grouped as {ID: {KEY: v}} (simdra/_driver/claims/plan/cdi.py)."""
    units: dict[str, dict[str, str]] = {}
    for key, value in env.items():
        if key.startswith("SIMDRA_DEVICE_"):
            uid, _, rest = key[len("SIMDRA_DEVICE_") :].partition("_")
            units.setdefault(uid, {})[rest] = value
    return units


def allocated(claim: JSON) -> list[JSON]:
    """The claim's allocation results (status.allocation.devices.results)."""
    return list(claim["status"]["allocation"]["devices"]["results"])


def spec_file(claim: JSON) -> str:
    """The name of the CDI spec file the plugin writes for the claim."""
    return f"k8s.dra.example.com-device_{claim['metadata']['uid']}.json"


def claim_ref(claim: JSON) -> str:
    """`ns/name (uid U)`: how the plugin's log names a claim."""
    meta = claim["metadata"]
    return f"{meta['namespace']}/{meta['name']} (uid {meta['uid']})"


def container(
    name: str,
    claims: list[JSON] | None = None,
    command: str = PRINT_ENV,
    limits: dict[str, str] | None = None,
) -> JSON:
    """A busybox container that prints its SIMDRA_ env and sleeps; `claims` is its
    resources.claims (`{"name": ..., "request": ...}`), `limits` its resources.limits."""
    resources: JSON = {"claims": claims} if claims else {}
    if limits:
        resources["limits"] = limits
    return {
        "name": name,
        "image": BUSYBOX,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", command],
        "resources": resources,
    }


def on_real_node(spec: JSON) -> JSON:
    """A pod spec pinned to the real node, quick to delete, with no cluster DNS (there is
    none here)."""
    return {
        **spec,
        "nodeSelector": {NODE_LABEL: "true"},
        "dnsPolicy": "Default",
        "terminationGracePeriodSeconds": 1,
    }


def request(
    name: str, device_class: str, capacity: dict[str, str] | None = None, count: int = 1
) -> JSON:
    """One `exactly` request of a claim spec."""
    exactly: JSON = {"deviceClassName": device_class, "allocationMode": "ExactCount",
                     "count": count}
    if capacity:
        exactly["capacity"] = {"requests": capacity}
    return {"name": name, "exactly": exactly}


def cdi_mtimes() -> dict[str, int]:
    """The driver's CDI spec files on the node and their mtime (ns)."""
    return {n: (CDI_ROOT / n).stat().st_mtime_ns for n in cdi_files()}


def exact_request(name: str, device_class: str, selector: str | None = None, **fields: Any) -> JSON:
    """One resource.k8s.io/v1 request `{name, exactly: {...}}`: ExactCount of `count`
    (default 1) devices of a class, an optional CEL selector, and any other `exactly`
    fields (adminAccess, tolerations, capacity)."""
    exactly: JSON = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": 1}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    exactly.update(fields)
    return {"name": name, "exactly": exactly}
