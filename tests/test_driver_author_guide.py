"""docs/driver-authors.md, "Adding a kind, end to end", followed to the letter: its code
blocks are written into a copy of the repository, its commands are run there, and the
new kind goes through the harness (API stand-in, real plugin process, kubelet
emulator) with the DeviceClass and the claim the guide gives."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from setuptools import find_packages

from driver.testing.cluster import LocalCluster
from tests.deploy.dockerfile import is_ignored, parse_dockerfile, read_dockerignore

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "driver-authors.md"
SECTION = "## Adding a kind, end to end"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# What the repository copy needs: the package, its metadata, the deployment and the
# deployment tests (run on the changed tree).
COPIED = ("driver", "tests/deploy", "deploy", "pyproject.toml", "README.md",
          ".dockerignore", "Dockerfile")


@dataclass(frozen=True)
class Block:
    language: str
    text: str

    @property
    def marker(self) -> str:
        """The first line when it is a `# path...` comment, else ''."""
        first = self.text.splitlines()[0]
        return first[2:] if first.startswith("# ") and "/" in first.split()[1] else ""

    @property
    def body(self) -> str:
        """The text after the marker line."""
        return self.text.split("\n", 1)[1] if self.marker else self.text


def guide_blocks() -> list[Block]:
    text = GUIDE.read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return [Block(m[1], m[2]) for m in FENCE.finditer(text[start:end])]


def section_text() -> str:
    text = GUIDE.read_text()
    start = text.index(SECTION)
    return text[start:text.index("\n## ", start + len(SECTION))]


def _new_files(blocks: list[Block]) -> dict[str, str]:
    return {b.marker: b.body for b in blocks if b.marker and "," not in b.marker}


def _edit(blocks: list[Block], where: str) -> Block:
    (block,) = [b for b in blocks if b.marker.startswith(where)]
    return block


def _commands(blocks: list[Block]) -> list[list[str]]:
    return [shlex.split(line) for b in blocks if b.language == "sh"
            for line in b.text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def built() -> Iterator[Path]:
    """A copy of the repository with the guide's kind added as the guide says."""
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="sdg-"))
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=ignore)
        else:
            shutil.copy2(source, root / name)
    blocks = guide_blocks()
    for path, body in _new_files(blocks).items():
        assert not (root / path).exists(), f"the guide's new file {path} already exists"
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(body)
    registry = root / "driver/devices/registry.py"
    lines = registry.read_text().splitlines(keepends=True)
    opening = next(i for i, line in enumerate(lines) if line.startswith("BACKENDS"))
    closing = next(i for i in range(opening, len(lines)) if lines[i].startswith("}"))
    lines[closing:closing] = [_edit(blocks, "driver/devices/registry.py").body]
    registry.write_text("".join(lines))
    with open(root / "deploy/base/deviceclasses.yaml", "a") as classes:
        classes.write(_edit(blocks, "deploy/base/deviceclasses.yaml").body)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _python(root: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=root, env=_env(root), text=True,
                          capture_output=True, timeout=timeout, check=False)


def _env(root: Path) -> dict[str, str]:
    import os

    # The copy's `driver` package first: the plugin process imports it from there.
    return {**os.environ, "PYTHONPATH": str(root)}


def test_the_guide_counts_the_lines_it_makes_you_write() -> None:
    blocks = guide_blocks()
    took = section_text().split("What it took", 1)[1]
    for path, body in _new_files(blocks).items():
        stated = re.search(rf"`{re.escape(path)}`, (\d+) lines", took)
        assert stated, f"the guide does not count the lines of {path}"
        assert int(stated[1]) == len(body.splitlines()), path
    registry = _edit(blocks, "driver/devices/registry.py").body.splitlines()
    classes = _edit(blocks, "deploy/base/deviceclasses.yaml").body.splitlines()
    assert re.search(rf"{len(registry)} lines? in `driver/devices/registry.py`", took)
    assert re.search(rf"{len(classes)} lines appended to `deploy/base/deviceclasses.yaml`",
                     took)


def test_the_guides_unit_test_passes(built: Path) -> None:
    (pytest_command,) = [c for c in _commands(guide_blocks()) if c[:3] == ["python", "-m",
                                                                           "pytest"]]

    done = _python(built, *pytest_command[1:], "-p", "no:cacheprovider", "-q")

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout


def test_the_new_kind_has_its_device_class_and_the_repository_checks_pass(built: Path) -> None:
    # The repository's own checks, run on the changed tree: every registered device type
    # has one DeviceClass, and the classes select devices by type.
    done = _python(built, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                   "tests/deploy/test_examples.py", "-k", "device_class")

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_the_new_kind_reaches_the_image(built: Path) -> None:
    (backend,) = [p for p in _new_files(guide_blocks()) if p.startswith("driver/")]
    package = str(Path(backend).parent).replace("/", ".")
    rules = read_dockerignore((built / ".dockerignore").read_text())
    stage = parse_dockerfile((built / "Dockerfile").read_text()).stage("build")
    copied = [src.rstrip("/") for c in stage.all("COPY") if "from" not in c.flags
              for src in c.arguments.split()[:-1]]

    assert not is_ignored(backend, rules), f"{backend} is left out of the build context"
    assert any(backend == s or backend.startswith(f"{s}/") for s in copied), copied
    assert package in find_packages(where=str(built), include=["driver*"])


def test_the_new_kind_runs_through_the_harness(built: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = guide_blocks()
    (run,) = [c for c in _commands(blocks) if c[:2] == ["simdra", "run"]]
    flags = run[2:]
    del flags[flags.index("--node-name"):flags.index("--node-name") + 2]
    (claim,) = [yaml.safe_load(b.text) for b in blocks
                if b.language == "yaml" and not b.marker]
    classes = list(yaml.safe_load_all((built / "deploy/base/deviceclasses.yaml").read_text()))
    # `python -m driver` looks in its working directory first: the copy's package.
    monkeypatch.chdir(built)
    monkeypatch.setenv("PYTHONPATH", str(built))
    workdir = Path(tempfile.mkdtemp(dir="/tmp", prefix="sdk-"))
    try:
        with LocalCluster(workdir) as cluster:
            cluster.api.put_objects("deviceclasses", classes)
            cluster.start_plugin(extra=flags)
            _claims_work_as_the_guide_says(cluster, claim)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _claims_work_as_the_guide_says(cluster: LocalCluster, claim: dict) -> None:
    promised = re.findall(r"`(?:SIMDRA_DEVICE_<ID>)?(_[A-Z_]+=[^`]+)`", section_text())
    assert len(promised) >= 5

    env = _prepare(cluster, claim)

    assert not isinstance(env, str), env
    for entry in promised:
        assert any(e.endswith(entry) for e in env), (entry, env)
    parameters = claim["spec"]["devices"]["config"][0]["opaque"]["parameters"]
    for field, bad in (("codec", "mp3"), ("maxSessions", 40)):
        assert f"`{field}: {bad}`" in section_text()
        other = json.loads(json.dumps(claim))
        other["metadata"]["name"] = f"bad-{field.lower()}"
        other["spec"]["devices"]["config"][0]["opaque"]["parameters"] = {
            **parameters, field: bad}
        error = _prepare(cluster, other)
        assert isinstance(error, str) and f".{field}: " in error, error
        assert "\n" not in error
        cluster.api.delete_object("resourceclaims", other["metadata"]["name"], "default")


def _prepare(cluster: LocalCluster, claim: dict) -> list[str] | str:
    """The CDI env of the prepared claim, or the prepare error."""
    name = claim["metadata"]["name"]
    cluster.resource.create_namespaced_resource_claim("default", claim)
    cluster.allocate(name)
    ref = cluster.claim_ref(name)
    answer = cluster.prepare(name)[ref.uid]
    if answer["error"]:
        return answer["error"]
    (spec,) = cluster.cdi_root.glob(f"*_{ref.uid}.json")
    return [e for d in json.loads(spec.read_text())["devices"]
            for e in d["containerEdits"].get("env", [])]
