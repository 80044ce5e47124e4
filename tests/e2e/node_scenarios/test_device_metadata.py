"""Device metadata (KEP-5304) on the real node: a real container reads its claim's
metadata file at upstream's path (template claims under the pod's claim name, named
claims under the claim's name), and upstream's own decoder
(k8s.io/dynamic-resource-allocation/devicemetadata, built here as
tests/e2e/cmd/metadata-check) decodes and validates what the container saw; unprepare
removes the file from the node; a rewrite of the file (the plugin's start-up restoring
it from the claim's record) reaches the running container, which mounts the request's
directory. The feature is the driver's, with no gate: it runs on every release."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .. import realnode
from ..realnode import (
    DATA_DIR,
    DRIVER,
    HOLD,
    JSON,
    NAMESPACE,
    PLUGIN_NAMESPACE,
    Kube,
    PluginDeployment,
    allocated,
    container,
    request,
)

GPU = "gpu.dra.example.com"
INSIDE = "/var/run/kubernetes.io/dra-device-attributes"
V1BETA1 = "metadata.resource.k8s.io/v1beta1"


@pytest.fixture(scope="module")
def checkers() -> Path:
    """The directory of the upstream judges (tests/e2e/build-checkers.sh, cached)."""
    return realnode._script("build-checkers.sh")


def _cat(path: str) -> str:
    return f"cat {path}; {HOLD}"


def _judge(checkers: Path, stream: str, tmp_path: Path) -> JSON:
    """Upstream's verdict on a metadata stream: what it decoded, or why it could not."""
    file = tmp_path / "metadata.json"
    file.write_text(stream)
    done = subprocess.run([str(checkers / "metadata-check"), str(file)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    verdict: JSON = json.loads(done.stdout)
    assert "invalid" not in verdict, verdict["invalid"]
    return verdict


def _check_devices(verdict: JSON, claim: JSON, request_name: str) -> None:
    [entry] = verdict["requests"]
    assert entry["name"] == request_name
    [result] = allocated(claim)
    [device] = entry["devices"]
    assert (device["driver"], device["pool"], device["name"]) == (
        DRIVER, result["pool"], result["device"])
    assert "resource.kubernetes.io/numaNode" in device["attributes"], device


def test_node_container_reads_template_claim_metadata(kube: Kube, checkers: Path,
                                                      tmp_path: Path) -> None:
    """A claim from a template: the file sits under the pod's claim name (`dev`), says
    so in podClaimName, and upstream decodes its newest version."""
    kube.template("md-gpu", GPU)
    inside = f"{INSIDE}/resourceclaimtemplates/dev/dev/{DRIVER}-metadata.json"
    kube.pod("md-template-pod", "md-gpu", command=_cat(inside))
    claim = kube.claim_of(kube.wait_running("md-template-pod"))
    verdict = _judge(checkers, kube.log("md-template-pod"), tmp_path)

    meta = claim["metadata"]
    assert verdict["apiVersion"] == V1BETA1
    assert (verdict["namespace"], verdict["name"], verdict["uid"]) == (
        NAMESPACE, meta["name"], meta["uid"])
    assert (verdict["podClaimName"], verdict["generation"]) == ("dev", 1)
    _check_devices(verdict, claim, "dev")


def test_node_container_reads_named_claim_metadata_and_unprepare_removes_it(
        kube: Kube, checkers: Path, tmp_path: Path) -> None:
    """A claim named by the pod: the file sits under the claim's name; on the node it is
    under the plugin's data directory until the pod goes."""
    kube.claim("md-named", [request("gpu", GPU)])
    inside = f"{INSIDE}/resourceclaims/md-named/gpu/{DRIVER}-metadata.json"
    kube.create_pod("md-named-pod", [container("app", [{"name": "md"}], _cat(inside))],
                    [{"name": "md", "resourceClaimName": "md-named"}])
    kube.wait_running("md-named-pod")
    claim = kube.read_claim("md-named")
    verdict = _judge(checkers, kube.log("md-named-pod"), tmp_path)

    assert "podClaimName" not in verdict
    _check_devices(verdict, claim, "gpu")
    on_node = Path(DATA_DIR, "dra-device-metadata", claim["metadata"]["uid"])
    assert (on_node / "gpu" / f"{DRIVER}-metadata.json").read_text() == kube.log("md-named-pod")
    kube.delete_pod("md-named-pod")
    realnode.wait(f"{on_node} removed after unprepare", lambda: not on_node.exists(), 60,
                  kube.node.kubelet_log)


def _generation(stream: str) -> int:
    return int(json.loads(stream.splitlines()[0])["metadata"]["generation"])


def test_node_a_rewrite_of_the_metadata_reaches_the_running_container(
        kube: Kube, plugin: PluginDeployment) -> None:
    """The file on the node is damaged while the pod runs; the plugin's next start
    restores it from the claim's record as generation 2, renaming a new file into the
    request's directory, and the running container reads that one (a bind-mounted file
    would have kept it on the old inode)."""
    kube.claim("md-rewrite", [request("gpu", GPU)])
    inside = f"{INSIDE}/resourceclaims/md-rewrite/gpu/{DRIVER}-metadata.json"
    kube.create_pod("md-rewrite-pod", [container("app", [{"name": "md"}], HOLD)],
                    [{"name": "md", "resourceClaimName": "md-rewrite"}])
    kube.wait_running("md-rewrite-pod")

    def read_inside() -> str:
        return kube.cp.kubectl("exec", "-n", NAMESPACE, "md-rewrite-pod", "--",
                               "cat", inside).stdout

    assert _generation(read_inside()) == 1
    claim = kube.read_claim("md-rewrite")
    [result] = allocated(claim)
    on_node = Path(DATA_DIR, "dra-device-metadata", claim["metadata"]["uid"], "gpu",
                   f"{DRIVER}-metadata.json")
    on_node.write_text(on_node.read_text().replace(f'"{result["device"]}"', '"damaged"'))
    old = {p["metadata"]["uid"] for p in plugin.pods()}
    [old_name] = [p["metadata"]["name"] for p in plugin.pods()]
    plugin.cp.kubectl("delete", "pod", "-n", PLUGIN_NAMESPACE, old_name, "--wait=false")
    plugin.wait_rolled(old)
    realnode.wait("the restarted plugin restores the metadata file as generation 2",
                  lambda: _generation(on_node.read_text()) == 2, 60, kube.node.kubelet_log)

    seen = read_inside()
    assert _generation(seen) == 2 and '"damaged"' not in seen
    assert seen == on_node.read_text()
