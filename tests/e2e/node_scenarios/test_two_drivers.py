"""Two drivers on one node: simdra's own DaemonSet and the example driver built on simdra
as a library (docs/examples/crypto-driver, driver crypto.example.com), installed next to
it with real helm from simdra's chart and the example's values file. One pod uses a
device of each; the container gets both."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .. import releases
from ..node import CRYPTO_DRIVER_IMAGE
from ..realnode import (
    CDI_ROOT,
    DRIVER,
    JSON,
    NAMESPACE,
    NODE_LABEL,
    REPO,
    Kube,
    PluginDeployment,
    allocated,
    container,
    driver_slices,
    helm,
    request,
    unit_env,
    wait,
)

CRYPTO = "crypto.example.com"
RELEASE = "crypto-driver"  # its helm release, and the namespace it goes into
VALUES = REPO / "docs/examples/crypto-driver/values.yaml"
CRYPTO_CONFIG = {"apiVersion": f"{CRYPTO}/v1alpha1", "kind": "CryptoConfig",
                 "algorithm": "chacha20-poly1305", "queueDepth": 16}


def _crypto_pods(kube: Kube) -> str:
    """The crypto driver's pods and their container state, for failure messages."""
    pods = kube.core.list_namespaced_pod(RELEASE).items
    return "; ".join(
        f"{p.metadata.name}: {p.status.phase} "
        f"{p.status.container_statuses[0].state if p.status.container_statuses else ''}"
        for p in pods) or "no crypto-driver pods"


def _crypto_ready(kube: Kube) -> bool:
    """Its plugin pod passes its readiness probe: registered with the kubelet and its
    slices published (the `readiness` health service)."""
    return any(c.type == "Ready" and c.status == "True"
               for p in kube.core.list_namespaced_pod(RELEASE).items
               for c in (p.status.conditions or []))


def _namespaces(kube: Kube) -> set[str]:
    return {n.metadata.name for n in kube.core.list_namespace().items}


@pytest.fixture
def crypto_driver(kube: Kube, plugin: PluginDeployment) -> Iterator[None]:
    """The crypto driver's release on the real node (the e2e image, never pulled), with
    simdra's DaemonSet (`plugin`) serving the node too; uninstalled after, with its
    namespace and the slices its plugin leaves (helm deletes neither)."""
    cp = kube.cp
    kubeconfig = str(cp.kubeconfig)
    repository, _, tag = CRYPTO_DRIVER_IMAGE.rpartition(":")
    cp.kubectl("create", "namespace", RELEASE)
    cp.kubectl("label", "namespace", RELEASE, "pod-security.kubernetes.io/enforce=privileged")
    installed = False
    try:
        helm("install", RELEASE, str(REPO / "deploy/helm/simdra"), "--kubeconfig", kubeconfig,
             "--namespace", RELEASE, "-f", str(VALUES),
             "--set", f"image.repository={repository}", "--set", f"image.tag={tag}",
             "--set", "image.pullPolicy=Never",
             "--set-json", f'nodeSelector={{"{NODE_LABEL}": "true"}}')
        installed = True
        yield
    finally:
        # The pods first: only a running plugin unprepares their claims.
        kube.delete_all()
        if installed:
            helm("uninstall", RELEASE, "--kubeconfig", kubeconfig, "--namespace", RELEASE,
                 "--wait", "--timeout", "2m")
        cp.kubectl("delete", "namespace", RELEASE, "--wait=false", check=False)
        cp.kubectl("delete", "resourceslices", f"--field-selector=spec.driver={CRYPTO}",
                   check=False)
        wait(f"namespace {RELEASE} gone after helm uninstall",
             lambda: RELEASE not in _namespaces(kube), 120, kube.node.kubelet_log)


def _devices(kube: Kube, driver: str) -> dict[str, JSON]:
    return {d["name"]: d for s in driver_slices(kube.cp, kube.node.name, driver)
            for d in s["spec"].get("devices") or []}


def test_node_two_drivers_serve_one_pod(kube: Kube, crypto_driver: None) -> None:
    """simdra's GPUs and the crypto driver's accelerators are published side by side; a
    pod with a GPU claim and a crypto claim (a share of `sessions`, a CryptoConfig) runs,
    each claim prepared by its own driver: the container gets the GPU's env and the crypto
    device's attributes and config."""
    node = kube.node.name
    # Ready, not only published: the plugin publishes before the kubelet has registered
    # it, and a pod bound in between fails its first prepare ("driver not registered").
    wait(f"{CRYPTO} plugin Ready and the slices of {DRIVER} and {CRYPTO} on {node}",
         lambda: _crypto_ready(kube) and bool(_devices(kube, DRIVER))
         and bool(_devices(kube, CRYPTO)),
         180, kube.node.kubelet_log, lambda: _crypto_pods(kube))
    crypto_devices = _devices(kube, CRYPTO)
    assert sorted(crypto_devices) == ["crypto-0", "crypto-1"]  # values.yaml: count 2
    assert crypto_devices["crypto-0"]["attributes"]["type"] == {"string": "crypto"}
    assert not {n for n in _devices(kube, DRIVER) if n.startswith("crypto")}
    # A share of the accelerator where this release allocates capacity requests; its
    # default share (1 session) elsewhere. queueDepth 16 fits one session (16 each).
    sessions = {"sessions": "4"} if releases.capacity_requests_allocate(kube.cp) else None
    kube.claim("two-gpu", [request("gpu", f"gpu.{DRIVER}")])
    kube.claim("two-crypto", [request("crypto", f"crypto.{CRYPTO}", capacity=sessions)],
               config=[{"requests": ["crypto"],
                        "opaque": {"driver": CRYPTO, "parameters": CRYPTO_CONFIG}}])
    kube.create_pod(
        "two-drivers",
        [container("app", [{"name": "gpu"}, {"name": "crypto"}])],
        [{"name": "gpu", "resourceClaimName": "two-gpu"},
         {"name": "crypto", "resourceClaimName": "two-crypto"}],
    )
    kube.wait_running("two-drivers")
    gpu_claim, crypto_claim = kube.read_claim("two-gpu"), kube.read_claim("two-crypto")
    [gpu], [crypto] = allocated(gpu_claim), allocated(crypto_claim)
    assert (gpu["driver"], crypto["driver"]) == (DRIVER, CRYPTO)
    units = {unit["TYPE"]: unit for unit in unit_env(kube.env("two-drivers")).values()}
    assert sorted(units) == ["crypto", "gpu"], units
    assert (units["gpu"]["NAME"], units["gpu"]["CLAIM"]) == (gpu["device"], f"{NAMESPACE}/two-gpu")
    mine = units["crypto"]
    assert (mine["NAME"], mine["CLAIM"]) == (crypto["device"], f"{NAMESPACE}/two-crypto")
    assert (mine["CRYPTO_ALGORITHM"], mine["CRYPTO_QUEUE_DEPTH"]) == ("chacha20-poly1305", "16")
    published = crypto_devices[crypto["device"]]["attributes"]
    assert mine["MODEL"] == published["model"]["string"]
    assert mine["GENERATION"] == str(published["generation"]["int"])
    if sessions:
        assert mine["CAPACITY_SESSIONS"] == "4"
    # Each driver wrote the CDI spec of its own claim, under its own name.
    specs = {p.name for p in CDI_ROOT.iterdir()}
    assert f"k8s.{DRIVER}-device_{gpu_claim['metadata']['uid']}.json" in specs
    assert f"k8s.{CRYPTO}-device_{crypto_claim['metadata']['uid']}.json" in specs
    assert kube.failed_prepares("two-drivers") == []
