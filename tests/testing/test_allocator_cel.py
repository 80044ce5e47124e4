"""The allocator's CEL: what selectors people write, evaluated like Kubernetes does."""

from __future__ import annotations

import pytest

from simdra._driver.testing.allocation.cel import (
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
        "firmware": {"version": "2.10.0"},
        "modes": {"strings": ["compute", "graphics"]},
        "ports": {"ints": [1, 3, 5]},
        f"{DRIVER}/uuid": {"string": "gpu-1234"},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
    },
    "capacity": {
        "memory": {"value": "80Gi"},
        f"{DRIVER}/cores": {"value": "108"},
        "power": {"value": "1500m"},
    },
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
        (f'{ATTR}.index.compareTo(quantity("1")) == 0', "no such overload"),
        ('sign(quantity("lots")) == 1', "'lots' is not a valid quantity"),
    ],
)
def test_runtime_errors_name_the_expression(expression, message):
    with pytest.raises(SelectorError) as error:
        compile_selector(expression).matches(VIEW)
    assert message in str(error.value)
    assert expression in str(error.value)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # `in` on lists and maps (list attributes, literals, domains)
        (f'"compute" in {ATTR}.modes', True),
        (f'"video" in {ATTR}.modes', False),
        (f"3 in {ATTR}.ports", True),
        (f"{ATTR}.index in [1, 2, 3]", True),
        (f"{ATTR}.model in ['A', 'B']", False),
        (f'"3" in {ATTR}.ports', False),  # heterogeneous equality: never equal, no error
        (f'"{DRIVER}" in device.attributes', True),
        ('"resource.kubernetes.io" in device.attributes', True),
        ('"unknown.example.com" in device.attributes', False),
        (f"{ATTR}.modes.includes('graphics')", True),
        (f"{ATTR}.model.includes('LATEST-GPU-MODEL')", True),
        # has()
        (f"has({ATTR}.model)", True),
        (f"has({ATTR}.serial)", False),
        (f"has({ATTR}.serial) && {ATTR}.serial == 'x'", False),
        (f"!has({ATTR}.serial) || {ATTR}.serial == 'x'", True),
        (f"has({CAP}.memory)", True),
        ('has(device.attributes["unknown.example.com"].model)', False),
        # size()
        (f"size({ATTR}) == 8", True),
        (f"{ATTR}.modes.size() == 2", True),
        (f"size({ATTR}.model) == 16", True),
        ("size(device.attributes) == 2", True),
        ('size(device.attributes["unknown.example.com"]) == 0', True),
        # matches() (RE2) and the strings extension
        (f"{ATTR}.model.matches('^LATEST-[A-Z]+-MODEL$')", True),
        (f"{ATTR}.model.matches('gpu')", False),
        (f"matches({ATTR}.uuid, '^gpu-[0-9]+$')", True),
        (f"{ATTR}.model.lowerAscii() == 'latest-gpu-model'", True),
        (f"{ATTR}.uuid.upperAscii() == 'GPU-1234'", True),
        (f"{ATTR}.model.split('-') == ['LATEST', 'GPU', 'MODEL']", True),
        (f"{ATTR}.model.indexOf('GPU') == 7", True),
        (f"{ATTR}.model.substring(0, 6) == 'LATEST'", True),
        (f"{ATTR}.model.replace('-', '_') == 'LATEST_GPU_MODEL'", True),
        (f"{ATTR}.modes.join(',') == 'compute,graphics'", True),
        ("'  x '.trim() == 'x'", True),
        (f"{ATTR}.uuid.find('[0-9]+') == '1234'", True),
        # ?: and macros
        (f"{ATTR}.index > 2 ? {ATTR}.healthy : false", True),
        (f"({ATTR}.index == 1 ? 'one' : 'many') == 'many'", True),
        (f"{ATTR}.ports.all(p, p % 2 == 1)", True),
        (f"{ATTR}.ports.exists(p, p > 4)", True),
        (f"{ATTR}.ports.exists_one(p, p > 2)", False),
        (f"{ATTR}.ports.filter(p, p > 1) == [3, 5]", True),
        (f"{ATTR}.ports.map(p, p * 2) == [2, 6, 10]", True),
        (f"{ATTR}.all(name, name.size() > 0)", True),  # a map iterates its keys
        (f"cel.bind(gpu, {ATTR}, gpu.healthy && gpu.index == 3)", True),
        # Kubernetes' lists library and the sets extension
        (f"{ATTR}.ports.isSorted() && {ATTR}.ports.sum() == 9", True),
        (f"{ATTR}.ports.min() == 1 && {ATTR}.modes.max() == 'graphics'", True),
        (f"{ATTR}.ports.indexOf(5) == 2 && {ATTR}.ports.lastIndexOf(7) == -1", True),
        (f"sets.contains({ATTR}.modes, ['compute'])", True),
        (f"sets.intersects({ATTR}.ports, [2, 4])", False),
        (f"sets.equivalent({ATTR}.ports, [5, 3, 1, 1])", True),
        # quantities
        (f'{CAP}.memory == quantity("80Gi")', True),
        (f'{CAP}.memory == quantity("81920Mi")', True),  # equal values, other spellings
        (f'{CAP}.memory.isGreaterThan(quantity("79Gi"))', True),
        (f'{CAP}.memory.isLessThan(quantity("80Gi"))', False),
        (f'{CAP}.power.compareTo(quantity("1.5")) == 0', True),
        (f"{CAP}.power.isInteger()", False),
        (f"{CAP}.cores.isInteger() && sign({CAP}.cores) == 1", True),  # sign() is global
        (f'{CAP}.memory.sub(quantity("16Gi")) == quantity("64Gi")', True),
        (f"{CAP}.cores.add(2).asInteger() == 110", True),
        (f"{CAP}.power.asApproximateFloat() == 1.5", True),
        ('isQuantity("1Gi") && !isQuantity("1GB")', True),
        (f'{ATTR}.index == quantity("1")', False),  # an int is unequal to other types
        # semantic versions
        (f'{ATTR}.firmware.isGreaterThan(semver("2.9.0"))', True),  # 10 > 9 numerically
        (f'{ATTR}.firmware.compareTo(semver("2.10.0+build")) == 0', True),
        (f'{ATTR}.firmware.isLessThan(semver("2.10.1"))', True),
        ('semver("1.0.0-alpha").isLessThan(semver("1.0.0-alpha.1"))', True),
        ('semver("1.0.0-alpha.beta").isLessThan(semver("1.0.0-beta"))', True),
        ('semver("1.0.0-2").isLessThan(semver("1.0.0-11"))', True),
        ('semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))', True),
        (f"{ATTR}.firmware.minor() == 10 && {ATTR}.firmware.patch() == 0", True),
        ('semver("v1.2", true) == semver("1.2.0")', True),
        ('isSemver("1.2.3") && !isSemver("1.2") && isSemver("1.2", true)', True),
        # other CEL that the old hand-written subset refused
        ("1.5 > 1", True),  # cross-type numeric comparison, as Kubernetes enables it
        (f"{ATTR}.index + 1 == 4", True),
        ("r'raw\\d' == 'raw\\\\d'", True),
        (f"{ATTR}.index == 3.0", True),  # numbers compare by value across types
        ("dyn(1) != 'a'", True),
    ],
)
def test_full_cel_and_the_kubernetes_libraries(expression, expected):
    assert compile_selector(expression).matches(VIEW) is expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # A missing attribute inside && / ||: the side that decides wins, either order.
        (f"{ATTR}.serial == 'x' || {ATTR}.index == 3", True),
        (f"{ATTR}.index == 3 || {ATTR}.serial == 'x'", True),
        (f"{ATTR}.serial == 'x' && {ATTR}.index == 4", False),
        (f"{ATTR}.index == 4 && {ATTR}.serial == 'x'", False),
        (f"{ATTR}.ports.exists(p, p == 3 || {ATTR}.serial == 'x')", True),
        (f"{CAP}.missing.isGreaterThan(quantity('1')) || true", True),
        # Macros combine their body's values like && / || do.
        (f"{ATTR}.ports.exists(p, p == 1 || {ATTR}.serial == 'x')", True),
        (f"{ATTR}.ports.all(p, p == 2 && {ATTR}.serial == 'x')", False),
        (f"{ATTR}.ports.map(p, {ATTR}.serial) == [] || true", True),
    ],
)
def test_a_missing_attribute_is_absorbed_when_the_other_side_decides(expression, expected):
    assert compile_selector(expression).matches(VIEW) is expected


@pytest.mark.parametrize(
    "expression",
    [
        f"{ATTR}.serial == 'x' || {ATTR}.index == 4",
        f"{ATTR}.index == 3 && {ATTR}.serial == 'x'",
        f"{ATTR}.ports.all(p, {ATTR}.serial == p)",
        f"cel.bind(s, {ATTR}.serial, s == 'x')",
        f"{ATTR}.ports.exists(p, p == {ATTR}.serial)",
        f"{ATTR}.ports.filter(p, {ATTR}.serial == p) == []",
    ],
)
def test_a_missing_attribute_is_an_error_when_it_decides(expression):
    with pytest.raises(SelectorError, match="no such key: serial"):
        compile_selector(expression).matches(VIEW)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (f"{ATTR}.model.substring(20) == ''", "index out of range"),
        # A quantity or semver compares only with its own type (cel-go asks the left side).
        (f'{ATTR}.driverVersion == quantity("1")', "no such overload"),
        (f"{ATTR}.ports[3] == 1", "index out of bounds: 3"),
        (f"{ATTR}.ports[-1] == 5", "index out of bounds: -1"),
        (f"{ATTR}.modes.contains('compute')", "no such overload"),  # lists use `in`
        ("int('0x10') == 16", "type conversion error"),
        (f"{ATTR}.modes > 1", "no such overload: list > int"),
        (f"{ATTR}.driverVersion.isGreaterThan({CAP}.memory)", "no such overload"),
        (f"{ATTR}.index.lowerAscii() == ''", "no such overload: int.lowerAscii()"),
        (f"'[x'.matches({ATTR}.model + '[')", "invalid regular expression: missing ]"),
        ("semver('1.02.3').major() == 1", "not a semantic version"),
        (f"{ATTR}.healthy && {ATTR}.index", "no such overload: bool && int"),
        ("quantity('1E').add(quantity('10E')).asInteger() > 0", "cannot convert value to integer"),
    ],
)
def test_runtime_errors_of_the_libraries(expression, message):
    with pytest.raises(SelectorError, match=None) as error:
        compile_selector(expression).matches(VIEW)
    assert message in str(error.value)


def test_unqualified_names_belong_to_the_driver_domain_only():
    # "model" was published without a domain: it is the driver's, not another domain's.
    view = DeviceView.of("other.example.com", DEVICE)
    assert compile_selector('device.attributes["other.example.com"].model != ""').matches(view)
    assert compile_selector('!has(device.attributes["dra.example.com"].model)').matches(view)
    # A qualified name keeps its domain whatever the driver.
    assert compile_selector('device.attributes["dra.example.com"].uuid == "gpu-1234"').matches(view)
    assert compile_selector('device.capacity["other.example.com"].memory == quantity("80Gi")'
                            ).matches(view)  # fmt: skip


def test_list_attributes_of_versions_are_semvers():
    view = DeviceView.of(DRIVER, {"name": "d", "attributes": {"v": {"versions": ["1.0.0"]}}})
    assert compile_selector(f'semver("1.0.0") in {ATTR}.v').matches(view)
    assert compile_selector(f'{ATTR}.v[0].isLessThan(semver("1.0.1"))').matches(view)


@pytest.mark.parametrize(
    ("expression", "what"),
    [
        ("device.name == 'gpu-0'", "undefined field 'name'"),
        ("device['driver'] == 'x'", "device is an object"),
        ("gpu.model == 'x'", "undeclared reference to 'gpu'"),
        ("unknown(1)", "undeclared reference to function 'unknown'"),
        ("'abc'.reverse() == 'cba'", "no matching overload for 'reverse' applied to '(string)'"),
        (f"{ATTR}.ports.reduce(a, p, a + p) == 9", "undeclared reference to method 'reduce'"),
        (f'has({ATTR}["model"])', "invalid argument to has() macro"),
        ("quantity() == quantity('1')", "function 'quantity' takes 1 argument(s), got 0"),
        ('semver("1.0.0").compareTo()', "method 'compareTo' takes 1 argument(s), got 0"),
        (f"{ATTR}.ports.all(1, true)", "macro 'all' takes 1 variable name(s) and 1 expression(s)"),
        ("cel.bind(x, 1)", "cel.bind takes a variable name, a value and an expression"),
        ("cel.other(1)", "undeclared reference to 'cel.other'"),
        ("x.all(x, true)", "undeclared reference to 'x'"),
        ("device.driver == ", "syntax error at column 15"),
        ("(true", "syntax error"),
        ("1 ++ 2", "syntax error"),
        ("Message{field: 1}", "message construction is not supported"),
        (f"{ATTR}.model.matches('[')", "invalid regular expression: missing ]"),
        ("matches('x', '(')", "invalid regular expression: missing )"),
        ("[1, 'a'].size() == 2", "expected type 'int' but found 'string' in a list literal"),
        (
            "device.attributes[1].size() == 0",
            "'_[_]' applied to '(map(string, map(string, dyn)), int)'",
        ),
        # Type errors the Kubernetes type checker reports (types known without a device).
        ("device.driver == 1", "no matching overload for '_==_' applied to '(string, int)'"),
        (f"{CAP}.memory.compareTo(3) == 0", "'compareTo' applied to '(kubernetes.Quantity, int)'"),
        (f'{CAP}.memory == semver("1.0.0")', "'_==_' applied to '(kubernetes.Quantity, kubernetes"),
        (f"{CAP}.memory < quantity('1Gi')", "'_<_' applied to '(kubernetes.Quantity, kubernetes"),
        (f"{ATTR}.driverVersion < semver('1.0.0')", "'_<_' applied to '(dyn, kubernetes.Semver)'"),
        (f"{ATTR}.healthy ? 1 : 'a'", "'_?_:_' applied to '(dyn, int, string)'"),
        ("'a' + 1 == 'a1'", "no matching overload for '_+_' applied to '(string, int)'"),
        ("sign(quantity(1)) == 1", "no matching overload for 'quantity' applied to '(int)'"),
        ("quantity('1').sign() == 1", "undeclared reference to method 'sign'"),
        ("'1.0.0'.major() == 1", "no matching overload for 'major' applied to '(string)'"),
        ("device.allowMultipleAllocations && 1", "'_&&_' applied to '(bool, int)'"),
        ("!device.driver", "no matching overload for '!_' applied to '(string)'"),
        ("1 == 1.0", "no matching overload for '_==_' applied to '(int, double)'"),
        ("device.driver", "must evaluate to bool or the unknown type, not string"),
        ("1 + 1", "must evaluate to bool or the unknown type, not int"),
        ("", "empty"),
    ],
)
def test_expressions_kubernetes_would_not_compile_are_refused(expression, what):
    with pytest.raises(UnsupportedExpression) as error:
        compile_selector(expression)
    assert what in str(error.value)
    assert f"`{expression}`" in str(error.value) or not expression
    assert "\n" not in str(error.value)


def test_compiled_selectors_are_reused():
    assert compile_selector("device.driver == 'a'") is compile_selector("device.driver == 'a'")
