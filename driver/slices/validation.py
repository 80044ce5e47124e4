"""Semantic validation of resource.k8s.io/v1 ResourceSlices, as the API server does it.

The OpenAPI schema only checks shapes; the real API server adds the rules of
`pkg/apis/resource/validation` (facts 4.2-4.8): one-of node selection, name formats,
per-device and per-slice limits, counter sets, taints and consumable-capacity request
policies. These pure functions reproduce those rules so that the API stand-in rejects
what a real server rejects, and so that the inventory loader and the publisher can check
devices locally before any write.

Field paths and messages follow the API server's `field.Error` style, e.g.
``spec.devices[3].capacity[bandwidth].requestPolicy.default: Invalid value: "3": ...``.
Inputs are plain JSON dicts that may be malformed; nothing here raises on bad input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from driver.devices.quantity import QuantityError, ceil_int, format_quantity, parse_quantity

# Limits of resource.k8s.io/v1 as of Kubernetes 1.35 (facts 4.6).
MAX_DEVICES_PER_SLICE = 128
MAX_DEVICES_WITH_ADVANCED_FEATURES = 64  # any device with taints, counters or list attributes
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_ATTRIBUTE_VALUES = 48
MAX_TAINTS_PER_DEVICE = 16
MAX_COUNTER_SETS = 8
MAX_COUNTERS_PER_SET = 32
MAX_CONSUMES_COUNTERS = 2
MAX_BINDING_CONDITIONS = 4
MAX_VALID_VALUES = 10
MAX_ATTRIBUTE_VALUE_LENGTH = 64
MAX_DRIVER_NAME_LENGTH = 63
MAX_POOL_NAME_LENGTH = 253
MAX_C_IDENTIFIER_LENGTH = 32
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")
NODE_SELECTOR_OPERATORS = ("DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NUM = r"(0|[1-9]\d*)"
_PRE = r"(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
_BUILD = r"[0-9a-zA-Z-]+"
_SEMVER = re.compile(rf"^{_NUM}\.{_NUM}\.{_NUM}(-{_PRE}(\.{_PRE})*)?(\+{_BUILD}(\.{_BUILD})*)?$")

_DNS_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
_C_IDENTIFIER_MSG = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string "
    "of alphanumeric characters or '_'"
)
_LABEL_NAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character"
)


@dataclass(frozen=True)
class FieldError:
    """One validation failure: where (API field path) and why (API server wording).

    `reason` is the StatusCause reason the API server would send (FieldValueInvalid,
    FieldValueRequired, FieldValueDuplicate, FieldValueTooMany, ...).
    """

    field: str
    message: str
    reason: str = "FieldValueInvalid"

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


# --- error constructors, worded like k8s.io/apimachinery field.Error -------------------


def _show(value: Any) -> str:
    if isinstance(value, Fraction):
        return json.dumps(_quantity_text(value))
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return json.dumps(str(value))


def invalid(path: str, value: Any, detail: str) -> FieldError:
    """An `Invalid value` error."""
    return FieldError(path, f"Invalid value: {_show(value)}: {detail}", "FieldValueInvalid")


def required(path: str, detail: str = "") -> FieldError:
    """A `Required value` error."""
    text = f"Required value: {detail}" if detail else "Required value"
    return FieldError(path, text, "FieldValueRequired")


def duplicate(path: str, value: Any) -> FieldError:
    """A `Duplicate value` error."""
    return FieldError(path, f"Duplicate value: {_show(value)}", "FieldValueDuplicate")


def too_many(path: str, actual: int, limit: int) -> FieldError:
    """A `Too many` error for a list or map over its size limit."""
    return FieldError(
        path, f"Too many: {actual}: must have at most {limit} items", "FieldValueTooMany"
    )


def too_long(path: str, limit: int) -> FieldError:
    """A `Too long` error for a string over its length limit."""
    return FieldError(path, f"Too long: may not be more than {limit} bytes", "FieldValueTooLong")


def forbidden(path: str, detail: str) -> FieldError:
    """A `Forbidden` error."""
    return FieldError(path, f"Forbidden: {detail}", "FieldValueForbidden")


def not_supported(path: str, value: Any, supported: Iterable[str]) -> FieldError:
    """An `Unsupported value` error naming the allowed values."""
    allowed = ", ".join(json.dumps(s) for s in supported)
    return FieldError(
        path,
        f"Unsupported value: {_show(value)}: supported values: {allowed}",
        "FieldValueNotSupported",
    )


# --- name formats -------------------------------------------------------------------


def dns_label_errors(value: Any, path: str) -> list[FieldError]:
    """Errors for a name that must be a DNS label (device, counter set, counter names)."""
    if not isinstance(value, str) or value == "":
        return [required(path)]
    errors = []
    if len(value) > 63:
        errors.append(invalid(path, value, "must be no more than 63 characters"))
    if not _DNS_LABEL.match(value):
        errors.append(invalid(path, value, _DNS_LABEL_MSG))
    return errors


def dns_subdomain_errors(value: Any, path: str) -> list[FieldError]:
    """Errors for a name that must be a DNS subdomain (object names, node names)."""
    if not isinstance(value, str) or value == "":
        return [required(path)]
    errors = []
    if len(value) > 253:
        errors.append(invalid(path, value, "must be no more than 253 characters"))
    if not _DNS_SUBDOMAIN.match(value):
        errors.append(invalid(path, value, _DNS_SUBDOMAIN_MSG))
    return errors


def driver_name_errors(value: Any, path: str) -> list[FieldError]:
    """Errors for a driver name: ≤63 chars, a DNS subdomain once lower-cased."""
    if not isinstance(value, str) or value == "":
        return [required(path)]
    errors = []
    if len(value) > MAX_DRIVER_NAME_LENGTH:
        errors.append(too_long(path, MAX_DRIVER_NAME_LENGTH))
    if not _DNS_SUBDOMAIN.match(value.lower()):
        errors.append(invalid(path, value, _DNS_SUBDOMAIN_MSG))
    return errors


def pool_name_errors(value: Any, path: str) -> list[FieldError]:
    """Errors for a pool name: ≤253 chars, `/`-separated DNS subdomains."""
    if not isinstance(value, str) or value == "":
        return [required(path)]
    errors = []
    if len(value) > MAX_POOL_NAME_LENGTH:
        errors.append(too_long(path, MAX_POOL_NAME_LENGTH))
    for part in value.split("/"):
        # An empty part ("a//b") is a malformed name, not a missing one.
        errors.extend(
            dns_subdomain_errors(part, path) if part else [invalid(path, value, _DNS_SUBDOMAIN_MSG)]
        )
    return errors


def _c_identifier_errors(value: str, path: str) -> list[FieldError]:
    errors = []
    if len(value) > MAX_C_IDENTIFIER_LENGTH:
        errors.append(too_long(path, MAX_C_IDENTIFIER_LENGTH))
    if not _C_IDENTIFIER.match(value):
        errors.append(invalid(path, value, _C_IDENTIFIER_MSG))
    return errors


def qualified_name_errors(name: Any, path: str) -> list[FieldError]:
    """Errors for an attribute/capacity name: `<C identifier>` or `<domain>/<C identifier>`.

    As in the API server, the error is reported on the map's path, not on the key.
    """
    if not isinstance(name, str):
        return [invalid(path, name, "must be a string")]
    parts = name.split("/")
    if len(parts) == 1:
        return _c_identifier_errors(name, path)
    errors = []
    domain, ident = parts[0], parts[-1]
    if len(parts) > 2:
        errors.append(invalid(path, name, "must not contain more than one slash"))
    if domain == "":
        errors.append(invalid(path, "", "the domain must not be empty"))
    else:
        errors.extend(driver_name_errors(domain, path))
    if ident == "":
        errors.append(invalid(path, "", "the name must not be empty"))
    else:
        errors.extend(_c_identifier_errors(ident, path))
    return errors


def label_name_errors(value: Any, path: str) -> list[FieldError]:
    """Errors for a label key / condition type: `[prefix/]name`, prefix a DNS subdomain."""
    if not isinstance(value, str) or value == "":
        return [required(path)]
    prefix, slash, name = value.partition("/") if "/" in value else ("", "", value)
    errors = []
    if slash and prefix == "":
        errors.append(invalid(path, value, "prefix part must be non-empty"))
    elif prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        errors.append(invalid(path, value, f"prefix part {_DNS_SUBDOMAIN_MSG}"))
    if name == "" or len(name) > 63 or not _LABEL_NAME.match(name):
        errors.append(invalid(path, value, _LABEL_NAME_MSG + " and be at most 63 characters"))
    return errors


def _label_value_errors(value: Any, path: str) -> list[FieldError]:
    if not isinstance(value, str):
        return [invalid(path, value, "must be a string")]
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return [invalid(path, value, _LABEL_VALUE_MSG + " and be at most 63 characters")]
    return []


# --- helpers for malformed input ------------------------------------------------------


def _quantity(value: Any) -> Fraction | None:
    """The exact value of a quantity, or None when it does not parse."""
    try:
        if isinstance(value, float):
            value = repr(value)
        return parse_quantity(value)
    except (QuantityError, ValueError, ZeroDivisionError):
        return None


def _quantity_text(value: Fraction) -> str:
    try:
        return format_quantity(value)
    except QuantityError:
        return str(value)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _is_map(value: Any) -> bool:
    # Fast path for dicts: an ABC isinstance check on every node costs a third of the time.
    return type(value) is dict or isinstance(value, Mapping)


def _map(value: Any) -> Mapping[str, Any]:
    return value if _is_map(value) else {}


def _is_set(value: Any) -> bool:
    """True for a JSON field that is present (not null); `[]` and `{}` count as present."""
    return value is not None


# --- limits -------------------------------------------------------------------------


def uses_advanced_features(device: Mapping[str, Any]) -> bool:
    """True when the device lowers its slice's limit to 64 devices (taints, counters, lists)."""
    if _list(device.get("taints")) or _list(device.get("consumesCounters")):
        return True
    return any(
        any(_is_set(_map(attr).get(k)) for k in ("ints", "bools", "strings", "versions"))
        for attr in _map(device.get("attributes")).values()
    )


def device_limit(devices: Iterable[Mapping[str, Any]]) -> int:
    """How many devices one slice may hold, given the devices that will go in it."""
    if any(uses_advanced_features(_map(d)) for d in devices):
        return MAX_DEVICES_WITH_ADVANCED_FEATURES
    return MAX_DEVICES_PER_SLICE


# --- slice ----------------------------------------------------------------------------


def validate_slice(slice_obj: Mapping[str, Any]) -> list[FieldError]:
    """All semantic errors of a ResourceSlice object, in the API server's order."""
    if not _is_map(slice_obj):
        return [invalid("<root>", type(slice_obj).__name__, "must be a JSON object")]
    errors = _metadata_errors(_map(slice_obj.get("metadata")))
    spec = slice_obj.get("spec")
    if not _is_map(spec):
        return [*errors, required("spec")]
    return errors + validate_slice_spec(spec, "spec")


def validate_slice_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """Errors of an update: the new object's errors plus changes to immutable fields."""
    return validate_slice(new) + immutable_field_errors(new, old)


def immutable_field_errors(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """Changes to the fields a ResourceSlice keeps for life: driver, pool name, node name."""
    new_spec, old_spec = _map(new.get("spec")), _map(old.get("spec"))
    immutable = (
        (
            "spec.pool.name",
            _map(new_spec.get("pool")).get("name"),
            _map(old_spec.get("pool")).get("name"),
        ),
        ("spec.driver", new_spec.get("driver"), old_spec.get("driver")),
        ("spec.nodeName", new_spec.get("nodeName"), old_spec.get("nodeName")),
    )
    return [
        invalid(path, now, "field is immutable") for path, now, before in immutable if now != before
    ]


def _metadata_errors(meta: Mapping[str, Any]) -> list[FieldError]:
    name = meta.get("name")
    if not name:
        if meta.get("generateName"):
            return []
        return [required("metadata.name", "name or generateName is required")]
    return dns_subdomain_errors(name, "metadata.name")


def validate_slice_spec(spec: Mapping[str, Any], path: str = "spec") -> list[FieldError]:
    """Errors of a ResourceSliceSpec (facts 4.2, 4.3, 4.6)."""
    errors = driver_name_errors(spec.get("driver"), f"{path}.driver")
    errors += _pool_errors(spec.get("pool"), f"{path}.pool")
    errors += _node_selection_errors(spec, path)
    if _is_set(spec.get("sharedCounters")) and _is_set(spec.get("devices")):
        errors.append(invalid(path, "", "only one of `sharedCounters` or `devices` is allowed"))
    errors += _devices_errors(spec, f"{path}.devices")
    errors += _counter_sets_errors(spec.get("sharedCounters"), f"{path}.sharedCounters")
    return errors


def _pool_errors(pool: Any, path: str) -> list[FieldError]:
    if not _is_map(pool):
        return [required(path)]
    errors = pool_name_errors(pool.get("name"), f"{path}.name")
    count = pool.get("resourceSliceCount")
    if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
        errors.append(invalid(f"{path}.resourceSliceCount", count, "must be greater than zero"))
    generation = pool.get("generation", 0)
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 0:
        errors.append(
            invalid(f"{path}.generation", generation, "must be greater than or equal to zero")
        )
    return errors


def _node_selection_errors(spec: Mapping[str, Any], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    chosen: list[str] = []
    node_name = spec.get("nodeName")
    if node_name is not None:
        if node_name != "":
            chosen.append("`nodeName`")
            errors += dns_subdomain_errors(node_name, f"{path}.nodeName")
        else:
            errors.append(
                invalid(
                    f"{path}.nodeName",
                    node_name,
                    "must be either unset or set to a non-empty string",
                )
            )
    if spec.get("nodeSelector") is not None:
        chosen.append("`nodeSelector`")
        errors += node_selector_errors(spec["nodeSelector"], f"{path}.nodeSelector")
        terms = _list(_map(spec["nodeSelector"]).get("nodeSelectorTerms"))
        if len(terms) != 1:
            errors.append(
                invalid(
                    f"{path}.nodeSelector.nodeSelectorTerms",
                    len(terms),
                    "must have exactly one node selector term",
                )
            )
    for field_name in ("allNodes", "perDeviceNodeSelection"):
        value = spec.get(field_name)
        if value is True:
            chosen.append(f"`{field_name}`")
        elif value is not None:
            errors.append(
                invalid(f"{path}.{field_name}", value, "must be either unset or set to true")
            )
    one_of = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`"
    if not chosen:
        errors.append(required(path, f"{one_of} is required"))
    elif len(chosen) > 1:
        errors.append(
            invalid(
                path,
                "{" + ", ".join(chosen) + "}",
                f"{one_of} is required, but multiple fields are set",
            )
        )
    return errors


def node_selector_errors(selector: Any, path: str) -> list[FieldError]:
    """Errors of a core/v1 NodeSelector (terms, operators, values)."""
    terms = _map(selector).get("nodeSelectorTerms")
    if not _list(terms):
        return [required(f"{path}.nodeSelectorTerms", "must have at least one node selector term")]
    errors = []
    for i, term in enumerate(_list(terms)):
        term_path = f"{path}.nodeSelectorTerms[{i}]"
        for j, req in enumerate(_list(_map(term).get("matchExpressions"))):
            errors += _requirement_errors(_map(req), f"{term_path}.matchExpressions[{j}]")
        for j, req in enumerate(_list(_map(term).get("matchFields"))):
            errors += _field_requirement_errors(_map(req), f"{term_path}.matchFields[{j}]")
    return errors


def _requirement_errors(req: Mapping[str, Any], path: str) -> list[FieldError]:
    op, values = req.get("operator"), _list(req.get("values"))
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
    if len(_list(req.get("values"))) != 1:
        errors.append(
            required(
                f"{path}.values",
                "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
            )
        )
    return errors


def _devices_errors(spec: Mapping[str, Any], path: str) -> list[FieldError]:
    devices = spec.get("devices")
    if devices is None:
        return []
    if not isinstance(devices, list):
        return [invalid(path, type(devices).__name__, "must be a list")]
    limit = device_limit(devices)
    if len(devices) > limit:
        # The API server stops here: checking each of too many devices is wasted work.
        return [too_many(path, len(devices), limit)]
    per_device = spec.get("perDeviceNodeSelection") is True
    errors: list[FieldError] = []
    for i, device in enumerate(devices):
        errors += validate_device(device, f"{path}[{i}]", per_device_node_selection=per_device)
    errors += _duplicates(devices, lambda d: _map(d).get("name"), path)
    return errors


def _duplicates(items: list[Any], key: Callable[[Any], Any], path: str) -> list[FieldError]:
    seen: set[Any] = set()
    errors = []
    for i, item in enumerate(items):
        value = key(item)
        try:
            hash(value)
        except TypeError:
            continue
        if value in seen:
            errors.append(duplicate(f"{path}[{i}]", value))
        seen.add(value)
    return errors


def _counter_sets_errors(counter_sets: Any, path: str) -> list[FieldError]:
    if counter_sets is None:
        return []
    if not isinstance(counter_sets, list):
        return [invalid(path, type(counter_sets).__name__, "must be a list")]
    if len(counter_sets) > MAX_COUNTER_SETS:
        return [too_many(path, len(counter_sets), MAX_COUNTER_SETS)]
    errors: list[FieldError] = []
    for i, counter_set in enumerate(counter_sets):
        errors += validate_counter_set(_map(counter_set), f"{path}[{i}]")
    errors += _duplicates(counter_sets, lambda s: _map(s).get("name"), path)
    return errors


def validate_counter_set(counter_set: Mapping[str, Any], path: str) -> list[FieldError]:
    """Errors of one CounterSet of `spec.sharedCounters` (name, 1..32 counters)."""
    errors = dns_label_errors(counter_set.get("name"), f"{path}.name")
    return errors + _counters_errors(counter_set.get("counters"), f"{path}.counters")


def _counters_errors(counters: Any, path: str) -> list[FieldError]:
    if not _is_map(counters) or not counters:
        return [required(path)]
    if len(counters) > MAX_COUNTERS_PER_SET:
        return [too_many(path, len(counters), MAX_COUNTERS_PER_SET)]
    errors = []
    for name, counter in counters.items():
        errors += dns_label_errors(name, path)
        if _quantity(_map(counter).get("value")) is None:
            errors.append(
                invalid(
                    f"{path}[{name}].value", _map(counter).get("value"), "must be a valid quantity"
                )
            )
    return errors


# --- device ---------------------------------------------------------------------------


def validate_device(
    device: Mapping[str, Any], path: str, per_device_node_selection: bool = False
) -> list[FieldError]:
    """All errors of one `spec.devices[]` entry; `path` is its field path, e.g. `spec.devices[3]`.

    `per_device_node_selection` is the slice's `spec.perDeviceNodeSelection`: when true the
    device must pick exactly one of nodeName/nodeSelector/allNodes, otherwise none.
    """
    if not _is_map(device):
        return [invalid(path, type(device).__name__, "must be a JSON object")]
    errors = dns_label_errors(device.get("name"), f"{path}.name")
    attributes, capacity = _map(device.get("attributes")), _map(device.get("capacity"))
    if len(attributes) + len(capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
        errors.append(
            invalid(
                path,
                len(attributes) + len(capacity),
                "the total number of attributes and capacities must not exceed "
                f"{MAX_ATTRIBUTES_AND_CAPACITIES}",
            )
        )
    values = _attribute_value_count(attributes)
    if values > MAX_ATTRIBUTE_VALUES:
        errors.append(
            invalid(
                path,
                values,
                f"the total number of attribute values must not exceed {MAX_ATTRIBUTE_VALUES}",
            )
        )
    for name, attribute in attributes.items():
        errors += qualified_name_errors(name, f"{path}.attributes")
        errors += _attribute_errors(attribute, f"{path}.attributes[{name}]")
    multi = device.get("allowMultipleAllocations") is True
    for name, entry in capacity.items():
        errors += qualified_name_errors(name, f"{path}.capacity")
        errors += _capacity_errors(entry, multi, f"{path}.capacity[{name}]")
    errors += _taints_errors(device.get("taints"), f"{path}.taints")
    errors += _consumption_errors(device.get("consumesCounters"), f"{path}.consumesCounters")
    errors += _device_node_errors(device, per_device_node_selection, path)
    errors += _binding_errors(device, path)
    return errors


def _attribute_value_count(attributes: Mapping[str, Any]) -> int:
    count = 0
    for attribute in attributes.values():
        lists = [_map(attribute).get(k) for k in ("ints", "bools", "strings", "versions")]
        items = sum(len(v) for v in lists if isinstance(v, list))
        count += items or 1
    return count


def _attribute_errors(attribute: Any, path: str) -> list[FieldError]:
    attribute = _map(attribute)
    errors: list[FieldError] = []
    present = [
        k
        for k in ("int", "bool", "string", "version", "ints", "bools", "strings", "versions")
        if attribute.get(k) is not None
    ]
    if isinstance(attribute.get("string"), str):
        errors += _string_value_errors(attribute["string"], f"{path}.string")
    if isinstance(attribute.get("version"), str):
        errors += _version_value_errors(attribute["version"], f"{path}.version")
    for key in ("ints", "bools", "strings", "versions"):
        items = attribute.get(key)
        if items is None:
            continue
        if not items:
            errors.append(invalid(f"{path}.{key}", items, "must not be empty if specified"))
        for i, item in enumerate(_list(items)):
            if key == "strings" and isinstance(item, str):
                errors += _string_value_errors(item, f"{path}.{key}[{i}]")
            if key == "versions" and isinstance(item, str):
                errors += _version_value_errors(item, f"{path}.{key}[{i}]")
    if len(present) != 1:
        errors.append(
            invalid(path, dict(attribute) if present else "", "exactly one value must be specified")
        )
    return errors


def _string_value_errors(value: str, path: str) -> list[FieldError]:
    if len(value) > MAX_ATTRIBUTE_VALUE_LENGTH:
        return [too_long(path, MAX_ATTRIBUTE_VALUE_LENGTH)]
    return []


def _version_value_errors(value: str, path: str) -> list[FieldError]:
    errors = []
    if not _SEMVER.match(value):
        errors.append(
            invalid(path, value, "must be a string compatible with semver.org spec 2.0.0")
        )
    if len(value) > MAX_ATTRIBUTE_VALUE_LENGTH:
        errors.append(too_long(path, MAX_ATTRIBUTE_VALUE_LENGTH))
    return errors


def _capacity_errors(entry: Any, multi: bool, path: str) -> list[FieldError]:
    entry = _map(entry)
    value = _quantity(entry.get("value"))
    errors = []
    if value is None:
        errors.append(invalid(f"{path}.value", entry.get("value"), "must be a valid quantity"))
    policy = entry.get("requestPolicy")
    if policy is None:
        return errors
    if not multi:
        return [
            *errors,
            forbidden(f"{path}.requestPolicy", "allowMultipleAllocations must be true"),
        ]
    if value is None or not _is_map(policy):
        return errors
    return errors + request_policy_errors(value, policy, f"{path}.requestPolicy")


def request_policy_errors(
    capacity: Fraction, policy: Mapping[str, Any], path: str
) -> list[FieldError]:
    """Errors of a CapacityRequestPolicy against its capacity value (facts 4.8)."""
    valid_values, valid_range = policy.get("validValues"), policy.get("validRange")
    if valid_values and valid_range is not None:
        return [
            forbidden(
                path,
                "exactly one policy can be specified, cannot specify "
                '"validValues" and "validRange" at the same time',
            )
        ]
    if not valid_values and valid_range is None:
        return []
    kind = "validValues" if valid_values else "validRange"
    if policy.get("default") is None:
        return [required(f"{path}.default", f"required when {kind} is defined")]
    default = _quantity(policy["default"])
    if default is None:
        return [invalid(f"{path}.default", policy["default"], "must be a valid quantity")]
    if valid_values:
        return _valid_values_errors(default, capacity, valid_values, f"{path}.validValues")
    return _valid_range_errors(default, capacity, _map(valid_range), f"{path}.validRange")


def _valid_values_errors(
    default: Fraction, capacity: Fraction, raw: Any, path: str
) -> list[FieldError]:
    if not isinstance(raw, list):
        return [invalid(path, raw, "must be a list")]
    if len(raw) > MAX_VALID_VALUES:
        return [too_many(path, len(raw), MAX_VALID_VALUES)]
    options: list[Fraction] = []
    errors: list[FieldError] = []
    for i, text in enumerate(raw):
        option = _quantity(text)
        if option is None:
            errors.append(invalid(f"{path}[{i}]", text, "must be a valid quantity"))
            continue
        if options and option < options[-1]:
            errors.append(invalid(f"{path}[{i}]", text, "values must be sorted in ascending order"))
        options.append(option)
    seen: set[int] = set()
    for i, option in enumerate(options):
        if option > capacity:
            errors.append(
                invalid(
                    f"{path}[{i}]",
                    option,
                    f"option is larger than capacity value: {_quantity_text(capacity)}",
                )
            )
        # Duplicates are detected on the integer value, as the API server does.
        if ceil_int(option) in seen:
            errors.append(duplicate(f"{path}[{i}]", raw[i]))
        seen.add(ceil_int(option))
    if default not in options:
        errors.append(
            invalid(path, default, "default value is not valid according to the requestPolicy")
        )
    return errors


def _valid_range_errors(
    default: Fraction, capacity: Fraction, valid_range: Mapping[str, Any], path: str
) -> list[FieldError]:
    if valid_range.get("min") is None:
        return [required(f"{path}.min", "required when validRange is defined")]
    bounds: dict[str, Fraction] = {}
    errors: list[FieldError] = []
    for key in ("min", "max", "step"):
        if valid_range.get(key) is None:
            continue
        parsed = _quantity(valid_range[key])
        if parsed is None:
            errors.append(invalid(f"{path}.{key}", valid_range[key], "must be a valid quantity"))
        else:
            bounds[key] = parsed
    if errors:
        return errors
    low, high, step = bounds["min"], bounds.get("max"), bounds.get("step")
    cap = _quantity_text(capacity)
    if low > capacity:
        errors.append(invalid(f"{path}.min", low, f"min is larger than capacity value: {cap}"))
    if default < low:
        errors.append(
            invalid(f"{path}.default", default, f"default is less than min: {_quantity_text(low)}")
        )
    if high is not None:
        if low > high:
            errors.append(
                invalid(f"{path}.max", low, f"min is larger than max: {_quantity_text(high)}")
            )
        if high > capacity:
            errors.append(invalid(f"{path}.max", high, f"max is larger than capacity value: {cap}"))
        if default > high:
            errors.append(
                invalid(
                    f"{path}.default", default, f"default is more than max: {_quantity_text(high)}"
                )
            )
    if step is not None:
        errors += _step_errors(default, capacity, low, high, step, f"{path}.step")
    return errors


def _step_errors(
    default: Fraction,
    capacity: Fraction,
    low: Fraction,
    high: Fraction | None,
    step: Fraction,
    path: str,
) -> list[FieldError]:
    if step <= 0:
        return [invalid(path, step, "must be greater than zero")]
    errors = []
    if low + step > capacity:
        errors.append(
            invalid(
                path,
                step,
                f"one step {_quantity_text(low + step)} is larger "
                f"than capacity value: {_quantity_text(capacity)}",
            )
        )
    # Before DRAFractionalCapacityRange the server compares integer values (rounded up).
    int_step, int_min = ceil_int(step), ceil_int(low)
    for value in (default, high):
        if value is not None and (ceil_int(value) - int_min) % int_step != 0:
            errors.append(
                invalid(
                    path,
                    value,
                    f"value is not a multiple of a given step "
                    f"({_quantity_text(step)}) from "
                    f"({_quantity_text(low)})",
                )
            )
    return errors


def _taints_errors(taints: Any, path: str) -> list[FieldError]:
    if taints is None:
        return []
    if not isinstance(taints, list):
        return [invalid(path, type(taints).__name__, "must be a list")]
    if len(taints) > MAX_TAINTS_PER_DEVICE:
        return [too_many(path, len(taints), MAX_TAINTS_PER_DEVICE)]
    errors: list[FieldError] = []
    for i, taint in enumerate(taints):
        taint = _map(taint)
        errors += label_name_errors(taint.get("key"), f"{path}[{i}].key")
        if taint.get("value"):
            errors += _label_value_errors(taint["value"], f"{path}[{i}].value")
        effect = taint.get("effect")
        if not effect:
            errors.append(required(f"{path}[{i}].effect"))
        elif effect not in TAINT_EFFECTS:
            errors.append(not_supported(f"{path}[{i}].effect", effect, TAINT_EFFECTS))
    return errors


def _consumption_errors(consumption: Any, path: str) -> list[FieldError]:
    if consumption is None:
        return []
    if not isinstance(consumption, list):
        return [invalid(path, type(consumption).__name__, "must be a list")]
    if len(consumption) > MAX_CONSUMES_COUNTERS:
        return [too_many(path, len(consumption), MAX_CONSUMES_COUNTERS)]
    errors: list[FieldError] = []
    for i, entry in enumerate(consumption):
        entry = _map(entry)
        errors += dns_label_errors(entry.get("counterSet"), f"{path}[{i}].counterSet")
        errors += _counters_errors(entry.get("counters"), f"{path}[{i}].counters")
    errors += _duplicates(consumption, lambda e: _map(e).get("counterSet"), path)
    return errors


def _device_node_errors(device: Mapping[str, Any], per_device: bool, path: str) -> list[FieldError]:
    fields = ("nodeName", "nodeSelector", "allNodes")
    if not per_device:
        if any(device.get(f) is not None for f in fields):
            return [
                invalid(
                    path,
                    None,
                    "`nodeName`, `nodeSelector` and `allNodes` can only be "
                    "set if `perDeviceNodeSelection` is set to true in the "
                    "ResourceSlice spec",
                )
            ]
        return []
    errors: list[FieldError] = []
    chosen = []
    if device.get("nodeName") is not None:
        if device["nodeName"] == "":
            errors.append(invalid(f"{path}.nodeName", "", "must not be empty"))
        else:
            chosen.append("`nodeName`")
            errors += dns_subdomain_errors(device["nodeName"], f"{path}.nodeName")
    if device.get("nodeSelector") is not None:
        chosen.append("`nodeSelector`")
        errors += node_selector_errors(device["nodeSelector"], f"{path}.nodeSelector")
    if device.get("allNodes") is not None:
        if device["allNodes"] is True:
            chosen.append("`allNodes`")
        else:
            errors.append(
                invalid(
                    f"{path}.allNodes", device["allNodes"], "must be either unset or set to true"
                )
            )
    rule = (
        "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
        "`perDeviceNodeSelection` is set to true in the ResourceSlice spec"
    )
    if not chosen:
        errors.append(required(path, rule))
    elif len(chosen) > 1:
        errors.append(invalid(path, "{" + ", ".join(chosen) + "}", rule))
    return errors


def _binding_errors(device: Mapping[str, Any], path: str) -> list[FieldError]:
    conditions = _list(device.get("bindingConditions"))
    failures = _list(device.get("bindingFailureConditions"))
    errors: list[FieldError] = []
    for key, items in (("bindingConditions", conditions), ("bindingFailureConditions", failures)):
        if len(items) > MAX_BINDING_CONDITIONS:
            errors.append(too_many(f"{path}.{key}", len(items), MAX_BINDING_CONDITIONS))
            continue
        for i, item in enumerate(items):
            errors += label_name_errors(item, f"{path}.{key}[{i}]")
        errors += _duplicates(items, lambda c: c, f"{path}.{key}")
    for i, item in enumerate(failures):
        if item in conditions:
            errors.append(
                invalid(
                    f"{path}.bindingFailureConditions[{i}]",
                    item,
                    "bindingFailureConditions must not overlap with bindingConditions",
                )
            )
    if failures and not conditions:
        errors.append(
            invalid(
                f"{path}.bindingConditions",
                conditions,
                "bindingConditions are required to use bindingFailureConditions",
            )
        )
    if conditions and not failures:
        errors.append(
            invalid(
                f"{path}.bindingFailureConditions",
                failures,
                "bindingFailureConditions are required to use bindingConditions",
            )
        )
    return errors
