"""A real Prometheus for the e2e: Debian's package (tests/e2e/install-prometheus.sh), run
on loopback with its data in the run's logs directory, scraping the targets the scenario
names, and read through its HTTP API as Grafana reads it.

Debian builds Prometheus without Kubernetes service discovery, so the targets are files
(`file_sd_configs`) the scenario writes; Prometheus rereads them when they change. Each
job is one scrape config; `Job.https` scrapes like a kubelet's /metrics (its self-signed
serving certificate is not checked: the run's kubelet makes its own).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .controlplane import free_port

REPO = Path(__file__).resolve().parents[2]
JSON = dict[str, Any]


class PrometheusError(RuntimeError):
    """Prometheus did not start, answer or scrape; the message says what and where."""


@dataclass(frozen=True)
class Job:
    """A scrape config: its name, and https for a kubelet."""

    name: str
    https: bool = False


def install() -> Path:
    """The Prometheus binary (install-prometheus.sh unpacks it into the e2e cache once)."""
    res = subprocess.run(["bash", str(REPO / "tests/e2e/install-prometheus.sh")],
                         capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        lines = res.stderr.strip().splitlines() or [f"exit {res.returncode}"]
        raise PrometheusError(f"install-prometheus.sh: {lines[-1]}")
    return Path(res.stdout.strip().splitlines()[-1])


class Prometheus:
    """One Prometheus server for the jobs given; `stop()` ends it."""

    def __init__(self, binary: Path, workdir: Path, jobs: list[Job], scrape_interval: float,
                 on_spawn: Callable[[int], None] | None = None) -> None:
        self.binary, self.workdir, self.jobs = binary, workdir, jobs
        self.scrape_interval = scrape_interval
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "prometheus.log"
        self._on_spawn = on_spawn
        self._proc: subprocess.Popen[bytes] | None = None

    def config(self) -> JSON:
        """The configuration file's contents (JSON is YAML)."""
        every = f"{self.scrape_interval:g}s"
        jobs = []
        for job in self.jobs:
            entry: JSON = {"job_name": job.name, "file_sd_configs": [
                {"files": [str(self._targets_file(job.name))], "refresh_interval": every}]}
            if job.https:
                entry |= {"scheme": "https", "tls_config": {"insecure_skip_verify": True}}
            jobs.append(entry)
        return {"global": {"scrape_interval": every, "scrape_timeout": every,
                           "evaluation_interval": every},
                "scrape_configs": jobs}

    def _targets_file(self, job: str) -> Path:
        return self.workdir / "targets" / f"{job}.json"

    def start(self, timeout: float = 60) -> None:
        """Write the configuration, start the server and wait until it is ready."""
        (self.workdir / "targets").mkdir(parents=True, exist_ok=True)
        for job in self.jobs:
            self.set_targets(job.name, [])
        config = self.workdir / "prometheus.yml"
        config.write_text(json.dumps(self.config(), indent=2))
        args = [str(self.binary), f"--config.file={config}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}"]
        with self.log.open("ab") as out:
            self._proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                          start_new_session=True)
        if self._on_spawn:
            self._on_spawn(self._proc.pid)
        self._wait("ready", self._ready, timeout)

    def _ready(self) -> bool:
        if self._proc is None or self._proc.poll() is not None:
            raise PrometheusError(f"prometheus exited (log: {self.log})")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=5) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def set_targets(self, job: str, targets: list[str], labels: dict[str, str] | None = None
                    ) -> None:
        """Scrape `targets` (host:port) for `job` from now on, with these labels."""
        path = self._targets_file(job)
        groups = [{"targets": targets, "labels": labels or {}}] if targets else []
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(groups))
        os.replace(tmp, path)  # whole or not at all: Prometheus may read it any time

    def wait_up(self, jobs: list[str], timeout: float = 60) -> None:
        """Wait until each job has a target whose last scrape succeeded."""
        last: dict[str, str] = {}

        def up() -> bool:
            active = self.api("targets", state="active")["activeTargets"]
            for job in jobs:
                mine = [t for t in active if t["labels"].get("job") == job]
                last[job] = "; ".join(f"{t['scrapeUrl']}: {t['health']} {t['lastError']}"
                                      for t in mine) or "no target"
            return all(any(t["health"] == "up" for t in active if t["labels"].get("job") == j)
                       for j in jobs)

        self._wait("targets up", up, timeout, lambda: str(last))

    def query(self, expr: str, at: float) -> list[JSON]:
        """An instant query's result (a vector: one entry per series)."""
        result: list[JSON] = self.api("query", query=expr, time=f"{at:.3f}")["result"]
        return result

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[JSON]:
        """A range query's result (a matrix: each series with its [time, value] list)."""
        result: list[JSON] = self.api("query_range", query=expr, start=f"{start:.3f}",
                                      end=f"{end:.3f}", step=f"{step:g}")["result"]
        return result

    def api(self, path: str, **params: str) -> JSON:
        """GET /api/v1/<path>: its `data`, or PrometheusError with its error."""
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=30) as answer:
                body: JSON = json.load(answer)
        except urllib.error.HTTPError as err:
            body = json.load(err)
        if body.get("status") != "success":
            raise PrometheusError(f"prometheus /api/v1/{path} {params}: {body.get('error')}")
        data: JSON = body["data"]
        return data

    def _wait(self, what: str, check: Callable[[], bool], timeout: float,
              detail: Callable[[], str] = lambda: "") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.5)
        raise PrometheusError(f"prometheus: {what} not within {timeout:.0f} s: {detail()} "
                              f"(log: {self.log})")

    def stop(self) -> None:
        """End the server (its data stays in workdir)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(20)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
        self._proc = None
