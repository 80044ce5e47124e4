"""The Dockerfile's structure: what a `docker build` of it produces and runs (no Docker
engine needed; test_image_install.py replays the build stage itself)."""

from __future__ import annotations

import re
import shlex
import tomllib

import pytest

from tests.deploy.dockerfile import (
    Dockerfile,
    context_files,
    copy_sources,
    exec_form,
    expand,
    is_ignored,
    parse_dockerfile,
    read_dockerignore,
    unrelocatable_paths,
)
from tests.deploy.layout import REPO


@pytest.fixture(scope="module")
def dockerfile() -> Dockerfile:
    return parse_dockerfile((REPO / "Dockerfile").read_text())


@pytest.fixture(scope="module")
def ignore_rules() -> list:
    return read_dockerignore((REPO / ".dockerignore").read_text())


def labels(dockerfile: Dockerfile) -> dict[str, str]:
    final = dockerfile.stages[-1]
    found = {}
    for instruction in final.all("LABEL"):
        for word in shlex.split(expand(instruction.arguments, final.variables)):
            key, _, value = word.partition("=")
            found[key] = value
    return found


def test_runtime_stage_takes_the_venv_the_build_stage_made(dockerfile):
    build, final = dockerfile.stage("build"), dockerfile.stages[-1]
    venv = build.variables["VENV"]
    (copy,) = final.all("COPY")

    assert len(dockerfile.stages) == 2
    # The venv links to the base image's Python: both stages need the same image.
    assert final.base_image == build.base_image
    assert copy.flags == {"from": "build"}
    assert expand(copy.arguments, final.variables).split() == [venv, venv]
    assert final.variables["PATH"].startswith(f"{venv}/bin:")
    assert exec_form(final.all("ENTRYPOINT")[0]) == ["simdra", "run"]
    assert not final.all("RUN"), "the runtime stage installs nothing"


def test_default_base_runs_the_python_of_the_e2e_base(dockerfile):
    # tests/e2e/images.sh builds this Dockerfile on Debian bookworm's own python3 (3.11):
    # the default base is the official slim image of that Debian release and Python minor.
    base = dockerfile.stage("build").base_image
    images_sh = (REPO / "tests/e2e/images.sh").read_text()

    assert base == "python:3.11-slim-bookworm"
    assert "suite=bookworm" in images_sh and "--build-arg PYTHON_IMAGE=" in images_sh
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11"


def pip_installs(stage) -> list[list[str]]:
    """The words of every `pip install` step of the stage's RUN lines, in order."""
    return [shlex.split(step) for run in stage.all("RUN")
            for step in run.arguments.split("&&") if " install " in step]


def test_every_install_is_a_hash_checked_lock_or_the_package_alone(dockerfile):
    runtime, build_deps, package = pip_installs(dockerfile.stage("build"))

    # The dependencies, then the build backend: each exactly its lock, every file's hash
    # checked, nothing resolved beyond it, wheels only (no build code run unhashed).
    for install, lock in ((runtime, "runtime.lock"), (build_deps, "build.lock")):
        assert install[-2:] == ["--requirement", lock]
        assert {"--require-hashes", "--no-deps", "--only-binary=:all:"} <= set(install)
    # Then simdra itself: no index, no dependency resolution, no isolated build env
    # (which would fetch setuptools unhashed).
    assert [w for w in package[package.index("install") + 1:] if not w.startswith("-")] == ["."]
    assert {"--no-deps", "--no-index", "--no-build-isolation"} <= set(package)
    assert dockerfile.stage("build").variables.get("PIP_NO_CACHE_DIR") == "1"
    # A lock that misses a dependency fails the build instead of a plugin start.
    steps = [shlex.split(step) for run in dockerfile.stage("build").all("RUN")
             for step in run.arguments.split("&&")]
    assert any(words[0].endswith("/pip") and words[1:] == ["check"] for words in steps)


def test_dependency_layer_is_built_before_the_code_is_copied(dockerfile):
    instructions = dockerfile.stage("build").instructions
    first_install = next(i for i, ins in enumerate(instructions)
                         if ins.keyword == "RUN" and "runtime.lock" in ins.arguments)
    copied_before = [word for ins in instructions[:first_install] if ins.keyword == "COPY"
                     for word in ins.arguments.split()[:-1]]

    # A code change (simdra/, README.md, pyproject.toml) leaves the cached dependency
    # layer valid: only the locks come before it.
    assert copied_before == ["requirements/runtime.lock", "requirements/build.lock"]


def test_build_stage_can_be_replayed_without_docker(dockerfile):
    assert unrelocatable_paths(dockerfile.stage("build")) == []
    broken = parse_dockerfile("FROM python:3.12-slim AS build\nRUN /opt/venv/bin/pip install .\n")
    assert unrelocatable_paths(broken.stage("build")) == ["/opt/venv/bin/pip"]


def test_image_labels_name_the_project_version(dockerfile):
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    found = labels(dockerfile)

    assert found["org.opencontainers.image.title"] == project["name"]
    assert found["org.opencontainers.image.version"] == project["version"]
    declared = project["license"]  # an SPDX string, or the older {text = ...} table
    spdx = declared["text"] if isinstance(declared, dict) else declared
    assert found["org.opencontainers.image.licenses"] == spdx
    assert found["org.opencontainers.image.source"]


def test_build_context_holds_the_package_and_nothing_local(dockerfile, ignore_rules):
    sources = copy_sources(dockerfile.stage("build"))
    files = context_files(REPO, sources, ignore_rules)

    assert sorted(sources) == ["README.md", "pyproject.toml",
                               "requirements/build.lock", "requirements/runtime.lock", "simdra"]
    assert {"pyproject.toml", "README.md", "simdra/_driver/cli/run.py", "simdra/__init__.py",
            "simdra/_driver/kinds/gpu.py"} <= set(files)
    # The demo's harness stays out of the plugin image, its public face too.
    assert not [f for f in files if f.startswith("simdra/_driver/testing/")]
    assert "simdra/testing.py" not in files
    assert "simdra/_driver/cli/demo.py" in files
    assert any(f.startswith("simdra/_driver/kubelet/gen/") for f in files), "generated gRPC code"
    assert not [f for f in files if "__pycache__" in f or re.search(r"\.py[co]$", f)]
    for local in (".git/HEAD", ".venv/bin/python", "tests/deploy/conftest.py",
                  "deploy/base/daemonset.yaml", "bench/x.py", "simdra/_driver/testing/demo.py",
                  "simdra/_driver/testing/apiserver/schema.py", "requirements/other.txt"):
        assert is_ignored(local, ignore_rules), local


@pytest.mark.parametrize(
    ("patterns", "path", "ignored"),
    [
        ("*\n!driver/\n", "driver/a/b.py", False),
        ("*\n!driver/\n", "drivers/b.py", True),
        ("**/__pycache__\n", "driver/x/__pycache__/m.pyc", True),
        ("**/__pycache__\n", "__pycache__/m.pyc", True),
        ("docs/*.md\n", "docs/a.md", True),
        ("docs/*.md\n", "docs/sub/a.md", False),
        ("*.py[co]\n!keep.pyc\n", "keep.pyc", False),
    ],
)
def test_dockerignore_matching_follows_docker_rules(patterns, path, ignored):
    assert is_ignored(path, read_dockerignore(patterns)) is ignored
