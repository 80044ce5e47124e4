"""The layer contracts (`[tool.importlinter]` in pyproject.toml) fail a wrong import.

Each case copies the package and pyproject.toml to a temporary directory, adds one
import against a contract to one module, and runs `lint-imports` there, as
hack/test.sh does in the repository.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# `lint-imports` itself, run by the interpreter running the tests.
LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command; " \
               "sys.exit(lint_imports_command())"


def _contract_names() -> dict[str, str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {c["id"]: c["name"] for c in config["tool"]["importlinter"]["contracts"]}


def _lint_copy(tmp_path: Path, module: str | None = None, line: str = "") -> tuple[int, str]:
    """Run lint-imports on a copy of the package, with `line` appended to `module`."""
    shutil.copytree(ROOT / "simdra", tmp_path / "simdra",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    if module is not None:
        path = tmp_path / (module.replace(".", "/") + ".py")
        path.write_text(path.read_text() + f"\n{line}\n")
    done = subprocess.run([sys.executable, "-c", LINT_IMPORTS, "--no-cache"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout + done.stderr


def test_the_package_as_it_is_keeps_every_contract(tmp_path: Path) -> None:
    code, output = _lint_copy(tmp_path)
    assert code == 0, output
    for name in _contract_names().values():
        assert f"{name} KEPT" in output


@pytest.mark.parametrize(("contract", "module", "line"), [
    # The runtime path importing the harness.
    ("harness", "simdra._driver.slices.desired", "import simdra._driver.testing"),
    # The harness importing the command line above it.
    ("layers", "simdra._driver.testing.demo", "import simdra._driver.cli.usage"),
    # A layer below the command line naming a built-in kind or simdra's catalog, instead
    # of being handed them.
    ("layers", "simdra._driver.plugin", "import simdra._driver.kinds.gpu"),
    ("layers", "simdra._driver.devices.backend", "from simdra._driver import builtins"),
    # The fleet reaching for a node's kubelet sockets.
    ("fleet-without-a-node", "simdra._driver.fleet.run",
     "from simdra._driver.kubelet import sockets"),
    # The device layer importing the kubelet layer above it (and its gRPC code).
    ("layers", "simdra._driver.devices.model", "from simdra._driver.kubelet import sockets"),
    # The ground floor importing anything of ours.
    ("layers", "simdra._driver.core.health", "import simdra._driver.devices.model"),
    # One lane importing the other.
    ("lanes", "simdra._driver.slices.desired", "import simdra._driver.claims.types"),
    # The claim lane importing the layer above it.
    ("layers", "simdra._driver.claims.plan.prepared", "import simdra._driver.slices.api"),
    # A built-in kind reaching past the public API into the internals.
    ("kinds-on-public-api", "simdra._driver.kinds.nic",
     "from simdra._driver.claims.plan import cdi"),
    # The internals importing the public face above them.
    ("public-face-on-top", "simdra._driver.devices.model", "import simdra.runtime"),
    ("public-face-on-top", "simdra._driver.cli.run", "from simdra import testing"),
    # The API stand-in judging writes with the driver's own validators.
    ("own-rule-book", "simdra._driver.testing.apiserver.lifecycle",
     "from simdra._driver.core.validation import validate_slice"),
    # ... or with just one rule module of them.
    ("own-rule-book", "simdra._driver.testing.apiserver.validation.devices",
     "from simdra._driver.core.validation.names import dns_label_errors"),
])
def test_a_wrong_import_breaks_its_contract(
    tmp_path: Path, contract: str, module: str, line: str
) -> None:
    code, output = _lint_copy(tmp_path, module, line)
    assert code != 0, output
    assert f"{_contract_names()[contract]} BROKEN" in output
    assert module in output  # the report names the importing module


def _imports_of_simdra_itself(path: Path) -> list[str]:
    """`import simdra` and `from simdra import ...` in one module (the root face)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name == "simdra"]
        elif isinstance(node, ast.ImportFrom) and node.module == "simdra" and node.level == 0:
            found += [f"from simdra import {a.name}" for a in node.names
                      if a.name not in ("_driver",)]
    return found


def test_no_internal_module_imports_the_root_face() -> None:
    """`simdra` re-exports the internals' names and runs the command line (`main`): an
    internal module importing it would close a loop the contracts cannot see, as they
    cannot name a package's root apart from its children."""
    internals = sorted((ROOT / "simdra" / "_driver").rglob("*.py"))
    found = {f"{p.relative_to(ROOT)}: {i}" for p in internals
             for i in _imports_of_simdra_itself(p)}

    assert len(internals) > 200 and found == set()


def test_the_root_face_check_sees_each_form(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import simdra\nfrom simdra import DeviceKind\n"
                      "from simdra import _driver\nimport simdra._driver.api\n")

    assert _imports_of_simdra_itself(sample) == ["simdra", "from simdra import DeviceKind"]
