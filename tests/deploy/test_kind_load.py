"""hack/kind-load.sh stops with a clear message when a tool it needs is missing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.deploy.layout import REPO

SCRIPT = REPO / "hack" / "kind-load.sh"


def run_with_tools(tmp_path: Path, tools: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run the script with a PATH holding only `dirname` and the given stub tools."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "dirname").symlink_to(shutil.which("dirname"))
    for name, body in tools.items():
        stub = bin_dir / name
        stub.write_text(f"#!{shutil.which('bash')}\n{body}\n")
        stub.chmod(0o755)
    return subprocess.run([shutil.which("bash"), str(SCRIPT)], env={"PATH": str(bin_dir)},
                          capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.parametrize(
    ("tools", "missing"),
    [
        ({}, "docker"),
        ({"docker": "exit 0"}, "kind"),
        ({"docker": "exit 0", "kind": "exit 0"}, "kubectl"),
    ],
)
def test_missing_tool_is_named(tmp_path, tools, missing):
    done = run_with_tools(tmp_path, tools)

    assert done.returncode == 1
    assert f"'{missing}' is not installed" in done.stderr


def test_unreachable_docker_daemon_is_reported(tmp_path):
    done = run_with_tools(tmp_path, {"docker": "exit 1", "kind": "exit 0", "kubectl": "exit 0"})

    assert done.returncode == 1
    assert "Docker daemon" in done.stderr
