"""hack/build-helm.sh: a complete cached helm is used as is, a half-built one never, and a
build that cannot happen says so in one line naming helm."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.deploy.helm import BUILD_SCRIPT
from tests.deploy.layout import REPO


def pinned_version() -> str:
    for line in (REPO / "tests" / "tools" / "helm" / "go.mod").read_text().splitlines():
        words = line.split()
        if words[:1] == ["helm.sh/helm/v3"]:
            return words[1]
    raise AssertionError("go.mod pins no helm.sh/helm/v3")


def build(cache_home: Path) -> subprocess.CompletedProcess[str]:
    """The script with its cache under `cache_home` and no Go to build with."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home), "GO": "/nonexistent/go"}
    return subprocess.run([str(BUILD_SCRIPT)], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


def fake_helm(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_text("#!/bin/sh\necho fake helm\n")
    path.chmod(0o755)


def test_a_cached_helm_is_used_without_building(tmp_path):
    cached = tmp_path / "simdra-e2e" / f"helm-{pinned_version()}" / "helm"
    fake_helm(cached)

    done = build(tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(cached)


def test_a_half_built_cache_is_never_used(tmp_path):
    fake_helm(tmp_path / "simdra-e2e" / f"helm-{pinned_version()}.partial.x1" / "helm")

    done = build(tmp_path)

    assert done.returncode == 1
    assert done.stdout == ""


def test_a_build_that_cannot_run_fails_with_one_line_naming_helm(tmp_path):
    done = build(tmp_path)

    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert f"cannot build helm {pinned_version()}" in line and "Go" in line
    assert not (tmp_path / "simdra-e2e" / f"helm-{pinned_version()}").exists()
