"""What a user sees for a bad command line or cluster configuration: one line naming the
flag, exit status 2, before the plugin touches anything; and, when the API server is
down, one log line per attempt with the next delay (the client's own retries are off)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from driver.kube import ClusterConfigError, load_api_client
from driver.testing.cluster import wait_until
from driver.testing.kubeconfig import write_kubeconfig

# Settings of the caller that would change what `simdra run` finds.
_CLEAN = ("NODE_NAME", "KUBECONFIG", "DEVICE_PROFILE", "DEVICE_BACKEND", "NUM_DEVICES",
          "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")


def _simdra(*args: str, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in _CLEAN}
    return subprocess.run([sys.executable, "-m", "driver", *args], capture_output=True,
                          text=True, env={**base, **(env or {})}, timeout=60, check=False,
                          cwd=cwd)


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def _run_in(tmp_path: Path, *args: str) -> list[str]:
    """`simdra run` flags that keep every directory inside tmp_path."""
    return ["run", "--node-name", "n1",
            "--kubelet-registrar-directory-path", str(tmp_path / "registry"),
            "--kubelet-plugins-directory-path", str(tmp_path / "plugins"),
            "--cdi-root", str(tmp_path / "cdi"), *args]


def test_no_in_cluster_config_and_no_kubeconfig(tmp_path: Path) -> None:
    line = _one_line(_simdra(*_run_in(tmp_path)))

    assert "no cluster configuration" in line and "--kubeconfig" in line
    assert not (tmp_path / "plugins").exists()


def test_missing_kubeconfig(tmp_path: Path) -> None:
    line = _one_line(_simdra(*_run_in(tmp_path, "--kubeconfig", str(tmp_path / "nope"))))

    assert f"--kubeconfig='{tmp_path / 'nope'}': cannot read: No such file" in line


@pytest.mark.parametrize(("content", "reason"), [
    ("clusters: [unclosed\n", "not valid YAML"),
    ("just a string\n", "not a kubeconfig"),
    ("apiVersion: v1\nkind: Config\nclusters: []\n", "not a usable kubeconfig"),
])
def test_invalid_kubeconfig(tmp_path: Path, content: str, reason: str) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(content)

    line = _one_line(_simdra(*_run_in(tmp_path, "--kubeconfig", str(path))))

    assert line.startswith(f"simdra run: --kubeconfig='{path}': {reason}")


def test_unreadable_kubeconfig_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.mkdir()  # a directory: cannot be read as a file, even by root

    line = _one_line(_simdra(*_run_in(tmp_path), env={"KUBECONFIG": str(path)}))

    assert "--kubeconfig" in line and "cannot read" in line


def test_unknown_profile_name_is_not_taken_for_a_file(tmp_path: Path) -> None:
    line = _one_line(_simdra(*_run_in(tmp_path, "--device-profile", "tpu")))

    assert "--device-profile='tpu': unknown device profile 'tpu'" in line
    assert "cannot read" not in line


@pytest.mark.parametrize("value", ["inventory.yaml", "conf/devices", "x.json"])
def test_profile_that_looks_like_a_path_must_be_readable(tmp_path: Path, value: str) -> None:
    line = _one_line(_simdra(*_run_in(tmp_path, "--device-profile", value), cwd=tmp_path))

    assert f"--device-profile='{value}': cannot read the inventory file" in line


@pytest.mark.parametrize(("args", "expected"), [
    (("run", "--no-such-flag"), "unrecognized arguments: --no-such-flag"),
    (("launch",), "invalid choice: 'launch'"),
    (("run", "--node-name"), "expected one argument"),
    (("usage", "-o", "xml"), "invalid choice: 'xml'"),
])
def test_bad_command_line_is_one_line(args: tuple[str, ...], expected: str) -> None:
    result = _simdra(*args)

    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], result.stderr


def test_version_comes_from_the_package_metadata() -> None:
    from importlib.metadata import version

    result = _simdra("--version")

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"simdra {version('simdra')}"


def test_usage_output_flag_has_help_text() -> None:
    result = _simdra("usage", "--help")

    assert result.returncode == 0
    option = result.stdout[result.stdout.index("--output"):]
    assert "table for people" in option and "json for scripts" in option


def test_api_client_does_not_retry_by_itself(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:1")

    with load_api_client(str(path)) as api:
        assert api.configuration.retries is False
        assert api.rest_client.pool_manager.connection_pool_kw["retries"] is False


def test_load_api_client_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ClusterConfigError) as caught:
        load_api_client(str(tmp_path / "missing"))

    assert "\n" not in str(caught.value)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_api_server_down_logs_one_line_per_attempt_with_the_delay(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{_free_port()}")
    log_path = tmp_path / "plugin.log"
    base = {k: v for k, v in os.environ.items() if k not in _CLEAN}
    with open(log_path, "wb") as log:
        plugin = subprocess.Popen(
            [sys.executable, "-m", "driver", *_run_in(tmp_path, "--kubeconfig", str(kubeconfig))],
            stdout=log, stderr=subprocess.STDOUT, env=base)
    try:
        wait_until(lambda: log_path.read_text().count("slice watch failed") >= 3, timeout=60,
                   what="three failed attempts in the plugin log")
    finally:
        plugin.terminate()
        plugin.wait(30)

    lines = log_path.read_text().splitlines()
    failures = [ln for ln in lines if "Connection refused" in ln]
    assert len(failures) >= 3
    assert all("again in" in ln or "retrying in" in ln for ln in failures), failures
    assert not [ln for ln in lines if "Retrying (" in ln], "urllib3 retried underneath"
