"""Every failure of `kubectl-dra` is one line on stderr: exit status 1 (no kubeconfig,
access refused naming the RBAC verb and resource, no resource.k8s.io/v1, no server),
2 for a bad command line."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from simdra._driver.dra_cli.main import main
from simdra._driver.testing.kubeconfig import write_kubeconfig
from tests.dra_cli import refusing
from tests.dra_cli.without_cel import run_without_cel


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(params=["forbidden", "no-group"])
def answering(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A server refusing every resource, or one without resource.k8s.io/v1; a kubeconfig
    for it."""
    refuse, serves_dra = (None, True) if request.param == "forbidden" else (frozenset(), False)
    with refusing.answering(tmp_path / "config", refuse=refuse, serves_dra=serves_dra) as path:
        yield request.param, path


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
        assert f'is forbidden: User "viewer" cannot {verb} resource' in err  # the server's
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


def test_without_the_cel_extra_each_command_needing_it_says_so(
        cluster: tuple[object, Path]) -> None:
    """`why`, `devices --class` and `top --by class` need cel-python (simdra[demo]); a
    plain install says so in one line, never a traceback or every device "(no class)";
    `devices` and `top` work without it."""
    _, kubeconfig = cluster
    config = ["--kubeconfig", str(kubeconfig)]
    answers = run_without_cel([["why", "trainer", *config], ["devices", "--class", "gpu", *config],
                               ["top", "--by", "class", *config], ["top", *config]])

    assert answers[0] == (1, "", "kubectl-dra: why needs simdra[demo] installed "
                                 "(No module named 'celpy')\n")
    selectors = ("kubectl-dra: DeviceClass selectors need simdra[demo] installed "
                 "(No module named 'celpy')\n")
    assert answers[1] == answers[2] == (1, "", selectors)
    assert answers[3][0] == 0 and answers[3][1].startswith("NODE ")
