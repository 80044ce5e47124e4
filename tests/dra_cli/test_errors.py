"""Every failure of `kubectl-dra` is one line on stderr: exit status 1 (no kubeconfig,
access refused naming the RBAC verb and resource, no resource.k8s.io/v1, no server),
2 for a bad command line."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from simdra._driver.dra_cli.main import main
from simdra._driver.testing.kubeconfig import write_kubeconfig


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


class _Answer(BaseHTTPRequestHandler):
    """403 for every list (as RBAC answers), or 404 for the resource.k8s.io group."""

    mode = "forbidden"

    def do_GET(self) -> None:
        plural = self.path.split("?")[0].rstrip("/").rsplit("/", 1)[1]
        if self.mode == "forbidden":
            group = "resource.k8s.io" if "/apis/resource.k8s.io/" in self.path else ""
            status = 403, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "reason": "Forbidden", "code": 403, "message": (
                f'{plural}.{group} is forbidden: User "viewer" cannot list resource '
                f'"{plural}" in API group "{group}" at the cluster scope')}
        elif self.path.startswith("/apis/resource.k8s.io/"):
            status = 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "reason": "NotFound", "code": 404,
                           "message": "the server could not find the requested resource"}
        else:
            status = 200, {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": []}
        data = json.dumps(status[1]).encode()
        self.send_response(status[0])
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(params=["forbidden", "no-group"])
def answering(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A server answering as the mode says, and a kubeconfig for it."""
    handler = type("Handler", (_Answer,), {"mode": request.param})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        yield request.param, write_kubeconfig(tmp_path / "config", url)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize("command", [["devices"], ["top"], ["why", "x"]])
def test_refused_or_missing_api_is_one_line(answering: tuple[str, Path], command: list[str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    mode, kubeconfig = answering
    code, out, err = _run(capsys, *command, "--kubeconfig", str(kubeconfig))
    assert (code, out) == (1, "")
    assert err.count("\n") == 1 and err.startswith("kubectl-dra: ")
    if mode == "forbidden":
        verb = "get" if command[0] == "why" else "list"  # why reads the pod first
        assert f"forbidden: cannot {verb} " in err and f"(RBAC verb '{verb}' on " in err
        assert 'is forbidden: User "viewer" cannot list' in err
        assert any(f"{verb} {resource} (" in err for resource in (
            "resourceslices.resource.k8s.io", "resourceclaims.resource.k8s.io", "pods"))
    else:
        assert "does not serve resource.k8s.io/v1" in err and "1.34" in err


def test_no_kubeconfig(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    code, out, err = _run(capsys, "devices")
    assert (code, out) == (1, "")
    assert err.startswith("kubectl-dra: no kubeconfig: ") and err.count("\n") == 1


def test_an_unreadable_kubeconfig(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "top", "--kubeconfig", str(tmp_path / "missing"))
    assert code == 1 and err.startswith("kubectl-dra: ") and err.count("\n") == 1


def test_kubeconfig_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    path = write_kubeconfig(tmp_path / "config", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'absent'}:{path}")
    code, _, err = _run(capsys, "devices")
    assert code == 1
    assert err.startswith("kubectl-dra: cannot reach the API server (list ") and \
        err.count("\n") == 1


@pytest.mark.parametrize("args", [["devices", "--bogus"], ["top", "--by", "pool"],
                                  ["nothing"], [], ["devices", "-o", "xml"],
                                  ["top", "--interval", "0"]])
def test_a_bad_command_line_is_one_line_and_status_2(
        args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, *args)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("kubectl-dra"), err


def test_the_console_script_is_declared_and_runs(tmp_path: Path) -> None:
    """pyproject.toml names `kubectl-dra` (what kubectl finds on PATH for `kubectl dra`);
    run as a process, a bad line exits 2 with one line, --help 0."""
    import subprocess
    import sys
    import tomllib

    root = Path(__file__).resolve().parents[2]
    scripts = tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["kubectl-dra"].partition(":")
    code = f"import sys; from {module} import {function}; sys.argv[0] = 'kubectl-dra'; " \
           f"{function}()"
    for args, status in ((["--help"], 0), (["top", "--by", "x"], 2)):
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                              text=True, cwd=root, timeout=60, env={"PYTHONPATH": str(root)})
        assert done.returncode == status, done.stderr
    assert done.stderr.count("\n") == 1 and "invalid choice" in done.stderr
