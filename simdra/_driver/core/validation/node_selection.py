"""Rules for node selection (pure, api-facts 4.2/4.3): the slice's one-of nodeName/nodeSelector/
allNodes/perDeviceNodeSelection, a device's own one-of under perDeviceNodeSelection, and
core/v1 NodeSelectors."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from simdra._driver.core.validation.errors import (
    FieldError,
    forbidden,
    invalid,
    not_supported,
    required,
)
from simdra._driver.core.validation.inputs import as_list, as_map
from simdra._driver.core.validation.names import dns_subdomain_errors, label_name_errors

NODE_SELECTOR_OPERATORS = ("DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn")

_SLICE_FIELDS = ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
_DEVICE_FIELDS = ("nodeName", "nodeSelector", "allNodes")
_SLICE_ONE_OF = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`"
_DEVICE_ONE_OF = (
    "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
    "`perDeviceNodeSelection` is set to true in the ResourceSlice spec"
)
_DEVICE_FIELDS_NOT_ALLOWED = (
    "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` "
    "is set to true in the ResourceSlice spec"
)


# --- the slice ------------------------------------------------------------------------


def slice_node_selection_errors(spec: Mapping[str, Any], path: str) -> list[FieldError]:
    """Errors of a ResourceSliceSpec's node selection: its fields and the one-of rule."""
    errors = _slice_node_name_errors(spec.get("nodeName"), f"{path}.nodeName")
    if spec.get("nodeSelector") is not None:
        errors += _slice_node_selector_errors(spec["nodeSelector"], f"{path}.nodeSelector")
    for field_name in ("allNodes", "perDeviceNodeSelection"):
        errors += _true_or_unset_errors(spec.get(field_name), f"{path}.{field_name}")
    chosen = _chosen(spec, _SLICE_FIELDS)
    if not chosen:
        errors.append(required(path, f"{_SLICE_ONE_OF} is required"))
    elif len(chosen) > 1:
        errors.append(
            invalid(
                path,
                "{" + ", ".join(chosen) + "}",
                f"{_SLICE_ONE_OF} is required, but multiple fields are set",
            )
        )
    return errors


def _slice_node_name_errors(node_name: Any, path: str) -> list[FieldError]:
    if node_name is None:
        return []
    if node_name == "":
        return [invalid(path, node_name, "must be either unset or set to a non-empty string")]
    return dns_subdomain_errors(node_name, path)


def _slice_node_selector_errors(selector: Any, path: str) -> list[FieldError]:
    # A slice's selector is narrower than a general one: exactly one term.
    errors = node_selector_errors(selector, path)
    terms = as_list(as_map(selector).get("nodeSelectorTerms"))
    if len(terms) != 1:
        errors.append(
            invalid(
                f"{path}.nodeSelectorTerms", len(terms), "must have exactly one node selector term"
            )
        )
    return errors


# --- a device under perDeviceNodeSelection --------------------------------------------


def device_node_selection_errors(
    device: Mapping[str, Any], per_device: bool, path: str
) -> list[FieldError]:
    """Errors of a device's own node selection; `per_device` is the slice's
    perDeviceNodeSelection (true: exactly one field required, false: none allowed)."""
    if not per_device:
        if any(device.get(f) is not None for f in _DEVICE_FIELDS):
            return [invalid(path, None, _DEVICE_FIELDS_NOT_ALLOWED)]
        return []
    errors = _device_node_name_errors(device.get("nodeName"), f"{path}.nodeName")
    if device.get("nodeSelector") is not None:
        errors += node_selector_errors(device["nodeSelector"], f"{path}.nodeSelector")
    errors += _true_or_unset_errors(device.get("allNodes"), f"{path}.allNodes")
    chosen = _chosen(device, _DEVICE_FIELDS)
    if not chosen:
        errors.append(required(path, _DEVICE_ONE_OF))
    elif len(chosen) > 1:
        errors.append(invalid(path, "{" + ", ".join(chosen) + "}", _DEVICE_ONE_OF))
    return errors


def _device_node_name_errors(node_name: Any, path: str) -> list[FieldError]:
    if node_name is None:
        return []
    if node_name == "":
        return [invalid(path, "", "must not be empty")]
    return dns_subdomain_errors(node_name, path)


# --- shared by both -------------------------------------------------------------------


def _true_or_unset_errors(value: Any, path: str) -> list[FieldError]:
    if value is True or value is None:
        return []
    return [invalid(path, value, "must be either unset or set to true")]


def _chosen(obj: Mapping[str, Any], fields: tuple[str, ...]) -> list[str]:
    """The node selection fields that make a choice, quoted as the one-of messages do."""
    return [f"`{name}`" for name in fields if _makes_choice(name, obj.get(name))]


def _makes_choice(name: str, value: Any) -> bool:
    # An empty nodeName and a false/malformed flag are errors, not choices.
    if name == "nodeName":
        return value is not None and value != ""
    if name == "nodeSelector":
        return value is not None
    return value is True


# --- core/v1 NodeSelector -------------------------------------------------------------


def node_selector_errors(selector: Any, path: str) -> list[FieldError]:
    """Errors of a core/v1 NodeSelector (terms, operators, values)."""
    terms = as_map(selector).get("nodeSelectorTerms")
    if not as_list(terms):
        return [required(f"{path}.nodeSelectorTerms", "must have at least one node selector term")]
    errors = []
    for i, term in enumerate(as_list(terms)):
        term_path = f"{path}.nodeSelectorTerms[{i}]"
        for j, req in enumerate(as_list(as_map(term).get("matchExpressions"))):
            errors += _requirement_errors(as_map(req), f"{term_path}.matchExpressions[{j}]")
        for j, req in enumerate(as_list(as_map(term).get("matchFields"))):
            errors += _field_requirement_errors(as_map(req), f"{term_path}.matchFields[{j}]")
    return errors


def _requirement_errors(req: Mapping[str, Any], path: str) -> list[FieldError]:
    op, values = req.get("operator"), as_list(req.get("values"))
    errors = label_name_errors(req.get("key"), f"{path}.key")
    if op in ("In", "NotIn") and not values:
        errors.append(
            required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'")
        )
    elif op in ("Exists", "DoesNotExist") and values:
        errors.append(
            forbidden(
                f"{path}.values",
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )
        )
    elif op in ("Gt", "Lt") and (len(values) != 1 or not re.fullmatch(r"-?\d+", str(values[0]))):
        errors.append(
            required(
                f"{path}.values",
                "must be specified single integer value when `operator` is 'Lt' or 'Gt'",
            )
        )
    elif op not in NODE_SELECTOR_OPERATORS:
        errors.append(not_supported(f"{path}.operator", op, NODE_SELECTOR_OPERATORS))
    return errors


def _field_requirement_errors(req: Mapping[str, Any], path: str) -> list[FieldError]:
    errors = []
    if req.get("key") != "metadata.name":
        errors.append(not_supported(f"{path}.key", req.get("key"), ["metadata.name"]))
    if req.get("operator") not in ("In", "NotIn"):
        errors.append(not_supported(f"{path}.operator", req.get("operator"), ["In", "NotIn"]))
    values = as_list(req.get("values"))
    if len(values) != 1:
        errors.append(
            required(
                f"{path}.values",
                "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
            )
        )
    # The values of a metadata.name selector are node names.
    for i, value in enumerate(values):
        errors += dns_subdomain_errors(value, f"{path}.values[{i}]")
    return errors
