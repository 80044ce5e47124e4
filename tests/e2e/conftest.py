"""Fixtures of the real-cluster e2e (`./hack/e2e.sh`): one control plane per run, emulated
nodes whose plugin publishes to it, and a scenario table at the end.

Every test here is marked `e2e`; the fast test command deselects them.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .controlplane import ComponentError, ControlPlane
from .hostnode import HostNode
from .workloads import Workloads

REPO = Path(__file__).resolve().parents[2]
GPU_NODE = "e2e-gpu"
MIG_NODE = "e2e-mig"
CEL_NODE = "e2e-cel"
_results: list[tuple[str, str, float, str]] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


def logs_dir() -> Path:
    """Where this run's component logs go (SIMDRA_E2E_LOGS, else a fresh temp dir)."""
    chosen = os.environ.get("SIMDRA_E2E_LOGS")
    if chosen:
        path = Path(chosen)
    else:
        path = Path(os.environ.get("TMPDIR", "/tmp")) / f"simdra-e2e-{os.getpid()}"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def e2e_bin() -> Path:
    """The directory with the real components (built and cached by tests/e2e/build.sh)."""
    chosen = os.environ.get("SIMDRA_E2E_BIN")
    if chosen:
        return Path(chosen)
    result = subprocess.run(["bash", str(REPO / "tests/e2e/build.sh")], capture_output=True,
                            text=True)
    if result.returncode != 0:
        pytest.fail(result.stderr.strip().splitlines()[-1], pytrace=False)
    return Path(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def control_plane(e2e_bin: Path) -> Iterator[ControlPlane]:
    """etcd, kube-apiserver, kube-controller-manager and kube-scheduler for the run."""
    workdir = logs_dir() / "control-plane"
    try:
        cp = ControlPlane(e2e_bin, workdir).__enter__()
    except ComponentError as err:
        pytest.fail(f"control plane: {err}", pytrace=False)
    try:
        cp.kubectl("apply", "-f", str(REPO / "deploy/base/deviceclasses.yaml"))
        yield cp
    finally:
        cp.stop()


def _node(cp: ControlPlane, name: str, profile: str, count: int) -> Iterator[HostNode]:
    node = HostNode(cp, name, logs_dir() / name, profile, count)
    try:
        node.start()
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="session")
def gpu_node(control_plane: ControlPlane) -> Iterator[HostNode]:
    """An emulated node with 2 exclusive GPUs and 2 NICs whose bandwidth is shared."""
    yield from _node(control_plane, GPU_NODE, "gpu,nic", 2)


@pytest.fixture(scope="session")
def mig_node(control_plane: ControlPlane) -> Iterator[HostNode]:
    """An emulated node with one partitionable GPU."""
    yield from _node(control_plane, MIG_NODE, "gpu-partitioned", 1)


@pytest.fixture(scope="session")
def cel_node(control_plane: ControlPlane) -> Iterator[HostNode]:
    """An emulated node whose devices (inventories/cel.yaml) differ in every attribute."""
    yield from _node(control_plane, CEL_NODE, str(Path(__file__).parent / "inventories/cel.yaml"),
                     1)


@pytest.fixture
def workloads(control_plane: ControlPlane) -> Iterator[Workloads]:
    """Pods and templates in `default`, removed after the test."""
    w = Workloads(control_plane.api_client(), cp=control_plane)
    try:
        yield w
    finally:
        w.delete_all()


# -- reporting ------------------------------------------------------------------------------

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        first = ""
        if report.failed:
            text = str(report.longrepr).strip().splitlines()
            errors = [line for line in text if line.startswith("E ")]
            first = (errors[0][2:].strip() if errors else text[-1] if text else "")[:200]
        elif report.skipped and isinstance(report.longrepr, tuple):
            first = str(report.longrepr[2]).removeprefix("Skipped: ")[:200]
        _results.append((item.name, report.outcome, report.duration, first))


def _release(stamp_name: str = "VERSION") -> str:
    """The Kubernetes release this run built (its bin directory's VERSION stamp); with
    "KUBELET_VERSION", the kubelet's where it is another (tests/e2e/build.sh), else ""."""
    stamp = Path(os.environ.get("SIMDRA_E2E_BIN", "/nonexistent")) / stamp_name
    if stamp.exists():
        return stamp.read_text().strip()
    return "unknown" if stamp_name == "VERSION" else ""


def _release_line() -> str:
    kubelet = _release("KUBELET_VERSION")
    if not kubelet:
        return f"Kubernetes {_release()}"
    return (f"Kubernetes {_release()} control plane, kubelet {kubelet} (the newest that "
            "builds here; a kubelet up to three minors older is a supported skew)")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _results:
        return
    write = terminalreporter.write_line
    write("")
    write(_release_line())
    write(f"{'scenario':<52} {'result':<8} {'seconds':>8}")
    for name, outcome, duration, why in _results:
        note = f"  ({why})" if outcome == "skipped" else ""
        write(f"{name:<52} {outcome:<8} {duration:>8.1f}{note}")
    for name, outcome, _, first in _results:
        if outcome == "failed":
            write(f"E2E FAILED: {name}: {first} (logs: {logs_dir()})")
    # For hack/e2e-matrix.sh: one line per scenario, tab-separated.
    kubelet = _release("KUBELET_VERSION")
    lines = [f"{_release()}\t{n}\t{o}\t{d:.1f}\t{w}\t{kubelet}" for n, o, d, w in _results]
    (logs_dir() / "results.tsv").write_text("".join(f"{line}\n" for line in lines))

