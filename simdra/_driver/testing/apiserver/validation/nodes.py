"""Which nodes a ResourceSlice (or, under `perDeviceNodeSelection`, each device) serves, as
the API server checks it, and core/v1 NodeSelectors.

A slice names its nodes by exactly one of `nodeName`, `nodeSelector` (one term),
`allNodes: true` or `perDeviceNodeSelection: true`; in the last case every device names
its own by exactly one of `nodeName`, `nodeSelector` or `allNodes`, and otherwise no
device may set any of them. A field set to its empty value (`""`, `false`) is an error of
that field, not a choice.
"""

from __future__ import annotations

from typing import Any

from simdra._driver.testing.apiserver.validation import formats
from simdra._driver.testing.apiserver.validation.field import (
    FieldError,
    forbidden,
    invalid,
    required,
)

_UNSET_OR_TRUE = "must be either unset or set to true"
_SLICE_CHOICE = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`"
_DEVICE_CHOICE = (
    "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
    "`perDeviceNodeSelection` is set to true in the ResourceSlice spec"
)
_DEVICE_NOT_ALLOWED = (
    "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` "
    "is set to true in the ResourceSlice spec"
)
_BAD_OPERATOR = "not a valid selector operator"


def slice_nodes_errors(spec: dict[str, Any], path: str) -> list[FieldError]:
    """The slice's node selection: each field, then the one-of."""
    chosen, errors = _choices(spec, path, "must be either unset or set to a non-empty string")
    selector = spec.get("nodeSelector")
    if selector is not None:
        terms = selector.get("nodeSelectorTerms") if isinstance(selector, dict) else None
        if not isinstance(terms, list) or len(terms) != 1:
            # One term only, so that the selectors of slices can be merged.
            errors.append(
                invalid(
                    f"{path}.nodeSelector.nodeSelectorTerms",
                    "<terms>",
                    "must have exactly one node selector term",
                )
            )
    per_device = spec.get("perDeviceNodeSelection")
    if per_device is True:
        chosen.append("`perDeviceNodeSelection`")
    elif per_device is not None:
        errors.append(invalid(f"{path}.perDeviceNodeSelection", per_device, _UNSET_OR_TRUE))
    if not chosen:
        errors.append(required(path, f"{_SLICE_CHOICE} is required"))
    elif len(chosen) > 1:
        shown = "{" + ", ".join(chosen) + "}"
        errors.append(
            invalid(path, shown, f"{_SLICE_CHOICE} is required, but multiple fields are set")
        )
    return errors


def device_nodes_errors(device: dict[str, Any], per_device: bool, path: str) -> list[FieldError]:
    """A device's own node selection; `per_device` is the slice's perDeviceNodeSelection."""
    if not per_device:
        if any(device.get(k) is not None for k in ("nodeName", "nodeSelector", "allNodes")):
            return [invalid(path, None, _DEVICE_NOT_ALLOWED)]
        return []
    chosen, errors = _choices(device, path, "must not be empty")
    if not chosen:
        errors.append(required(path, _DEVICE_CHOICE))
    elif len(chosen) > 1:
        errors.append(invalid(path, "{" + ", ".join(chosen) + "}", _DEVICE_CHOICE))
    return errors


def _choices(obj: dict[str, Any], path: str, empty_name: str) -> tuple[list[str], list[FieldError]]:
    """The fields among nodeName/nodeSelector/allNodes that choose nodes, and their errors."""
    chosen: list[str] = []
    errors: list[FieldError] = []
    name = obj.get("nodeName")
    if name == "":
        errors.append(invalid(f"{path}.nodeName", name, empty_name))
    elif name is not None:
        chosen.append("`nodeName`")
        errors += formats.dns_subdomain(name, f"{path}.nodeName")
    if obj.get("nodeSelector") is not None:
        chosen.append("`nodeSelector`")
        errors += node_selector_errors(obj["nodeSelector"], f"{path}.nodeSelector")
    if obj.get("allNodes") is True:
        chosen.append("`allNodes`")
    elif obj.get("allNodes") is not None:
        errors.append(invalid(f"{path}.allNodes", obj["allNodes"], _UNSET_OR_TRUE))
    return chosen, errors


def node_selector_errors(selector: Any, path: str) -> list[FieldError]:
    """A core/v1 NodeSelector: at least one term; each term's expressions and fields."""
    terms = selector.get("nodeSelectorTerms") if isinstance(selector, dict) else None
    if not terms or not isinstance(terms, list):
        return [required(f"{path}.nodeSelectorTerms", "must have at least one node selector term")]
    errors: list[FieldError] = []
    for i, term in enumerate(terms):
        term = term if isinstance(term, dict) else {}
        where = f"{path}.nodeSelectorTerms[{i}]"
        for j, req in enumerate(term.get("matchExpressions") or []):
            errors += _expression_errors(req, f"{where}.matchExpressions[{j}]")
        for j, req in enumerate(term.get("matchFields") or []):
            errors += _field_errors(req, f"{where}.matchFields[{j}]")
    return errors


def _expression_errors(req: dict[str, Any], path: str) -> list[FieldError]:
    operator, values = req.get("operator"), req.get("values") or []
    errors: list[FieldError] = []
    if operator in ("In", "NotIn") and not values:
        errors.append(
            required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'")
        )
    elif operator in ("Exists", "DoesNotExist") and values:
        errors.append(
            forbidden(
                f"{path}.values",
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )
        )
    elif operator in ("Gt", "Lt") and len(values) != 1:
        errors.append(
            required(
                f"{path}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'"
            )
        )
    elif operator not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
        errors.append(invalid(f"{path}.operator", operator, _BAD_OPERATOR))
    errors += formats.label_name(req.get("key", ""), f"{path}.key")
    for i, value in enumerate(values):
        errors += formats.label_value(value, f"{path}.values[{i}]")
    return errors


def _field_errors(req: dict[str, Any], path: str) -> list[FieldError]:
    operator, values = req.get("operator"), req.get("values") or []
    errors: list[FieldError] = []
    if operator not in ("In", "NotIn"):
        errors.append(invalid(f"{path}.operator", operator, _BAD_OPERATOR))
    elif len(values) != 1:
        errors.append(
            required(
                f"{path}.values",
                "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
            )
        )
    if req.get("key") != "metadata.name":
        errors.append(invalid(f"{path}.key", req.get("key"), "not a valid field selector key"))
        return errors
    for i, value in enumerate(values):
        errors += formats.dns_subdomain(value, f"{path}.values[{i}]")
    return errors
