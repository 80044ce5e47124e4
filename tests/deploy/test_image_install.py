"""Replays the Dockerfile's build stage without Docker: the COPY'd build context (after
.dockerignore) in a scratch root, then its RUN lines, then the installed `simdra`.

This catches what only a real image build would: files the image lacks, a lock that
misses a dependency or a hash, a console script that does not start, test code that
reached the image. It installs the dependencies (tens of seconds to
minutes), so it is an `e2e` test: the test command leaves it out, `pytest -m e2e` runs
it (the e2e job, which builds the real image anyway).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.deploy.dockerfile import inside, parse_dockerfile, read_dockerignore, replay_stage
from tests.deploy.layout import REPO

# Signs that pip could not reach an index at all (no network), as opposed to a
# dependency that cannot be resolved, which must fail the test.
OFFLINE = ("NewConnectionError", "Temporary failure in name resolution",
           "Network is unreachable", "Failed to establish a new connection")


@pytest.mark.e2e
@pytest.mark.slow
def test_image_build_stage_installs_a_working_simdra(tmp_path):
    dockerfile = parse_dockerfile((REPO / "Dockerfile").read_text())
    stage = dockerfile.stage("build")
    rules = read_dockerignore((REPO / ".dockerignore").read_text())

    # Only deviation from the image build: pip may reuse its local cache (speed only).
    done = replay_stage(dockerfile, stage, REPO, tmp_path, rules,
                        python=Path(sys.executable), drop_env=("PIP_NO_CACHE_DIR",))
    if done.returncode != 0 and any(sign in done.stderr for sign in OFFLINE):
        pytest.skip(f"no package index reachable: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    venv = inside(tmp_path, stage.variables["VENV"])
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL"))}
    env = {**clean, "PATH": f"{venv / 'bin'}{os.pathsep}{clean.get('PATH', '')}"}

    def run(*command: str) -> subprocess.CompletedProcess[str]:
        # cwd outside the repo: only the installed package may be imported.
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120, check=False)

    version = run(str(venv / "bin" / "simdra"), "--version")
    project_version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert version.stdout.strip() == f"simdra {project_version}", version.stderr
    usage = run(str(venv / "bin" / "simdra"), "run", "--help")
    assert usage.returncode == 0, usage.stderr
    assert "NODE_NAME" in usage.stdout
    # `--help` imports little; the plugin itself needs every runtime dependency.
    imported = run(str(venv / "bin" / "python"), "-c",
                   "import simdra._driver.plugin, simdra._driver.kubelet.gen, simdra; "
                   "print(simdra.__file__)")
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip().startswith(str(venv)), "imported from outside the image"
    assert not (venv / "bin" / "pip").exists(), "the image must not ship pip"
    # Left out to keep the image small; simdra uses the synchronous client only.
    assert not list(venv.glob("lib/python*/site-packages/kubernetes/aio"))
    assert list(venv.glob("lib/python*/site-packages/kubernetes/client"))
    # No test code in the image: neither the demo's harness nor its dependencies; the
    # demo says so in one line.
    site = next(venv.glob("lib/python*/site-packages"))
    assert not (site / "simdra" / "_driver" / "testing").exists()
    assert not list(site.glob("celpy")) and not list(site.glob("kubernetes_validate"))
    demo = run(str(venv / "bin" / "simdra"), "demo")
    assert demo.returncode == 2, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert demo.stderr.strip().splitlines() == [
        "simdra demo: not installed: simdra._driver.testing, kubernetes-validate, cel-python; "
        "install simdra with its `demo` extra from a source checkout: pip install '.[demo]' "
        "(the plugin image leaves the demo out)"]
