"""Run the real helm binary on the chart in deploy/helm/simdra.

helm is built from the version pinned in tests/tools/helm/go.mod by hack/build-helm.sh,
which caches it; hack/test.sh builds it before pytest starts and passes its path in
SIMDRA_HELM. Without that variable the first use here runs the build script itself.
A helm that cannot be built fails the tests that need it with the script's one line:
the chart is never silently left unchecked.
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import yaml

from tests.deploy.layout import HELM_CHART, HELM_VALUES, JSON, REPO

HELM_ENV = "SIMDRA_HELM"
BUILD_SCRIPT = REPO / "hack" / "build-helm.sh"
RELEASE = "simdra"
# The namespace the tests install into unless one says otherwise: the Kustomize base's,
# so that chart and overlays render the same objects.
RELEASE_NAMESPACE = "simdra"


class HelmError(Exception):
    """helm could not be built, or a helm command failed; the message says which."""


@functools.cache
def helm_binary() -> Path:
    """The helm to run: $SIMDRA_HELM, else the one hack/build-helm.sh builds and caches."""
    if given := os.environ.get(HELM_ENV):
        path = Path(given)
        if not os.access(path, os.X_OK):
            raise HelmError(f"{HELM_ENV}={given}: not an executable helm binary")
        return path
    done = subprocess.run([str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=3600,
                          check=False)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"{BUILD_SCRIPT.name} failed"]
        raise HelmError(lines[-1])
    return Path(done.stdout.strip().splitlines()[-1])


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    """Run helm with a scratch home (no repositories, plugins or cache of the user's)."""
    home = REPO / ".pytest_cache" / "helm-home"
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    return subprocess.run([str(helm_binary()), *args], capture_output=True, text=True,
                          timeout=120, check=False, env=env)


def values_args(values_files: Sequence[str] = (), settings: Sequence[str] = (),
                set_files: Sequence[str] = (), set_json: Sequence[str] = ()) -> list[str]:
    """helm flags: values files under deploy/helm/values, --set, --set-file, --set-json."""
    args: list[str] = []
    for name in values_files:
        args += ["--values", str(HELM_VALUES / name)]
    for flag, given in (("--set", settings), ("--set-file", set_files),
                        ("--set-json", set_json)):
        for setting in given:
            args += [flag, setting]
    return args


def template(values_files: Sequence[str] = (), settings: Sequence[str] = (),
             set_files: Sequence[str] = (), set_json: Sequence[str] = (),
             namespace: str = RELEASE_NAMESPACE) -> list[JSON]:
    """The objects `helm template --namespace namespace` renders from the chart;
    HelmError if it fails."""
    done = run_helm("template", RELEASE, str(HELM_CHART), "--namespace", namespace,
                    *values_args(values_files, settings, set_files, set_json))
    if done.returncode != 0:
        raise HelmError(f"helm template {' '.join(values_files)} failed: "
                        f"{done.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def lint(values_files: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """`helm lint --strict` of the chart with these values files."""
    return run_helm("lint", "--strict", str(HELM_CHART), *values_args(values_files))
