"""The DeviceClasses generated from the registered kinds (`simdra deviceclasses`): one per
kind, named `<kind>.<driver>`, selecting the driver's devices of the kind (and the kind's
extra condition), the same in YAML, in the chart's values format and as data."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from simdra._driver.builtins import BUILTIN, builtin_kinds
from simdra._driver.cli import main
from simdra._driver.devices.device_classes import (
    device_classes,
    device_classes_yaml,
    helm_classes,
    helm_classes_yaml,
)
from simdra._driver.devices.kind_registry import KindSet, load_kinds
from simdra._driver.testing.allocation.cel import DeviceView, compile_selector
from tests.devices.kind_modules import CRYPTO, write_module

REPO = Path(__file__).resolve().parents[2]
DRIVER = "crypto.example.com"


@pytest.fixture
def crypto(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The spec of an out-of-tree CryptoKind, importable here and in child processes."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(REPO)]))
    for name in ("KINDS", "DRIVER_NAME"):
        monkeypatch.delenv(name, raising=False)
    return f"{write_module(tmp_path, CRYPTO)}:CryptoKind"


def _device(name: str, device_type: str, **attributes: str) -> dict:
    values = {"type": device_type, **attributes}
    return {"name": name, "attributes": {k: {"string": v} for k, v in values.items()}}


def test_one_class_per_registered_kind_named_kind_dot_driver(crypto):
    kinds = load_kinds(BUILTIN.kinds, [crypto])

    classes = device_classes(kinds, DRIVER)

    assert [c["metadata"]["name"] for c in classes] == [f"{n}.{DRIVER}" for n in kinds.names()]
    for body in classes:
        assert body["apiVersion"] == "resource.k8s.io/v1" and body["kind"] == "DeviceClass"
        assert body["metadata"]["labels"] == {"app.kubernetes.io/name": "simdra"}
        assert set(body["metadata"]) == {"name", "labels"}, "no annotations"


def test_a_class_selects_the_drivers_devices_of_its_kind_and_its_condition(crypto):
    (crypto_class,) = [c for c in device_classes(load_kinds(BUILTIN.kinds, [crypto]), DRIVER)
                       if c["metadata"]["name"] == f"crypto.{DRIVER}"]
    (selector,) = crypto_class["spec"]["selectors"]
    expression = selector["cel"]["expression"]
    compiled = compile_selector(expression)

    def matches(driver: str, device: dict) -> bool:
        return compiled.matches(DeviceView.of(driver, device))

    assert expression == (f'device.driver == "{DRIVER}" && '
                          f'device.attributes["{DRIVER}"].type == "crypto" && '
                          f'device.attributes["{DRIVER}"].model != "retired"')
    assert matches(DRIVER, _device("c0", "crypto", model="C1"))
    assert not matches(DRIVER, _device("c1", "crypto", model="retired")), "its condition"
    assert not matches(DRIVER, _device("g0", "gpu", model="C1")), "another kind"
    assert not matches("other.example.com", _device("c0", "crypto", model="C1"))


def test_the_yaml_is_the_classes_with_a_generated_header(crypto):
    kinds = load_kinds(BUILTIN.kinds, [crypto])

    text = device_classes_yaml(kinds, DRIVER, "simdra deviceclasses --kind x:Y")

    assert text.startswith("# GENERATED from the registered device kinds by\n"
                           "#   simdra deviceclasses --kind x:Y\n")
    assert list(yaml.safe_load_all(text)) == device_classes(kinds, DRIVER)
    assert "# crypto: Simulated crypto accelerators whose sessions many claims share." in text


@pytest.mark.parametrize("condition", [
    "device.attributes[\"DRIVER\"].model != 'it''s retired'",
    'device.attributes["DRIVER"].model in ["a",\n  "b"]',
    '  device.attributes["DRIVER"].model == "a"  ',
], ids=["quotes", "a line break", "outer spaces"])
def test_any_condition_survives_both_yaml_forms(condition):
    from simdra._driver.devices.kind import DeviceKind

    kind = type("OddKind", (DeviceKind,), {"name": "odd", "device_class_condition": condition})
    kinds = KindSet((kind,))

    classes = list(yaml.safe_load_all(device_classes_yaml(kinds, DRIVER, "simdra x")))
    values = yaml.safe_load(helm_classes_yaml(kinds))

    assert classes == device_classes(kinds, DRIVER)
    expression = classes[0]["spec"]["selectors"][0]["cel"]["expression"]
    assert expression.endswith(" && " + condition.strip().replace("DRIVER", DRIVER))
    assert values == helm_classes(kinds) == [{"type": "odd", "also": condition.strip()}]


def test_helm_values_keep_driver_for_the_chart_to_fill_in():
    kinds = builtin_kinds()

    entries = yaml.safe_load(helm_classes_yaml(kinds))

    assert [e["type"] for e in entries] == list(kinds.names())
    for entry, kind in zip(entries, kinds.kinds, strict=True):
        assert entry.get("also") == kind.device_class_condition


def test_simdra_deviceclasses_prints_the_classes_of_the_kinds_it_is_given(crypto, capsys):
    assert main(["deviceclasses", "--driver-name", DRIVER, "--kind", crypto]) == 0

    printed = capsys.readouterr().out
    # Only the named kind's class: simdra's own are deployed by simdra, not by this driver.
    [crypto_class] = [c for c in device_classes(load_kinds(BUILTIN.kinds, [crypto]), DRIVER)
                      if c["metadata"]["name"] == f"crypto.{DRIVER}"]
    assert list(yaml.safe_load_all(printed)) == [crypto_class]
    assert f"#   simdra deviceclasses --driver-name {DRIVER} --kind {crypto}\n" in printed


def test_simdra_deviceclasses_helm_values(crypto, capsys):
    assert main(["deviceclasses", "--kind", crypto, "--helm-values"]) == 0

    assert yaml.safe_load(capsys.readouterr().out) == [{
        "type": "crypto", "also": 'device.attributes["DRIVER"].model != "retired"'}]


def test_simdra_deviceclasses_driver_name_comes_from_the_environment(monkeypatch, capsys):
    monkeypatch.delenv("KINDS", raising=False)
    monkeypatch.setenv("DRIVER_NAME", "gpu.example.org")

    assert main(["deviceclasses"]) == 0

    first = next(yaml.safe_load_all(capsys.readouterr().out))
    assert first["metadata"]["name"] == f"{builtin_kinds().names()[0]}.gpu.example.org"


@pytest.mark.parametrize(("args", "expected"), [
    (["--driver-name", "not_a_domain"], "simdra deviceclasses: --driver-name='not_a_domain': "),
    (["--kind", "no_such_module_x:Kind"],
     "simdra deviceclasses: --kind: kind 'no_such_module_x:Kind': no module named "),
])
def test_a_bad_flag_is_one_line_and_exit_status_2(args, expected):
    env = {k: v for k, v in os.environ.items() if k not in ("KINDS", "DRIVER_NAME")}

    done = subprocess.run([sys.executable, "-m", "simdra", "deviceclasses", *args],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=60,
                          check=False)

    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(expected)
