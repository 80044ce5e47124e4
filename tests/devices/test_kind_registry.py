"""Registering device kinds: kinds that cannot live together, or cannot be loaded, are one
line naming both sides and the fix (exit status 2 on the command line), and nothing is
registered then."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from simdra._driver.builtins import BUILTIN, builtin_kinds
from simdra._driver.cli import main
from simdra._driver.devices.kind_registry import (
    KindRegistrationError,
    kind_spec,
    load_kinds,
)
from simdra._driver.kinds.gpu import GpuKind
from tests.devices.kind_modules import CRYPTO, write_module

REPO = Path(__file__).resolve().parents[2]
GPU = kind_spec(GpuKind)

# Kinds declared next to CryptoKind (tests/devices/kind_modules.py), each wrong in one way.
OTHERS = '''
class Twin(DeviceKind):
    name = "crypto"


class MyGpu(DeviceKind):
    name = "gpu"


class SameConfig(DeviceKind):
    name = "crypto2"
    config_handlers = (type("Handler2", (CryptoConfigHandler,), {"device_type": "crypto2"})(),)


class SameProfile(DeviceKind):
    name = "crypto3"
    profiles = (FakeProfile("crypto", build=crypto_device),)


class GpuProfile(DeviceKind):
    name = "crypto3"
    profiles = (FakeProfile("gpu-shared", build=crypto_device),)


class OtherModelKey(DeviceKind):
    name = "crypto4"
    env_attributes = {"model": "MODEL_NAME"}


class OtherAttributeSameKey(DeviceKind):
    name = "crypto4"
    env_attributes = {"vendorModel": "MODEL"}


class TwoAttributesOneKey(DeviceKind):
    name = "crypto4"
    env_attributes = {"serial": "ID", "uuid": "ID"}


class ReservedKey(DeviceKind):
    name = "crypto4"
    env_attributes = {"claimName": "CLAIM"}


class BadName(DeviceKind):
    name = "Crypto_X"


class WrongDeviceType(DeviceKind):
    name = "crypto5"
    config_handlers = (CryptoConfigHandler(),)


class NotAKind:
    name = "crypto6"


class TwoLineCondition(DeviceKind):
    name = "crypto7"
    device_class_condition = 'device.attributes["DRIVER"].model in ["a",\\n  "b"]'


class PrepareOnlySkipped(DeviceKind):
    name = "crypto8"
    skip_node_operations = ("NodePrepareResources",)


class HalfHandler:
    api_version, kind, device_type = "crypto.example.com/v1", "Half", "crypto9"

    def decode(self, fields): return None
    def env(self, config): return []


class HalfHandlerKind(DeviceKind):
    name = "crypto9"
    config_handlers = (HalfHandler(),)
'''


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A kind module (CryptoKind and OTHERS) on this process's Python path and the
    PYTHONPATH of its children."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(REPO)]))
    monkeypatch.delenv("KINDS", raising=False)
    return write_module(tmp_path, CRYPTO + OTHERS)


# (the kinds named with --kind, with {m} for the module; what the one line must say)
CASES = {
    "two kinds with one name": (
        ["{m}:CryptoKind", "{m}:Twin"],
        ["kinds {m}:CryptoKind and {m}:Twin", "both are named 'crypto'", "rename one"]),
    "a kind named like one of simdra's": (
        ["{m}:MyGpu"], [f"kinds {GPU} and {{m}}:MyGpu", "both are named 'gpu'", "rename one"]),
    "one config kind in two kinds": (
        ["{m}:CryptoKind", "{m}:SameConfig"],
        ["kinds {m}:CryptoKind and {m}:SameConfig",
         "both declare the config kind crypto.example.com/v1 CryptoConfig",
         "give one its own apiVersion or kind"]),
    "one fake profile name in two kinds": (
        ["{m}:CryptoKind", "{m}:SameProfile"],
        ["kinds {m}:CryptoKind and {m}:SameProfile", "both declare the fake profile 'crypto'",
         "rename one of the profiles"]),
    "a profile named like one of simdra's": (
        ["{m}:GpuProfile"],
        [f"kinds {GPU} and {{m}}:GpuProfile", "the fake profile 'gpu-shared'", "rename one"]),
    "an env attribute mapped to two keys": (
        ["{m}:CryptoKind", "{m}:OtherModelKey"],
        ["kinds {m}:CryptoKind and {m}:OtherModelKey",
         "env_attributes['model'] is 'MODEL' in the first and 'MODEL_NAME' in the second",
         "map the attribute to one key in both"]),
    "two kinds' attributes under one env key": (
        ["{m}:CryptoKind", "{m}:OtherAttributeSameKey"],
        ["kinds {m}:CryptoKind and {m}:OtherAttributeSameKey",
         "env key 'MODEL' is env_attributes['model'] in the first and "
         "env_attributes['vendorModel'] in the second", "give one attribute another key"]),
    "one kind's attributes under one env key": (
        ["{m}:TwoAttributesOneKey"],
        ["kind {m}:TwoAttributesOneKey", "'serial' and 'uuid' are both mapped to 'ID'",
         "give each attribute its own key"]),
    "an env key the plugin sets itself": (
        ["{m}:ReservedKey"],
        ["kind {m}:ReservedKey", "env_attributes['claimName'] = 'CLAIM'",
         "not one the plugin sets itself"]),
    "a bad kind name": (
        ["{m}:BadName"],
        ["kind {m}:BadName", "name 'Crypto_X' is not a DNS label", "set `name` to one"]),
    "a config handler for another device type": (
        ["{m}:WrongDeviceType"],
        ["kind {m}:WrongDeviceType", "config kind CryptoConfig configures devices of type "
         "'crypto', not 'crypto5'", "set its device_type to 'crypto5'"]),
    "a class that is not a DeviceKind": (
        ["{m}:NotAKind"],
        ["kind {m}:NotAKind", "NotAKind is not a DeviceKind", "subclass simdra.DeviceKind"]),
    "a DeviceClass condition of two lines": (
        ["{m}:TwoLineCondition"],
        ["kind {m}:TwoLineCondition", "is not one line of CEL",
         "write the condition on one line"]),
    "a prepare skipped without its unprepare": (
        ["{m}:PrepareOnlySkipped"],
        ["kind {m}:PrepareOnlySkipped", "skip_node_operations ('NodePrepareResources',)",
         "use ('*',) or ('NodePrepareResources', 'NodeUnprepareResources')"]),
    "a config handler without all four methods": (
        ["{m}:HalfHandlerKind"],
        ["kind {m}:HalfHandlerKind", "config handler HalfHandler has no problems(), "
         "device_problems()", "a ConfigHandler implements decode, problems, device_problems, "
         "env (return [] where there is nothing to check)"]),
    "a class the module does not have": (
        ["{m}:Missing"],
        ["kind '{m}:Missing'", "module {m} has no attribute 'Missing'",
         "correct the --kind value"]),
}


def _filled(texts: list[str], module: str) -> list[str]:
    return [text.format(m=module) for text in texts]


@pytest.mark.parametrize("case", CASES)
def test_kinds_that_cannot_be_registered_are_one_line_naming_both_sides(module, case):
    specs, expected = (_filled(texts, module) for texts in CASES[case])

    with pytest.raises(KindRegistrationError) as raised:
        load_kinds(BUILTIN.kinds, specs)

    message = str(raised.value)
    assert "\n" not in message
    for text in expected:
        assert text in message


@pytest.mark.parametrize("case", CASES)
def test_the_command_line_says_it_in_one_line_with_exit_status_2(module, case, capsys):
    specs, expected = (_filled(texts, module) for texts in CASES[case])

    code = main(["kinds", "--kind", ",".join(specs)])

    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == "", "nothing of the other kinds is listed"
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("simdra kinds: --kind: ")
    assert expected[-1] in line


def test_a_kind_that_can_be_registered_is_listed(module, capsys):
    # The control for the cases above: the module itself loads.
    assert main(["kinds", "--kind", f"{module}:CryptoKind"]) == 0

    listed = capsys.readouterr().out
    assert f"crypto  ({module}:CryptoKind)" in listed
    assert "config crypto.example.com/v1 CryptoConfig" in listed


@pytest.mark.parametrize(("source", "expected"), [
    ("import vendor_sdk_not_installed\n",
     "importing module {m} failed: No module named 'vendor_sdk_not_installed'"),
    ("raise RuntimeError('licence file /etc/crypto.lic is missing')\n",
     "importing module {m} failed: RuntimeError: licence file /etc/crypto.lic is missing"),
], ids=["a dependency is not installed", "the module raises on import"])
def test_a_kind_module_that_fails_to_import_is_named_with_why(tmp_path, monkeypatch, source,
                                                              expected):
    monkeypatch.syspath_prepend(str(tmp_path))
    name = write_module(tmp_path, source)

    with pytest.raises(KindRegistrationError) as raised:
        load_kinds(BUILTIN.kinds, [f"{name}:CryptoKind"])

    message = str(raised.value)
    assert message.startswith(f"kind '{name}:CryptoKind': {expected.format(m=name)}")
    assert message.endswith("or install the module and what it imports where the "
                            "plugin's Python finds them")


def test_nothing_is_half_registered(module):
    with pytest.raises(KindRegistrationError):
        load_kinds(BUILTIN.kinds, [f"{module}:CryptoKind", f"{module}:Twin"])

    # The failed registration left nothing behind: each load starts from simdra's kinds.
    loaded = load_kinds(BUILTIN.kinds, [f"{module}:CryptoKind"])
    assert loaded.names() == (*builtin_kinds().names(), "crypto")
    assert "crypto" not in builtin_kinds().names()


def test_the_same_class_named_twice_registers_once(module):
    kinds = load_kinds(BUILTIN.kinds, [f"{module}:CryptoKind", f" {module}:CryptoKind "])

    assert kinds.names().count("crypto") == 1


@pytest.mark.parametrize("command", [
    ["run", "--node-name", "n1", "--kind", "{m}:CryptoKind,{m}:Twin"],
    ["kinds", "--kind", "{m}:CryptoKind", "--kind", "{m}:Twin"],
    ["deviceclasses", "--kind", "{m}:CryptoKind,{m}:Twin"],
], ids=lambda command: command[0])
def test_the_simdra_process_exits_2_with_one_stderr_line(module, command):
    args = [word.format(m=module) for word in command]
    env = {k: v for k, v in os.environ.items() if k not in ("NODE_NAME", "KUBECONFIG")}

    done = subprocess.run([sys.executable, "-m", "simdra", *args], capture_output=True,
                          text=True, env=env, timeout=60, check=False)

    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"simdra {args[0]}: --kind: kinds {module}:CryptoKind and {module}:Twin: both are "
        "named 'crypto'; rename one (its `name`) or register only one"]


def test_kinds_env_var_registers_them_too(module, monkeypatch):
    monkeypatch.setenv("KINDS", f"{module}:CryptoKind,{module}:Twin")

    done = subprocess.run([sys.executable, "-m", "simdra", "kinds"], capture_output=True,
                          text=True, timeout=60, check=False)

    assert done.returncode == 2
    assert "both are named 'crypto'" in done.stderr
