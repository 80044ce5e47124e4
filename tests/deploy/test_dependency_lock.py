"""The image installs requirements/runtime.lock and requirements/build.lock (hash-checked,
no resolution): they must still satisfy pyproject.toml. A dependency added, dropped or
re-ranged there without `hack/lock-deps.sh` fails here, naming the package."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.deploy.layout import REPO

RUNTIME_LOCK = REPO / "requirements" / "runtime.lock"
BUILD_LOCK = REPO / "requirements" / "build.lock"
REFRESH = "stale: run hack/lock-deps.sh"
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)")
_HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}\b")


def read_lock(path: Path) -> dict[str, tuple[Version, int]]:
    """Package (canonical name) -> (pinned version, how many sha256 hashes) of a
    pip-compile --generate-hashes file; an entry that is not `name==version` fails."""
    entries: dict[str, tuple[Version, int]] = {}
    current = ""
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip().rstrip("\\").strip()
        if not line:
            continue
        if line.startswith("--hash="):
            assert _HASH.fullmatch(line), f"{path.name}: not a sha256 hash: {line}"
            version, hashes = entries[current]
            entries[current] = (version, hashes + 1)
            continue
        pin = _PIN.match(line)
        assert pin, f"{path.name}: not an exact pin: {line!r}"
        current = canonicalize_name(pin["name"])
        entries[current] = (Version(pin["version"]), 0)
    return entries


def project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def unsatisfied(requirements: list[str], lock: dict[str, tuple[Version, int]]) -> list[str]:
    """One line per requirement the lock lacks or pins outside its range."""
    problems = []
    for text in requirements:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        if name not in lock:
            problems.append(f"{requirement.name}: not in the lock")
        elif not requirement.specifier.contains(lock[name][0], prereleases=True):
            problems.append(f"{requirement.name}: locked {lock[name][0]}, "
                            f"pyproject wants {requirement.specifier}")
    return problems


@pytest.mark.parametrize(("lock", "requirements"), [
    (RUNTIME_LOCK, lambda p: p["project"]["dependencies"]),
    (BUILD_LOCK, lambda p: p["build-system"]["requires"]),
], ids=["runtime", "build"])
def test_lock_satisfies_pyproject(lock, requirements):
    assert unsatisfied(requirements(project()), read_lock(lock)) == [], REFRESH


@pytest.mark.parametrize("lock", [RUNTIME_LOCK, BUILD_LOCK], ids=["runtime", "build"])
def test_every_locked_package_is_pinned_with_its_hashes(lock):
    entries = read_lock(lock)

    assert entries
    assert [name for name, (_, hashes) in entries.items() if not hashes] == []


def test_optional_dependencies_stay_out_of_the_image_lock():
    lock = read_lock(RUNTIME_LOCK)
    runtime = {canonicalize_name(Requirement(r).name) for r in project()["project"]["dependencies"]}
    for extra, requirements in project()["project"]["optional-dependencies"].items():
        names = {canonicalize_name(Requirement(r).name) for r in requirements}
        # (one the plugin needs too, like PyYAML, is locked for the plugin's sake)
        assert sorted(names & lock.keys() - runtime) == [], f"extra {extra} in the image"


def test_the_check_notices_a_stale_lock():
    lock = read_lock(RUNTIME_LOCK)
    grpc = lock["grpcio"][0]

    assert unsatisfied([f"grpcio>{grpc}"], lock) == [
        f"grpcio: locked {grpc}, pyproject wants >{grpc}"]
    assert unsatisfied(["no-such-package>=1"], lock) == ["no-such-package: not in the lock"]
