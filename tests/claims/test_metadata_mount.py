"""A device metadata rewrite reaches a running container: the spec bind-mounts the
request's directory, so the file renamed into it is what a reader behind the mount sees
next (a bind-mounted file would keep the reader on the old inode). Needs root and
`unshare -m`; the real-node e2e (test_device_metadata.py) does the same in a container."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from simdra._driver.claims.plan.metadata import POD_CLAIM_ANNOTATION
from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.claims.source import StaticClaimSource
from simdra._driver.claims.types import ClaimRef
from tests.claims.builders import RULES

from .builders import DRIVER, claim, inventory, result

A = "aaaaaaaa-0000-4000-8000-000000000001"


def _can_bind_mount(tmp_path: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    (tmp_path / "probe").mkdir()
    done = subprocess.run(["unshare", "-m", "mount", "--bind", str(tmp_path / "probe"),
                           str(tmp_path / "probe")], capture_output=True, check=False)
    return done.returncode == 0


def _generation(stream: str) -> int:
    return int(json.loads(stream.splitlines()[0])["metadata"]["generation"])


def test_a_rewrite_is_seen_through_the_mount_the_spec_makes(tmp_path):
    if not _can_bind_mount(tmp_path):
        pytest.skip("needs root and unshare -m for a bind mount")
    source, cdi, data = StaticClaimSource(), tmp_path / "cdi", tmp_path / DRIVER
    raw = claim(A, [result("gpus", "gpu-0")])
    raw["metadata"]["annotations"] = {POD_CLAIM_ANNOTATION: "dev"}
    source.put(raw)

    def preparer() -> Preparer:
        return Preparer(DRIVER, source, lambda: inventory(gpus=2, nics=1), cdi, data,
                        device_metadata=True, rules=RULES)

    preparer().prepare([raw_ref(raw)])
    [spec] = cdi.glob(f"*{A}*.json")
    [mount] = [d["containerEdits"]["mounts"][0] for d in json.loads(spec.read_text())["devices"]
               if "_metadata_" in d["name"]]
    inside = tmp_path / "container" / mount["containerPath"].lstrip("/")
    inside.parent.mkdir(parents=True)
    host, target = Path(mount["hostPath"]), inside  # target: where the mount goes
    if host.is_dir():  # the mount point is what the runtime makes: a file for a file
        inside.mkdir()
        host, inside = host / f"{DRIVER}-metadata.json", inside / f"{DRIVER}-metadata.json"
    else:
        inside.touch()
    # The "container": the spec's mount in a mount namespace of its own, read twice.
    reader = subprocess.Popen(
        ["unshare", "-m", "sh", "-c",
         f'mount --bind -o {",".join(mount["options"])} "$0" "$1" && cat "$2" && '
         'echo --- && read go && cat "$2"', mount["hostPath"], str(target), str(inside)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert reader.stdout is not None
    first = ""
    for line in reader.stdout:
        if line == "---\n":
            break
        first += line

    host.write_text(host.read_text().replace('"gpu-0"', '"gpu-9"'))  # damaged on the host
    preparer()  # start-up rewrites it from the record: a new file renamed into place
    out, err = reader.communicate("go\n", timeout=60)

    assert reader.returncode == 0, err
    assert _generation(first) == 1
    assert _generation(out) == 2 and '"gpu-0"' in out and '"gpu-9"' not in out


def raw_ref(raw):
    return ClaimRef("default", raw["metadata"]["name"], raw["metadata"]["uid"])
