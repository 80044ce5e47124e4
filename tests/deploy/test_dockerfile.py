"""The Dockerfile's structure: what a `docker build` of it produces and runs (no Docker
engine needed; test_image_install.py replays the build stage itself)."""

from __future__ import annotations

import re
import shlex
import subprocess
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
    assert "slim" in build.base_image
    assert copy.flags == {"from": "build"}
    assert expand(copy.arguments, final.variables).split() == [venv, venv]
    assert final.variables["PATH"].startswith(f"{venv}/bin:")
    assert exec_form(final.all("ENTRYPOINT")[0]) == ["simdra", "run"]
    assert not final.all("RUN"), "the runtime stage installs nothing"


def pip_installs(stage) -> list[list[str]]:
    """The words of every `pip install` step of the stage's RUN lines, in order."""
    return [shlex.split(step) for run in stage.all("RUN")
            for step in run.arguments.split("&&") if " install " in step]


def requirements_step(stage) -> str:
    (step,) = [step for run in stage.all("RUN") for step in run.arguments.split("&&")
               if "> requirements.txt" in step]
    return step


def test_dependencies_come_only_from_the_project_metadata(dockerfile, tmp_path):
    build = dockerfile.stage("build")
    deps, package = pip_installs(build)

    # First the dependencies, from the requirements the image writes; then the package
    # alone. No other install.
    assert deps[deps.index("install") + 1:][-2:] == ["--requirement", "requirements.txt"]
    assert [w for w in package[package.index("install") + 1:] if not w.startswith("-")] == ["."]
    assert "--no-deps" in package
    # The requirements written are exactly pyproject.toml's dependencies.
    (tmp_path / "pyproject.toml").write_bytes((REPO / "pyproject.toml").read_bytes())
    subprocess.run(["/bin/sh", "-c", requirements_step(build).strip()], cwd=tmp_path,
                   check=True, timeout=60)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert (tmp_path / "requirements.txt").read_text().splitlines() == project["dependencies"]
    assert build.variables.get("PIP_NO_CACHE_DIR") == "1"


def test_dependency_layer_is_built_before_the_code_is_copied(dockerfile):
    instructions = dockerfile.stage("build").instructions
    first_install = next(i for i, ins in enumerate(instructions)
                         if ins.keyword == "RUN" and "requirements.txt" in ins.arguments)
    copied_before = [word for ins in instructions[:first_install] if ins.keyword == "COPY"
                     for word in ins.arguments.split()[:-1]]

    # A code change (driver/, README.md) leaves the cached dependency layer valid.
    assert copied_before == ["pyproject.toml"]


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

    assert sorted(sources) == ["README.md", "driver", "pyproject.toml"]
    assert {"pyproject.toml", "README.md", "driver/cli/run.py"} <= set(files)
    assert any(f.startswith("driver/kubelet/gen/") for f in files), "generated gRPC code"
    assert not [f for f in files if "__pycache__" in f or re.search(r"\.py[co]$", f)]
    for local in (".git/HEAD", ".venv/bin/python", "tests/deploy/conftest.py",
                  "deploy/base/daemonset.yaml", "bench/x.py"):
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
