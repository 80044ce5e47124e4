"""The fleet bench's cluster: the e2e's real control plane (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler) and kwok's controller, an identity of the fleet's
own whose requests the API server counts apart, and the `simdra fleet` process.

The API server's `apiserver_request_total` has no label for who asked, so the fleet runs as
a service account of its own, matched by FlowSchemas of its own (bench/fleet_requests.py):
the server's `apiserver_flowcontrol_dispatched_requests_total` for them then counts every
request the fleet made (watches included), as the server saw them, by verb and resource.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
from fleet_api import Api
from fleet_requests import by_schema, codes, flow_schemas

from tests.e2e.controlplane import ADMIN_TOKEN, ControlPlane
from tests.e2e.kwok import Kwok, build_kwok

REPO = Path(__file__).resolve().parents[1]
FLEET_ACCOUNT = ("kube-system", "simdra-fleet")
FLOW_SCHEMA = "simdra-fleet"
DRIVER_NAME = "dra.example.com"
PUBLISHED = re.compile(r"fleet: published (\d+) nodes, (\d+) slices in ([0-9.]+) ?s")


class Cluster:
    """ControlPlane + kwok + the device classes. A context manager."""

    def __init__(self, bin_dir: Path, workdir: Path, client_qps: float | None = None) -> None:
        self.workdir = workdir
        self.cp = ControlPlane(bin_dir, workdir / "control-plane", client_qps=client_qps)
        self.kwok: Kwok | None = None
        self.api: Api | None = None

    def __enter__(self) -> Cluster:
        self.cp.__enter__()
        try:
            self.kwok = Kwok(self.cp, build_kwok(), self.workdir / "kwok").__enter__()
            self.cp.kubectl("apply", "-f", str(REPO / "deploy/base/deviceclasses.yaml"))
            self.api = Api(self.cp.server, ADMIN_TOKEN, self.cp.certs.ca_cert)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.kwok is not None:
            self.kwok.stop()
        self.cp.stop()

    def admin(self) -> Api:
        """The cluster-admin client (exempt from priority and fairness)."""
        assert self.api is not None
        return self.api

    def fleet_kubeconfig(self) -> Path:
        """A kubeconfig of the fleet's own service account (cluster-admin by RBAC, its
        requests in FlowSchemas FLOW_SCHEMA*)."""
        return self.counted_kubeconfig(FLEET_ACCOUNT, FLOW_SCHEMA,
                                       self.workdir / "fleet.kubeconfig")

    def counted_kubeconfig(self, account: tuple[str, str], schema: str, path: Path) -> Path:
        """A kubeconfig of service account `account` (namespace, name), cluster-admin by
        RBAC, whose every request the server counts under FlowSchemas `schema` (the
        catch-all) and `schema-<verb>-<resource>` (Nodes and slices)."""
        api, (ns, name) = self.admin(), account
        api.call("POST", f"/api/v1/namespaces/{ns}/serviceaccounts",
                 {"metadata": {"name": name}})
        api.call("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]})
        for body in flow_schemas(ns, name, schema):
            api.call("POST", "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas", body)
        token = api.call("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token",
                         {"spec": {"expirationSeconds": 86400}})["status"]["token"]
        return self.cp.write_kubeconfig(path, token=token, user=name)

    def fleet_requests(self) -> float:
        """Requests the API server dispatched for the fleet so far."""
        return self.counted_requests(FLOW_SCHEMA)

    def counted_requests(self, schema: str) -> float:
        """Requests the API server dispatched so far in FlowSchemas `schema*`."""
        return sum(by_schema(self.admin().metrics(), schema).values())

    def request_counts(self) -> tuple[dict[str, float], dict[str, float]]:
        """(the fleet's requests by verb and resource, every client's requests
        by verb, resource and answer code), so far."""
        text = self.admin().metrics()
        return by_schema(text, FLOW_SCHEMA), codes(text)


def fleet_available() -> str | None:
    """None when `simdra fleet` exists here, else why not (one line)."""
    result = subprocess.run([sys.executable, "-m", "simdra", "fleet", "--help"],
                            capture_output=True, text=True, cwd=REPO)
    if result.returncode == 0:
        return None
    lines = (result.stderr or result.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit {result.returncode}"


class Fleet:
    """`simdra fleet` as a subprocess, its log in a file, its CPU and memory by psutil."""

    def __init__(self, args: list[str], log_path: Path) -> None:
        self.args = [sys.executable, "-m", "simdra", "fleet", *args]
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.published: tuple[float, float, int, int] | None = None

    def start(self) -> None:
        """Start it (its output appended to the log)."""
        with open(self.log_path, "ab") as log:
            self.started = time.monotonic()
            self.process = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT,
                                            cwd=REPO, start_new_session=True)

    def wait_published(self, timeout: float) -> tuple[float, float, int, int]:
        """Wait for its `published` line: (seconds it says, seconds since start as seen
        here, nodes, slices)."""
        deadline = self.started + timeout
        while time.monotonic() < deadline:
            if (published := self.poll_published()) is not None:
                return published
            time.sleep(0.1)
        raise RuntimeError(f"fleet: no 'published' line in {timeout:.0f}s: {self.tail()}")

    def poll_published(self) -> tuple[float, float, int, int] | None:
        """Its `published` line if it has written it: (seconds it says, seconds since
        start as seen here at the first poll that found it, nodes, slices); None if not
        yet. RuntimeError if it exited."""
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"fleet exited {self.process.returncode}: {self.tail()}")
        if self.published is None:
            found = PUBLISHED.search(self.log_path.read_text(errors="replace"))
            if found:
                self.published = (float(found[3]), time.monotonic() - self.started,
                                  int(found[1]), int(found[2]))
        return self.published

    def usage(self) -> tuple[float, float]:
        """(CPU seconds so far, RSS in bytes), its children included."""
        assert self.process is not None
        proc = psutil.Process(self.process.pid)
        procs = [proc, *proc.children(recursive=True)]
        cpu = sum(p.cpu_times().user + p.cpu_times().system for p in procs)
        return cpu, float(sum(p.memory_info().rss for p in procs))

    def tail(self) -> str:
        """Its log's last line."""
        lines = self.log_path.read_text(errors="replace").strip().splitlines()
        return lines[-1] if lines else "(empty log)"

    def stop(self) -> None:
        """SIGTERM (its documented stop), then SIGKILL."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
