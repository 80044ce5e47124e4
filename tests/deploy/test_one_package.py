"""`pip install simdra` installs one import package, `simdra`, and its metadata: nothing
with a generic name (`driver`) that could collide with an author's own module or another
distribution's; and `python -m simdra` is the command line."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip install .` would build and install (the same PEP 517 backend), built
    from a copy of the sources: a build in place leaves build/ in the checkout."""
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "simdra", source / "simdra",
                    ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "--quiet", "--wheel-dir", str(out), str(source)],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("simdra-*.whl")
    return built


def test_the_wheel_installs_simdra_and_its_metadata_only(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/", 1)[0] for name in archive.namelist()}
        names = archive.namelist()

    distribution, version = wheel.name.split("-")[:2]
    assert tops == {"simdra", f"{distribution}-{version}.dist-info"}
    assert "simdra/__main__.py" in names and "simdra/py.typed" in names
    assert "simdra/_driver/kubelet/gen/dra_v1_pb2.py" in names  # the generated code too


def test_the_console_scripts_point_into_simdra(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        (entry_points,) = [n for n in archive.namelist() if n.endswith("entry_points.txt")]
        text = archive.read(entry_points).decode()

    scripts = [line.split("=", 1)[1].strip() for line in text.splitlines() if "=" in line]
    assert len(scripts) == 2 and all(s.startswith("simdra.") for s in scripts), scripts


def test_python_dash_m_simdra_is_the_command_line() -> None:
    done = subprocess.run([sys.executable, "-m", "simdra", "--version"], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("simdra ")
