"""`simdra fleet` as its users run it: bad flags (one line, exit 2), and the process
against the API stand-in (the contract the bench and the e2e rely on: the published
line, the metrics, a clean exit on SIGTERM)."""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from simdra._driver.cli import main
from simdra._driver.testing.apiserver import APIServer
from simdra._driver.testing.cluster import wait_until

_ENV = ("KUBECONFIG", "DRIVER_NAME", "METRICS_PORT", "LOG_FORMAT", "VERBOSITY")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    for name in list(__import__("os").environ):
        if name.startswith("FLEET_"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize(("args", "problem"), [
    (["--nodes", "0"], "--nodes=0: must be between 1 and 100000"),
    (["--nodes", "x"], "--nodes='x': not an integer"),
    (["--nodes", "3", "--mix", "gpu8:70,nic2:20"], "add up to 90, not 100"),
    (["--nodes", "3", "--mix", "tpu8:100"], "unknown shape 'tpu8'"),
    (["--nodes", "3", "--shard", "3/2"], "--shard='3/2'"),
    (["--nodes", "3", "--churn", "storms=1"], "--churn='storms=1'"),
    (["--nodes", "3", "--node-prefix", "Fleet_A"], "--node-prefix='Fleet_A'"),
    (["--nodes", "3", "--driver-name", "no dots"], "--driver-name='no dots'"),
    (["--attach-selector", "a=b", "--prune"], "--prune: not with --attach-selector"),
    (["--nodes", "3", "--mix", "/nonexistent/inventory.yaml:100"], "cannot read"),
])
def test_a_bad_flag_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str],
                                           args: list[str], problem: str) -> None:
    code = main(["fleet", *args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("simdra fleet: ") and problem in err


def test_the_fleet_publishes_says_so_serves_metrics_and_stops_on_sigterm(
        tmp_path: Path) -> None:
    with APIServer() as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
        log = (tmp_path / "fleet.log").open("w+")
        process = subprocess.Popen(
            [sys.executable, "-m", "simdra", "fleet", "--kubeconfig", str(kubeconfig),
             "--nodes", "6", "--mix", "gpu8:50,nic2:30,partitioned:20", "--seed", "2",
             "--metrics-port", "0", "--node-prefix", "cli"],
            stderr=log, text=True)
        try:
            line = wait_until(lambda: _line(tmp_path / "fleet.log", "fleet: published"),
                              timeout=60)
            port = int(wait_until(lambda: _line(tmp_path / "fleet.log", "metrics on port"),
                                  timeout=5).split()[-1])
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read()
        finally:
            process.send_signal(signal.SIGTERM)
            code = process.wait(30)
        slices = len(server.objects("resourceslices"))
    assert code == 0
    assert f"fleet: published 6 nodes, {slices} slices in " in line
    text = metrics.decode()
    for name in ("simdra_fleet_nodes 6.0", "simdra_fleet_slice_writes_total",
                 'simdra_fleet_api_requests_total{verb="create"}',
                 "simdra_fleet_claims_prepared_total", "simdra_fleet_churn_events_total"):
        assert name in text


def _line(path: Path, needle: str) -> str | None:
    return next((line.strip() for line in path.read_text().splitlines() if needle in line),
                None)


def test_a_refused_start_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with APIServer() as server:
        # A create answered "exists" for a node that is not there: its GET is a 404, an
        # answer waiting does not change (as a 403 from RBAC would be).
        server.inject_failure("create", "nodes", 409)
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
        done = subprocess.run(
            [sys.executable, "-m", "simdra", "fleet", "--kubeconfig", str(kubeconfig),
             "--nodes", "2"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "cannot start" in errors[0] and "404" in errors[0]
    assert "Traceback" not in done.stderr


def test_a_node_prefix_taken_by_real_nodes_is_one_line_exit_1_and_nothing_published(
        tmp_path: Path) -> None:
    with APIServer() as server:
        real = server.put_object("nodes", {"metadata": {"name": "prod-0000"}})
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
        done = subprocess.run(
            [sys.executable, "-m", "simdra", "fleet", "--kubeconfig", str(kubeconfig),
             "--nodes", "3", "--node-prefix", "prod"], capture_output=True, text=True,
            timeout=60)
        slices = server.objects("resourceslices")
        after = server.get_object("nodes", "prod-0000")
    assert done.returncode == 1
    (error,) = [line for line in done.stderr.splitlines() if "ERROR" in line]
    assert "cannot start: node prod-0000 exists and is not this fleet's" in error
    assert "Traceback" not in done.stderr
    assert slices == [] and after == real
