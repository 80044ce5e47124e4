"""kwok's controller against a ControlPlane: it plays the kubelet of fake nodes, so pods the
real scheduler binds there become Running and Ready, and deleted ones go away.

    kwok_dir = build_kwok()                        # tests/e2e/build-kwok.sh, cached
    with Kwok(cp, kwok_dir, workdir) as kwok:
        ...                                        # nodes annotated kwok.x-k8s.io/node=fake

It manages only nodes carrying FAKE_NODE_ANNOTATION (never the e2e's real node), with
kwok's own Stages from the module it was built from (build-kwok.sh writes stages.yaml).
Opt-in: ControlPlane itself starts no kwok.
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from pathlib import Path

from .controlplane import Component, ComponentError, ControlPlane, free_port, tail

REPO = Path(__file__).resolve().parents[2]
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node=fake"
# Addresses kwok writes into the status of its nodes and pods. Nothing ever connects to
# them; the pods' range is the benchmarking one (RFC 2544), wide enough for 5,000 pods.
NODE_IP = "127.0.0.1"
POD_CIDR = "198.18.0.0/15"
START_TIMEOUT = 60.0


def build_kwok() -> Path:
    """The directory with kwok and its stages.yaml: $SIMDRA_E2E_KWOK (hack/e2e.sh built
    it), else built now, once, by build-kwok.sh."""
    chosen = os.environ.get("SIMDRA_E2E_KWOK")
    if chosen:
        return Path(chosen)
    result = subprocess.run(["bash", str(REPO / "tests/e2e/build-kwok.sh")],
                            capture_output=True, text=True)
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines() or [f"build-kwok.sh exited {result.returncode}"]
        raise ComponentError(lines[-1])
    return Path(result.stdout.strip().splitlines()[-1])


class Kwok:
    """The kwok controller process. A context manager; stop() is safe to repeat."""

    def __init__(self, cp: ControlPlane, kwok_dir: Path, workdir: Path) -> None:
        self.cp = cp
        self.kwok_dir = kwok_dir
        self.workdir = workdir
        self.component: Component | None = None
        self.port = 0

    def __enter__(self) -> Kwok:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def args(self) -> list[str]:
        """The controller's command line."""
        return [
            str(self.kwok_dir / "kwok"),
            "--kubeconfig", str(self.cp.kubeconfig),
            "--config", str(self.kwok_dir / "stages.yaml"),
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector", FAKE_NODE_ANNOTATION,
            "--node-ip", NODE_IP,
            "--cidr", POD_CIDR,
            "--server-address", f"127.0.0.1:{self.port}",
        ]

    def start(self) -> None:
        """Start it and wait until it serves /healthz (it has then synced its informers)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.component = Component("kwok", self.args(), self.workdir / "kwok.log")
        self.component.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not _http_ok(f"http://127.0.0.1:{self.port}/healthz"):
            self.component.check()
            if time.monotonic() > deadline:
                raise ComponentError(f"kwok: no /healthz after {START_TIMEOUT:.0f}s; log: "
                                     f"{self.component.log_path}\n{tail(self.component.log_path)}")
            time.sleep(0.2)

    def check(self) -> None:
        """Raise ComponentError if kwok has exited."""
        if self.component is not None:
            self.component.check()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL."""
        if self.component is not None:
            self.component.stop()

    @property
    def pid(self) -> int | None:
        """The controller's process id while it runs (for CPU and memory figures)."""
        process = self.component.process if self.component else None
        return process.pid if process is not None else None


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False
