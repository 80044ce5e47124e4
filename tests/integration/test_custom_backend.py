"""A custom DeviceBackend loaded with `--device-backend module:Class`: the example FPGA
backend end to end (published, allocated, prepared into a CDI spec), and the clear
errors a bad spec gets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from simdra._driver.builtins import BUILTIN
from simdra._driver.cli import main
from simdra._driver.config import Config
from simdra._driver.devices.loader import BackendSpecError, load_backend_class
from simdra._driver.kinds.fpga import FpgaBackend
from simdra._driver.testing.allocation.builders import exactly
from simdra._driver.testing.cluster import LocalCluster
from simdra.runtime import make_backend  # simdra's catalog, as `simdra run` builds it
from tests.claims.builders import assert_valid_cdi_spec
from tests.devices.sysfs_trees import SysfsTree
from tests.devices.test_example_fpga import fpga_node

REPO = Path(__file__).resolve().parents[2]
FPGA_BACKEND = "simdra._driver.kinds.fpga:FpgaBackend"


def test_fpga_backend_publishes_allocates_and_prepares(cluster: LocalCluster) -> None:
    tree = fpga_node(SysfsTree(cluster.workdir / "host"))
    driver = cluster.driver_name
    # The class the deployment ships (deploy/base), which also skips failed cards.
    classes = yaml.safe_load_all((REPO / "deploy/base/deviceclasses.yaml").read_text())
    cluster.api.put_object("deviceclasses", next(
        c for c in classes if c["metadata"]["name"] == f"fpga.{driver}"))
    # By its name in simdra's catalog (simdra/_driver/builtins.py); the full spec works too.
    cluster.start_plugin(extra=["--device-backend", "fpga", "--sysfs-root", str(tree.sys)])

    published = cluster.published_devices()
    assert sorted(published) == ["fpga-0000-3b-00-0", "fpga-0000-af-00-0"]
    assert published["fpga-0000-3b-00-0"]["attributes"]["state"] == {"string": "write error"}

    # The card that sorts first failed its last programming; the class skips it.
    cluster.create_claim("accel", exactly("fpga", f"fpga.{driver}"))
    [result] = cluster.allocate("accel")["status"]["allocation"]["devices"]["results"]
    assert result["device"] == "fpga-0000-af-00-0"
    ref = cluster.claim_ref("accel")

    answer = cluster.prepare("accel")[ref.uid]

    assert answer["error"] == ""
    assert [d["device_name"] for d in answer["devices"]] == ["fpga-0000-af-00-0"]
    [spec_file] = cluster.cdi_root.glob(f"*_{ref.uid}.json")
    spec = json.loads(spec_file.read_text())
    assert_valid_cdi_spec(spec)
    [cdi_device] = spec["devices"]
    assert cdi_device["containerEdits"]["deviceNodes"] == [
        {"path": "/dev/dfl-fme.0"}, {"path": "/dev/dfl-port.0"}, {"path": "/dev/dfl-port.1"}]
    env = cdi_device["containerEdits"]["env"]
    assert any(e.endswith("_TYPE=fpga") for e in env)
    # The attributes the backend chose for the environment (its env_attributes).
    assert any(e.endswith("_STATE=unknown") for e in env), env  # DFL before a bitstream
    assert any(e.endswith("_PCI_BUS_ID=0000:af:00.0") for e in env), env
    assert not any("_UUID=" in e for e in env)

    assert cluster.unprepare(ref) == {ref.uid: {"error": ""}}
    assert not spec_file.exists()


@pytest.mark.parametrize("name", ["fpga", FPGA_BACKEND])
def test_make_backend_constructs_the_named_class_with_a_context(tmp_path: Path, name) -> None:
    tree = fpga_node(SysfsTree(tmp_path))
    config = Config(node_name="node-x", device_backend=name, sysfs_root=tree.sys)

    backend, kinds = make_backend(config)

    assert isinstance(backend, FpgaBackend)
    assert "fpga" in kinds.names()
    assert [p.name for p in backend.discover().pools] == ["node-x"]


def test_the_claim_rules_are_those_of_the_registered_kinds(tmp_path: Path) -> None:
    from simdra._driver.claims.plan.config import rules_for

    _, kinds = make_backend(Config(node_name="n", device_backend="fpga", sysfs_root=tmp_path))
    rules = rules_for(kinds)

    assert [h.kind for h in rules.config_handlers] == ["GpuConfig", "NicConfig"]
    assert rules.env_attributes["state"] == "STATE"  # FpgaKind's, brought by its backend
    assert rules.env_attributes["interfaceName"] == "INTERFACE_NAME"  # NicKind's


def test_import_errors_inside_the_backend_module_are_told_apart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "vendor_backend.py").write_text("import vendor_sdk_not_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    with pytest.raises(BackendSpecError) as missing_dependency:
        load_backend_class("vendor_backend:Backend")
    with pytest.raises(BackendSpecError) as missing_module:
        load_backend_class("vendor_backendz:Backend")

    assert "importing module vendor_backend failed" in str(missing_dependency.value)
    assert "vendor_sdk_not_installed" in str(missing_dependency.value)
    assert "no module named 'vendor_backendz'" in str(missing_module.value)


@pytest.mark.parametrize(("spec", "problem"), [
    ("fpgas", "not of the form package.module:ClassName"),
    ("simdra._driver.kinds.fpga:", "not of the form package.module:ClassName"),
    ("no_such_package.backends:Thing", "no module named 'no_such_package'"),
    ("simdra._driver.kinds.fpga:FpgaBackends", "has no attribute 'FpgaBackends'"),
    ("simdra._driver.kinds.fpga:PCI_BUS_ID", "is a str, not a class"),
    ("simdra._driver.devices.model:Inventory", "has no discover() method"),
])
def test_bad_backend_spec_is_a_usage_error_naming_the_flag(
        spec: str, problem: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--node-name", "node-1", "--device-backend", spec])

    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("simdra run: --device-backend=")
    assert problem in err


def test_bad_backend_from_the_environment_exits_2_before_connecting(tmp_path: Path) -> None:
    env = {**os.environ, "NODE_NAME": "node-1", "DEVICE_BACKEND": "vendor.fpga:Missing",
           "KUBECONFIG": str(tmp_path / "no-such-kubeconfig")}

    done = subprocess.run([sys.executable, "-m", "simdra", "run"], env=env, text=True,
                          capture_output=True, timeout=60, check=False)

    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "simdra run: --device-backend='vendor.fpga:Missing': must be one of "
        f"{', '.join(BUILTIN.backend_names())} or package.module:ClassName; "
        "no module named 'vendor' on the "
        "plugin's Python path"]
