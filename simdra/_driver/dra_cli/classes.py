"""DeviceClass selectors on published devices, with the test harness's CEL evaluator
(`simdra._driver.testing.allocation.cel`: Kubernetes' DRA CEL environment on cel-python).

Importing the harness loads its whole package (the API stand-in and the official client
with it: see the package docstring), so only `--class`, `top --by class` and `why` pay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from simdra._driver.dra_cli.connect import CommandError
from simdra._driver.dra_cli.inventory import Device

if TYPE_CHECKING:  # the harness loads only for the commands that evaluate selectors
    from simdra._driver.dra_cli.selectors import SharedSelectors

JSON = dict[str, Any]
Matcher = Callable[[Device], bool]


def class_matcher(classes: Iterable[Mapping[str, Any]], name: str) -> Matcher:
    """Whether a device matches the DeviceClass `name`'s selectors (a CEL error or a
    selector that cannot be compiled: CommandError; a device whose evaluation fails
    does not match, as the scheduler would not allocate it)."""
    for device_class in classes:
        if (device_class.get("metadata") or {}).get("name") == name:
            return _matcher(device_class)
    raise CommandError(f"deviceclass {name!r} not found")


def class_matchers(classes: Iterable[Mapping[str, Any]]) -> dict[str, Matcher]:
    """Every DeviceClass by name; one whose selectors cannot be compiled matches nothing.
    Without cel-python it is CommandError, not every device shown as "(no class)"."""
    _require_cel()
    from simdra._driver.dra_cli.selectors import SharedSelectors

    shared = SharedSelectors()  # one for every class: each device is looked at once
    found: dict[str, Matcher] = {}
    for device_class in classes:
        name = str((device_class.get("metadata") or {}).get("name", ""))
        try:
            found[name] = _matcher(device_class, shared)
        except CommandError:
            found[name] = lambda device: False
    return found


def _require_cel() -> None:
    """CommandError naming the extra when the harness's CEL evaluator cannot load."""
    try:
        import simdra._driver.testing.allocation.cel  # noqa: F401
    except ImportError as err:  # cel-python missing: simdra[demo] not installed
        raise CommandError(f"DeviceClass selectors need simdra[demo] installed ({err})") from None


def _matcher(device_class: Mapping[str, Any], shared: SharedSelectors | None = None) -> Matcher:
    _require_cel()
    from simdra._driver.dra_cli.selectors import SharedSelectors
    from simdra._driver.testing.allocation.cel import (
        SelectorError,
        UnsupportedExpression,
        compile_selector,
    )

    name = (device_class.get("metadata") or {}).get("name", "")
    expressions = [str((s.get("cel") or {}).get("expression", ""))
                   for s in (device_class.get("spec") or {}).get("selectors") or []]
    try:
        selectors = [compile_selector(e) for e in expressions]
    except UnsupportedExpression as err:
        raise CommandError(f"deviceclass {name}: {err}") from None
    shared = shared or SharedSelectors()  # 8,000 alike GPUs: one evaluation, not 8,000

    def matches(device: Device) -> bool:
        try:
            return all(shared.matches(s, device) for s in selectors)
        except SelectorError:
            return False

    return matches
