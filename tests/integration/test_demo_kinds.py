"""`simdra demo` and the harness show any registered kind: the DeviceClasses come from the
registered kinds (simdra's and those `--kind` names), and the demo claims one device of
each kind its profiles simulate and prints what the container gets."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from simdra._driver.builtins import builtin_kinds
from simdra._driver.cli import main
from simdra._driver.testing.allocation.builders import exactly
from simdra._driver.testing.cluster import LocalCluster
from simdra._driver.testing.kind_classes import kind_values
from tests.devices.kind_modules import CRYPTO, write_module

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def crypto(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The spec of an out-of-tree CryptoKind, importable here and in child processes."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(REPO)]))
    monkeypatch.delenv("KINDS", raising=False)
    return f"{write_module(tmp_path, CRYPTO)}:CryptoKind"


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="sdk-"))  # short: socket paths
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simdra", "demo", *args], capture_output=True,
                          text=True, timeout=120, check=False, cwd=REPO)


def _class_names(cluster: LocalCluster) -> list[str]:
    return sorted(c["metadata"]["name"] for c in cluster.api.objects("deviceclasses"))


def test_the_default_demo_claims_a_device_of_each_kind_of_its_profiles():
    done = _demo()

    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for name in builtin_kinds().names():
        assert f"\n{name}.dra.example.com: " in out, "every registered kind's class"
    assert re.search(r"default/gpu-claim: request gpu -> demo-node/gpu-\d\n", out)
    # NICs allow several allocations: the claim gets a share.
    assert re.search(r"default/nic-claim: request nic -> demo-node/nic-\d \(share ", out)
    assert re.search(r"env SIMDRA_DEVICE_\w+_UUID=GPU-", out), "what the GPU's container gets"
    assert re.search(r"env SIMDRA_DEVICE_\w+_INTERFACE_NAME=sim\d", out)
    assert "CDI spec files left: none" in out


def test_the_demo_shows_a_kind_of_ones_own(crypto):
    done = _demo("--profile", "crypto,nic", "--kind", crypto)

    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert ("crypto.dra.example.com: Simulated crypto accelerators whose sessions many claims "
            "share.") in out
    assert "--device-profile crypto,nic" in out
    assert re.search(r"default/crypto-claim: request crypto -> demo-node/crypto-\d "
                     r"\(share [-0-9a-f]+, consumes sessions=1\)", out)
    assert "default/gpu-claim" not in out, "only the kinds of the chosen profiles"
    assert re.search(r"env SIMDRA_DEVICE_\w+_MODEL=Crypto C1\n", out)
    assert re.search(r"env SIMDRA_DEVICE_\w+_CAPACITY_SESSIONS=1\n", out)
    assert "unprepared 2 claims; CDI spec files left: none" in out


@pytest.mark.parametrize(("args", "expected"), [
    (["--profile", "gpu,tpu"], "simdra demo: --profile='gpu,tpu': unknown device profile "
     "'tpu' (known: cpu, gpu, gpu-fractional, gpu-partitioned, gpu-shared, license, nic, "
     "nic-multi-numa)"),
    (["--profile", "crypto"], "simdra demo: --profile='crypto': unknown device profile "
     "'crypto'"),
    (["--profile", "gpu,gpu-shared"], "simdra demo: --profile='gpu,gpu-shared': device "
     "profiles gpu and gpu-shared are both of kind 'gpu'"),
    (["--kind", "no_such_module_y:Kind"], "simdra demo: --kind: kind 'no_such_module_y:Kind': "
     "no module named 'no_such_module_y'"),
])
def test_a_bad_profile_or_kind_is_one_line_and_exit_status_2(args, expected, capsys,
                                                             monkeypatch):
    monkeypatch.delenv("KINDS", raising=False)

    code = main(["demo", *args])

    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(expected)


def test_the_harness_creates_the_classes_of_simdras_kinds(workdir):
    with LocalCluster(workdir) as cluster:
        assert _class_names(cluster) == sorted(
            f"{name}.{cluster.driver_name}" for name in builtin_kinds().names())


def test_the_harness_creates_the_class_of_a_kind_the_plugin_is_started_with(workdir, crypto):
    with LocalCluster(workdir) as cluster:
        cluster.start_plugin(profile="crypto", num_devices=1, extra=["--kind", crypto])

        assert f"crypto.{cluster.driver_name}" in _class_names(cluster)
        cluster.create_claim("c1", exactly("crypto", f"crypto.{cluster.driver_name}"))
        [result] = cluster.allocate("c1")["status"]["allocation"]["devices"]["results"]
        assert result["device"] == "crypto-0"
        assert cluster.prepare("c1")[cluster.claim_ref("c1").uid]["error"] == ""


def test_the_harness_leaves_a_bad_kind_for_the_plugin_to_report(workdir):
    with LocalCluster(workdir) as cluster:
        with pytest.raises(RuntimeError, match="plugin exited with 2") as raised:
            cluster.start_plugin(extra=["--kind", "no_such_module_z:Kind"])

        assert "no module named 'no_such_module_z'" in str(raised.value)


BAD_NAME = '''
from simdra import Device, DeviceKind, FakeProfile


class BadKind(DeviceKind):
    """Devices whose names are not DNS labels."""

    name = "bad"
    profiles = (FakeProfile("bad", build=lambda context, index: Device(
        spec={"name": f"Bad_{index}", "attributes": {"type": {"string": "bad"}}})),)
'''


def test_the_harness_stops_at_once_when_a_kinds_devices_are_invalid(workdir, tmp_path,
                                                                     monkeypatch):
    # The plugin keeps serving (a node's claims outlive a bad rescan) but never publishes
    # the pool: the harness says why instead of waiting for its timeout.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(REPO)]))
    kind = f"{write_module(tmp_path, BAD_NAME)}:BadKind"
    with LocalCluster(workdir) as cluster:
        with pytest.raises(RuntimeError, match="invalid pool") as raised:
            cluster.start_plugin(profile="bad", num_devices=1, extra=["--kind", kind],
                                 timeout=600)

        assert 'device "Bad_0": spec.devices[0].name: Invalid value' in str(raised.value)


def test_kind_values_reads_every_form_of_the_flag():
    args = ["--node-name", "n", "--kind", "a:A, b:B", "--kind=c:C", "--kind", "a:A"]

    assert kind_values(args) == ("a:A", "b:B", "c:C")
