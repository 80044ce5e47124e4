"""The DeviceClasses of the registered device kinds: one per kind, `<kind>.<driver name>`,
selecting the driver's devices whose `type` attribute is the kind's name (and the kind's
extra condition, if it has one).

deploy/base/deviceclasses.yaml and the Helm chart's `deviceClasses.classes` are generated
from here (`simdra deviceclasses`, hack/gen-deviceclasses.sh), as are the classes of the
test harness and `simdra demo`: a kind is declared once, in its `DeviceKind` class.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence

from simdra._driver.devices.kind import DeviceKind
from simdra._driver.devices.kind_registry import KindSet
from simdra._driver.devices.model import JSON

API_VERSION = "resource.k8s.io/v1"
LABELS = {"app.kubernetes.io/name": "simdra"}
# What the kinds' `device_class_condition` writes for the driver name.
DRIVER_PLACEHOLDER = "DRIVER"
YAML_HEADER = ("The classes users name in their claims. Each selects this driver's devices "
               "of one kind (the `type` attribute every simdra device publishes).")


def device_classes(kinds: KindSet, driver_name: str) -> list[JSON]:
    """One resource.k8s.io/v1 DeviceClass per kind in `kinds`, in registration order."""
    return [device_class(kind, driver_name) for kind in kinds.kinds]


def device_class(kind: type[DeviceKind], driver_name: str) -> JSON:
    """The DeviceClass `<kind.name>.<driver_name>` of one kind."""
    return {
        "apiVersion": API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": class_name(kind.name, driver_name), "labels": dict(LABELS)},
        "spec": {"selectors": [{"cel": {"expression": " && ".join(
            selector_clauses(kind, driver_name))}}]},
    }


def class_name(kind_name: str, driver_name: str) -> str:
    """The DeviceClass of the kind called `kind_name`: `<kind_name>.<driver_name>`."""
    return f"{kind_name}.{driver_name}"


def selector_clauses(kind: type[DeviceKind], driver_name: str) -> list[str]:
    """The CEL clauses, joined with &&, of the kind's class selector: the driver, the
    `type` attribute and the kind's own condition (DRIVER replaced by the driver name)."""
    clauses = [f'device.driver == "{driver_name}"',
               f'device.attributes["{driver_name}"].type == "{kind.name}"']
    if kind.device_class_condition:
        clauses.append(kind.device_class_condition.strip().replace(DRIVER_PLACEHOLDER,
                                                                   driver_name))
    return clauses


def helm_classes(kinds: KindSet) -> list[JSON]:
    """The chart's `deviceClasses.classes` entries: `type`, and `also` (the kind's
    condition with DRIVER left for the chart to fill in) when the kind has one."""
    return [{"type": kind.name, **({"also": kind.device_class_condition.strip()}
                                   if kind.device_class_condition else {})}
            for kind in kinds.kinds]


def device_classes_yaml(kinds: KindSet, driver_name: str, command: str) -> str:
    """The DeviceClasses as a YAML stream for people to read: a header naming `command`
    (what generated it), then per kind its description as a comment and its class, the
    selector folded one clause per line."""
    lines = ["# GENERATED from the registered device kinds by", f"#   {command}",
             "# Do not edit: change the kind (its DeviceKind class) and generate it again.",
             *_comment(YAML_HEADER)]
    for index, kind in enumerate(kinds.kinds):
        if index:
            lines.append("---")
        lines += _comment(f"{kind.name}: {kind.description()}" if kind.description()
                          else kind.name)
        lines += _class_yaml(kind, driver_name)
    return "\n".join(lines) + "\n"


def helm_classes_yaml(kinds: KindSet) -> str:
    """`helm_classes` as the YAML list values.yaml holds (`- type: gpu`, `also: '...'`)."""
    lines = []
    for entry in helm_classes(kinds):
        lines.append(f"- type: {entry['type']}")
        if "also" in entry:
            lines.append(f"  also: {_quoted(entry['also'])}")
    return "\n".join(lines) + "\n"


def _class_yaml(kind: type[DeviceKind], driver_name: str) -> list[str]:
    clauses = selector_clauses(kind, driver_name)
    if any("\n" in clause or clause != clause.strip() for clause in clauses):
        # A folded scalar would keep the line breaks: one JSON string (YAML too) instead.
        expression = [f"expression: {json.dumps(' && '.join(clauses))}"]
    else:
        expression = ["expression: >-", *(f"  {c} &&" for c in clauses[:-1]),
                      f"  {clauses[-1]}"]
    labels = [f"    {key}: {value}" for key, value in LABELS.items()]
    return [f"apiVersion: {API_VERSION}", "kind: DeviceClass", "metadata:",
            f"  name: {class_name(kind.name, driver_name)}", "  labels:", *labels,
            "spec:", "  selectors:", "    - cel:", *(f"        {line}" for line in expression)]


def _comment(text: str, width: int = 88) -> Sequence[str]:
    return [f"# {line}" for line in textwrap.wrap(text, width - 2)]


def _quoted(text: str) -> str:
    """A YAML scalar of `text`: single-quoted (CEL's double quotes stay as they are)
    unless a line break needs JSON's escape (single quotes fold it into a space)."""
    return json.dumps(text) if "\n" in text else "'" + text.replace("'", "''") + "'"
