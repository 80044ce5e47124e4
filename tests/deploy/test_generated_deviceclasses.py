"""The DeviceClasses the deployment ships are generated from the registered kinds
(hack/gen-deviceclasses.sh runs `simdra deviceclasses`): deploy/base/deviceclasses.yaml
whole, and the chart's `deviceClasses.classes` between its GENERATED markers. A kind
added or changed without regenerating fails here."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from simdra._driver.builtins import builtin_kinds
from simdra._driver.devices.device_classes import device_classes, helm_classes

REPO = Path(__file__).resolve().parents[2]
GENERATOR = REPO / "hack" / "gen_deviceclasses.py"
BASE = Path("deploy/base/deviceclasses.yaml")
VALUES = Path("deploy/helm/simdra/values.yaml")
DRIVER = "dra.example.com"


def _generator(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(GENERATOR), "--root", str(root), *args],
                          capture_output=True, text=True, timeout=120, check=False)


def _copy(tmp_path: Path) -> Path:
    for path in (BASE, VALUES):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / path, tmp_path / path)
    return tmp_path


def test_the_shipped_device_classes_are_up_to_date():
    done = _generator(REPO, "--check")

    assert done.returncode == 0, done.stderr + "\nregenerate with hack/gen-deviceclasses.sh"


def test_the_base_file_says_it_is_generated_and_by_what():
    text = (REPO / BASE).read_text()

    assert text.startswith("# GENERATED from the registered device kinds by\n"
                           f"#   simdra deviceclasses --driver-name {DRIVER}\n")


def test_the_base_file_holds_the_classes_of_the_registered_kinds():
    shipped = list(yaml.safe_load_all((REPO / BASE).read_text()))

    assert shipped == device_classes(builtin_kinds(), DRIVER)


def test_the_chart_values_list_the_registered_kinds():
    values = yaml.safe_load((REPO / VALUES).read_text())

    assert values["deviceClasses"]["classes"] == helm_classes(builtin_kinds())


def test_a_stale_file_is_named_and_regenerated_leaving_the_rest_alone(tmp_path):
    root = _copy(tmp_path)
    values_before = (root / VALUES).read_text()
    # As if a kind had been added without regenerating: one class and one entry short.
    base = (root / BASE).read_text()
    (root / BASE).write_text(base[: base.rindex("---")])
    (root / VALUES).write_text(values_before.replace("    - type: nic\n", "", 1))

    stale = _generator(root, "--check")

    assert stale.returncode == 1
    assert stale.stderr.splitlines() == [
        f"{BASE} is stale; run hack/gen-deviceclasses.sh",
        f"{VALUES} is stale; run hack/gen-deviceclasses.sh"]
    assert (root / BASE).read_text() != base, "--check writes nothing"

    regenerated = _generator(root)

    assert regenerated.returncode == 0, regenerated.stderr
    assert (root / BASE).read_text() == base
    assert (root / VALUES).read_text() == values_before
    assert _generator(root, "--check").returncode == 0


def test_values_without_the_markers_are_refused(tmp_path):
    root = _copy(tmp_path)
    unmarked = (root / VALUES).read_text().replace("# END GENERATED", "# the end")
    (root / VALUES).write_text(unmarked)

    done = _generator(root)

    assert done.returncode == 1
    assert f"{VALUES}: needs one `# BEGIN GENERATED` line and one `# END GENERATED`" in (
        done.stderr)
    assert (root / VALUES).read_text() == unmarked, "nothing written"
