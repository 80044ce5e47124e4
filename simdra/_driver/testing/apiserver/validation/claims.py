"""The semantic rules of a ResourceClaim spec (also a ResourceClaimTemplate's `spec.spec`),
as the API server applies them on create (an update may only leave the spec alone).

Runs after the schema check and the server's defaulting (allocationMode `ExactCount`,
count 1), so shapes are right and defaulted fields are set.
"""

from __future__ import annotations

import json
from typing import Any

from simdra._driver.testing.apiserver.validation import formats
from simdra._driver.testing.apiserver.validation.capacity_requests import capacity_request_errors
from simdra._driver.testing.apiserver.validation.field import (
    FieldError,
    invalid,
    not_supported,
    required,
    too_long,
)
from simdra._driver.testing.apiserver.validation.release import minor_of
from simdra._driver.testing.apiserver.validation.selectors import selector_list_errors
from simdra._driver.testing.apiserver.validation.sizes import each_item, each_unique_item

JSON = dict[str, Any]
MAX_REQUESTS = 32
MAX_SUBREQUESTS = 8
MAX_CONSTRAINTS = 32
MAX_CONFIGS = 32
MAX_PARAMETERS_BYTES = 10 * 1024
MODES = ("All", "ExactCount")
OPERATORS = ("Equal", "Exists")
EFFECTS = ("NoExecute", "NoSchedule", "None")
_NOT_A_REQUEST = (
    "must be the name of a request in the claim or the name of a request and a subrequest "
    "separated by '/'"
)

# Request name -> its subrequest names (None for an `exactly` request).
RequestNames = dict[str, set[str] | None]


def claim_spec_errors(spec: Any, path: str = "spec", release: str = "1.37") -> list[FieldError]:
    """Every rule the API server of `release` checks in a ResourceClaimSpec at `path`."""
    devices = (spec or {}).get("devices") if isinstance(spec, dict) else None
    if not isinstance(devices, dict):
        return []
    path = f"{path}.devices"
    requests = devices.get("requests") or []
    names = _request_names(requests)
    errors = each_unique_item(requests, f"{path}.requests", _request_errors, _name, MAX_REQUESTS)
    errors += capacity_request_errors(requests, f"{path}.requests", minor_of(release))
    errors += each_item(
        devices.get("constraints"),
        f"{path}.constraints",
        lambda c, p: _constraint_errors(c, p, names),
        MAX_CONSTRAINTS,
    )
    errors += each_item(
        devices.get("config"),
        f"{path}.config",
        lambda c, p: _config_errors(c, p, names),
        MAX_CONFIGS,
    )
    return errors


def _name(item: Any) -> Any:
    return item.get("name") if isinstance(item, dict) else None


def _request_names(requests: list[JSON]) -> RequestNames:
    names: RequestNames = {}
    for request in (r for r in requests if isinstance(r, dict)):
        subs = [s for s in request.get("firstAvailable") or [] if isinstance(s, dict)]
        names[str(request.get("name"))] = {str(s.get("name")) for s in subs} if subs else None
    return names


# --- requests ---------------------------------------------------------------------------


def _request_errors(request: JSON, path: str) -> list[FieldError]:
    errors = formats.dns_label(request.get("name", ""), f"{path}.name")
    first = request.get("firstAvailable") or []
    exactly = request.get("exactly")
    if not first and exactly is None:
        return [*errors, required(path, "exactly one of `exactly` or `firstAvailable` is required")]
    if first and exactly is not None:
        return [
            *errors,
            invalid(
                path,
                None,
                "exactly one of `exactly` or `firstAvailable` is required, but multiple "
                "fields are set",
            ),
        ]
    if first:
        return errors + each_unique_item(
            first, f"{path}.firstAvailable", _subrequest_errors, _name, MAX_SUBREQUESTS
        )
    assert exactly is not None  # the first check: `exactly` is set when `first` is not
    return errors + _device_request_errors(exactly, f"{path}.exactly")


def _subrequest_errors(sub: JSON, path: str) -> list[FieldError]:
    return formats.dns_label(sub.get("name", ""), f"{path}.name") + _device_request_errors(
        sub, path
    )


def _device_request_errors(request: JSON, path: str) -> list[FieldError]:
    """What an `exactly` request and a `firstAvailable` subrequest have in common."""
    errors = _class_name_errors(request.get("deviceClassName"), f"{path}.deviceClassName")
    errors += selector_list_errors(request.get("selectors"), f"{path}.selectors")
    errors += _mode_errors(request, path)
    for i, toleration in enumerate(request.get("tolerations") or []):
        if isinstance(toleration, dict):
            errors += toleration_errors(toleration, f"{path}.tolerations[{i}]")
    return errors


def _class_name_errors(name: Any, path: str) -> list[FieldError]:
    if not name:
        return [required(path)]
    return formats.dns_subdomain(name, path)


def _mode_errors(request: JSON, path: str) -> list[FieldError]:
    mode, count = request.get("allocationMode"), request.get("count") or 0
    if mode == "All":
        if count != 0:
            return [
                invalid(
                    f"{path}.count", count, "must not be specified when allocationMode is 'All'"
                )
            ]
        return []
    if mode == "ExactCount":
        if count <= 0:
            return [invalid(f"{path}.count", count, "must be greater than zero")]
        return []
    return [not_supported(f"{path}.allocationMode", mode, MODES)]


def toleration_errors(toleration: JSON, path: str) -> list[FieldError]:
    """A device toleration: key a label key, operator Equal (value a label value) or
    Exists (no value), effect one of the taint effects when set."""
    errors = []
    key, value = toleration.get("key") or "", toleration.get("value") or ""
    if key:
        errors += formats.label_name(key, f"{path}.key")
    operator = toleration.get("operator") or ""
    if operator == "Exists":
        if value:
            errors.append(invalid(f"{path}.value", value, "must be empty for operator `Exists`"))
    elif operator == "Equal":
        errors += formats.label_value(value, f"{path}.value")
    elif not operator:
        errors.append(required(f"{path}.operator"))
    else:
        errors.append(not_supported(f"{path}.operator", operator, OPERATORS))
    effect = toleration.get("effect") or ""
    if effect and effect not in EFFECTS:
        errors.append(not_supported(f"{path}.effect", effect, EFFECTS))
    return errors


# --- constraints and config -------------------------------------------------------------


def _reference_errors(names: RequestNames, refs: Any, path: str) -> list[FieldError]:
    """A list of `request` or `request/subrequest` names: each known, none twice."""
    return each_unique_item(
        list(refs or []),
        path,
        lambda ref, where: _reference_error(names, ref, where),
        str,
        MAX_REQUESTS,
    )


def _reference_error(names: RequestNames, ref: Any, path: str) -> list[FieldError]:
    segments = str(ref).split("/")
    if len(segments) > 2:
        return [invalid(path, ref, _NOT_A_REQUEST)]
    errors = [e for s in segments for e in formats.dns_label(s, path)]
    subs = names.get(segments[0]) or set()
    known = segments[0] in names and (len(segments) == 1 or segments[1] in subs)
    if not known:
        errors.append(invalid(path, ref, _NOT_A_REQUEST))
    return errors


def _constraint_errors(constraint: JSON, path: str, names: RequestNames) -> list[FieldError]:
    errors = _reference_errors(names, constraint.get("requests"), f"{path}.requests")
    for field in ("matchAttribute", "distinctAttribute"):
        if constraint.get(field) is not None:
            return errors + formats.fully_qualified_name(constraint[field], f"{path}.{field}")
    return [
        *errors,
        required(
            path,
            'exactly one of "matchAttribute" or "distinctAttribute" is required, but '
            "multiple fields are set",
        ),
    ]


def _config_errors(config: JSON, path: str, names: RequestNames) -> list[FieldError]:
    errors = _reference_errors(names, config.get("requests"), f"{path}.requests")
    return errors + opaque_config_errors(config, path)


def opaque_config_errors(config: JSON, path: str) -> list[FieldError]:
    """A claim's or a class's `config[]` entry: an opaque driver name and JSON object."""
    opaque = config.get("opaque")
    if not isinstance(opaque, dict):
        return [required(f"{path}.opaque")]
    path = f"{path}.opaque"
    errors = formats.driver_name(opaque.get("driver"), f"{path}.driver")
    parameters = opaque.get("parameters")
    where = f"{path}.parameters"
    if parameters is None:
        errors.append(required(where))
    elif len(json.dumps(parameters, separators=(",", ":"))) > MAX_PARAMETERS_BYTES:
        errors.append(too_long(where, MAX_PARAMETERS_BYTES))
    elif not isinstance(parameters, dict):
        errors.append(invalid(where, "<value omitted>", "must be a valid JSON object"))
    return errors
