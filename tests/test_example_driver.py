"""docs/examples/crypto-driver, the proof that simdra is a library: a driver outside the
tree, written against the public API only. Its own test (the real plugin process with its
kind, under simdra.testing) runs from the guide's command in test_driver_author_guide; here
it passes the gates simdra's code passes, with
the settings of its own pyproject.toml (what an author copies): ruff, mypy --strict
against simdra as installed, no import of the private `driver` package; and it stays
small.

docs/examples/accel-kind, the guide's partitionable kind (counter sets, partitions, two
capacities), passes the same gates; its test also runs from the guide's command."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.deploy.dockerfile import (
    context_files,
    copy_sources,
    exec_form,
    parse_dockerfile,
    read_dockerignore,
)

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "docs" / "examples" / "crypto-driver"
PACKAGE = EXAMPLE / "crypto_driver"
ACCEL = REPO / "docs" / "examples" / "accel-kind"
# Each example and how many Python files mypy checks in it (its own code and its test).
EXAMPLES = {EXAMPLE: 2, ACCEL: 2}
MAX_LINES = 150  # of its own Python, its test aside
# What a driver may import of simdra: the public API (simdra/__init__.py names the rest
# of it, runtime and sysfs, which this driver does not need).
PUBLIC = {"simdra", "simdra.testing", "simdra.runtime", "simdra.sysfs"}


def _run(*args: str, env: dict[str, str] | None = None,
         cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*args], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})}, check=False)


def _python_files(root: Path = EXAMPLE) -> list[Path]:
    return sorted(root.rglob("*.py"))


def _imported(path: Path) -> set[str]:
    """The modules a file imports (relative imports as `.name`)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
    return found


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_the_example_is_ruff_clean_with_its_own_settings(example: Path) -> None:
    # Its pyproject's [tool.ruff], the settings an author copies: ruff finds them from
    # its directory (and from the repository root, the nearest configuration wins).
    done = _run(sys.executable, "-m", "ruff", "check", "--no-cache", ".", cwd=example)

    assert done.returncode == 0, done.stdout + done.stderr


def _installed_simdra(tmp_path: Path) -> Path:
    """An interpreter whose site-packages hold simdra as an installed package would (a
    `.pth` line, as a compat-mode editable install writes) and this one's packages, for
    mypy's --python-executable: it reads simdra's types (py.typed) without checking the
    private internals' source as the author's own code."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")],
                   check=True, timeout=120)
    python = tmp_path / "venv" / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    Path(site, "simdra-checkout.pth").write_text(f"{REPO}\n{ours}\n")
    return python


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_the_example_is_mypy_strict_clean_with_its_own_settings(tmp_path: Path,
                                                                example: Path) -> None:
    python = _installed_simdra(tmp_path)
    done = _run(sys.executable, "-m", "mypy", "--no-incremental", "--python-executable",
                str(python), cwd=example)

    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Success: no issues found in {EXAMPLES[example]} source files" in done.stdout


def test_the_example_imports_only_the_public_api() -> None:
    files = [*_python_files(), *_python_files(ACCEL)]
    assert PACKAGE / "__init__.py" in files and ACCEL / "accel_kind.py" in files
    private = {f"{p.relative_to(REPO)}: {m}" for p in files for m in _imported(p)
               if m.startswith("simdra.") and m not in PUBLIC}

    assert private == set()
    assert "simdra" in _imported(PACKAGE / "__init__.py")
    assert "simdra" in _imported(ACCEL / "accel_kind.py")


def test_the_example_is_small() -> None:
    own = [p for p in _python_files() if "tests" not in p.relative_to(EXAMPLE).parts]
    lines = sum(len(p.read_text().splitlines()) for p in own)

    assert own and lines <= MAX_LINES, f"{lines} lines in {[str(p) for p in own]}"


def test_the_import_check_sees_a_private_import(tmp_path: Path) -> None:
    """The AST walk finds each form an import of `simdra._driver` can take."""
    sample = tmp_path / "sample.py"
    sample.write_text("import simdra._driver.cli\nfrom simdra._driver import plugin\n"
                      "from simdra.testing import LocalCluster\nfrom . import sibling\n")

    assert _imported(sample) == {"simdra._driver.cli", "simdra._driver", "simdra.testing", "."}


def test_the_examples_image_builds_like_simdras_from_the_same_context() -> None:
    """Its Dockerfile (built from the repository root, as the e2e's images.sh does) takes
    simdra's base image and locks, finds simdra and the example in the build context
    (.dockerignore is an allow-list) but not the example's tests, installs nothing
    unhashed and runs the driver's own command."""
    ours = parse_dockerfile((REPO / "Dockerfile").read_text())
    theirs = parse_dockerfile((EXAMPLE / "Dockerfile").read_text())
    build = theirs.stage("build")
    files = context_files(REPO, copy_sources(build),
                          read_dockerignore((REPO / ".dockerignore").read_text()))

    assert theirs.global_args == ours.global_args
    assert {"simdra/__init__.py", "simdra/_driver/cli/run.py", "requirements/runtime.lock",
            "docs/examples/crypto-driver/crypto_driver/__init__.py",
            "docs/examples/crypto-driver/pyproject.toml"} <= set(files)
    assert not [f for f in files if "/tests/" in f or f.startswith("simdra/_driver/testing/")]
    installs = [step.split() for run in build.all("RUN") for step in run.arguments.split("&&")
                if " install " in step]
    assert installs and all("--no-deps" in words for words in installs)
    assert all("--require-hashes" in words or "--no-index" in words for words in installs)
    assert exec_form(theirs.stages[-1].all("ENTRYPOINT")[-1]) == ["crypto-dra-plugin", "run"]
