"""Which gates and APIs the e2e's control plane turns on for a release: read from that
release's own `kube-apiserver --help` (a stand-in script here) and its version."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.controlplane import RUNTIME_CONFIG, ControlPlane


def _release(tmp_path: Path, version: str, gates: list[str]) -> ControlPlane:
    """A control plane (not started) whose kube-apiserver --help lists these gates."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "VERSION").write_text(f"{version}\n")
    lines = "".join(f"echo '  {gate}=true|false (ALPHA - default=false)'\n" for gate in gates)
    script = bin_dir / "kube-apiserver"
    script.write_text(f"#!/bin/sh\n{lines}")
    script.chmod(0o755)
    return ControlPlane(bin_dir, tmp_path / "work")


@pytest.mark.parametrize(("version", "api"), [
    ("v1.36.3", "scheduling.k8s.io/v1alpha2"), ("v1.37.2", "scheduling.k8s.io/v1beta1")])
def test_workload_claims_come_with_generic_workload_and_the_pod_group_api(
        tmp_path: Path, version: str, api: str) -> None:
    cp = _release(tmp_path, version, ["DRAWorkloadResourceClaims", "GenericWorkload"])
    gates = cp.feature_gates()
    assert gates.split(",") == ["DRAWorkloadResourceClaims=true", "GenericWorkload=true"]
    assert cp.runtime_config(gates) == f"{RUNTIME_CONFIG},{api}=true"


def test_generic_workload_alone_is_left_off(tmp_path: Path) -> None:
    # 1.35 has the Workload API's gate but no workload claims: nothing of ours needs it.
    cp = _release(tmp_path, "v1.35.4", ["GenericWorkload", "DRAAdminAccess"])
    gates = cp.feature_gates()
    assert gates == "DRAAdminAccess=true"
    assert cp.runtime_config(gates) == RUNTIME_CONFIG
