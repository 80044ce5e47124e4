"""The allocator's CEL subset: what selectors people write, evaluated like Kubernetes does."""

from __future__ import annotations

import pytest

from driver.testing.allocation.cel import (
    DeviceView,
    SelectorError,
    UnsupportedExpression,
    compile_selector,
)

DRIVER = "dra.example.com"
DEVICE = {
    "name": "gpu-0",
    "attributes": {
        "model": {"string": "LATEST-GPU-MODEL"},
        "index": {"int": 3},
        "healthy": {"bool": True},
        "driverVersion": {"version": "1.2.3-rc.1"},
        f"{DRIVER}/uuid": {"string": "gpu-1234"},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
    },
    "capacity": {"memory": {"value": "80Gi"}, f"{DRIVER}/cores": {"value": "108"}},
}
VIEW = DeviceView.of(DRIVER, DEVICE)
ATTR = f'device.attributes["{DRIVER}"]'
CAP = f'device.capacity["{DRIVER}"]'


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (f'device.driver == "{DRIVER}"', True),
        ("device.driver == 'other.example.com'", False),
        (f"{ATTR}.model == 'LATEST-GPU-MODEL'", True),
        (f'{ATTR}["model"] == "LATEST-GPU-MODEL"', True),
        (f"{ATTR}.uuid == 'gpu-1234'", True),  # published qualified, read unqualified
        (f"{ATTR}.index == 3", True),
        (f"{ATTR}.index > 2 && {ATTR}.index <= 3", True),
        (f"{ATTR}.index != 3", False),
        (f"{ATTR}.index == -3", False),
        (f"{ATTR}.healthy", True),
        (f"!{ATTR}.healthy", False),
        (f"{ATTR}.healthy == true", True),
        (f'{ATTR}.index == "3"', False),  # different types are never equal
        ('device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"', True),
        (f'{ATTR}.driverVersion.isGreaterThan(semver("1.2.2"))', True),
        (f'{ATTR}.driverVersion.isLessThan(semver("1.2.3"))', True),  # rc < release
        (f'{ATTR}.driverVersion.compareTo(semver("1.2.3-rc.1")) == 0', True),
        (f'{ATTR}.driverVersion == semver("1.2.3-rc.1+build.5")', True),
        (f"{ATTR}.driverVersion.major() == 1", True),
        (f'{CAP}.memory.compareTo(quantity("40Gi")) >= 0', True),
        (f'{CAP}.memory.compareTo(quantity("80Gi")) == 0', True),
        (f'{CAP}.memory.compareTo(quantity("81Gi")) < 0', True),
        (f'{CAP}.memory.compareTo(quantity("100G")) > 0', False),
        (f'{CAP}.memory.isGreaterThan(quantity("1Ti"))', False),
        (f"{CAP}.cores.asInteger() == 108", True),
        (f'"model" in {ATTR}', True),
        (f'"serial" in {ATTR}', False),
        (f'"memory" in {CAP}', True),
        ('"x" in device.attributes["unknown.example.com"]', False),
        (f"{ATTR}.model.startsWith('LATEST') && {ATTR}.model.endsWith('MODEL')", True),
        (f'{ATTR}.model.contains("GPU")', True),
        ("device.allowMultipleAllocations", False),
        ("(true || false) && !(false)", True),
        # A missing key is an error, but && / || absorb it when the other side decides.
        (f"{ATTR}.serial == 'x' || true", True),
        (f"false && {ATTR}.serial == 'x'", False),
        (f'"serial" in {ATTR} && {ATTR}.serial == "x"', False),
    ],
)
def test_supported_expressions(expression, expected):
    assert compile_selector(expression).matches(VIEW) is expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (f"{ATTR}.serial == 'x'", "no such key: serial"),
        (f"{ATTR}.serial == 'x' && true", "no such key: serial"),
        ('device.attributes["other.example.com"].model == "x"', "no such key: model"),
        (f"{ATTR}.model < 3", "no such overload: string < int"),
        (f"{ATTR}.index", "must evaluate to a bool"),
        (f"{CAP}.memory.compareTo(3) == 0", "no such overload"),
        ('quantity("lots").sign() == 1', "'lots' is not a valid quantity"),
    ],
)
def test_runtime_errors_name_the_expression(expression, message):
    with pytest.raises(SelectorError) as error:
        compile_selector(expression).matches(VIEW)
    assert message in str(error.value)
    assert expression in str(error.value)


@pytest.mark.parametrize(
    ("expression", "what"),
    [
        (f"{ATTR}.all(x, true)", "unsupported method 'all'"),
        ("size(device.attributes) > 0", "unknown name 'size'"),
        ("has(device.attributes.x)", "unknown name 'has'"),
        ("device.name == 'gpu-0'", "unknown device field 'name'"),
        ("1.5 > 1", "unsupported syntax"),
        ("true ? true : false", "unsupported syntax"),
        ("1 + 1 == 2", "unsupported syntax"),
        (f"{ATTR}.model.matches('^L')", "unsupported method 'matches'"),
        ("cel.bind(x, 1, x == 1)", "unknown name 'cel'"),
        ("device.driver == ", "unsupported syntax"),
        ("(true", "expected ')'"),
        ("r'raw' == 'raw'", "unknown name 'r'"),
        ("", "empty"),
    ],
)
def test_unsupported_expressions_are_refused_not_guessed(expression, what):
    with pytest.raises(UnsupportedExpression) as error:
        compile_selector(expression)
    assert what in str(error.value)
    assert f"`{expression}`" in str(error.value) or not expression
