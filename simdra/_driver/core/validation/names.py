"""Name formats of ResourceSlice fields (pure): DNS labels and subdomains, driver and pool
names, qualified attribute/capacity names, label keys and values, UUIDs (claim UIDs and
shareIDs)."""

from __future__ import annotations

import re
from typing import Any

from simdra._driver.core.validation.errors import FieldError, invalid, required, too_long
from simdra._driver.core.validation.limits import (
    MAX_C_IDENTIFIER_LENGTH,
    MAX_DRIVER_NAME_LENGTH,
    MAX_POOL_NAME_LENGTH,
)

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

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


def uuid_errors(value: Any, path: str) -> list[FieldError]:
    """Errors for a lowercase RFC 4122 UUID (what the API server generates as object UIDs
    and the scheduler as shareIDs)."""
    if not isinstance(value, str) or value == "":
        return [required(path)]
    if not _UUID.match(value):
        return [invalid(path, value, "must be a lowercase RFC 4122 UUID")]
    return []


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


def _c_identifier_errors(value: str, path: str) -> list[FieldError]:
    errors = []
    if len(value) > MAX_C_IDENTIFIER_LENGTH:
        errors.append(too_long(path, MAX_C_IDENTIFIER_LENGTH))
    if not _C_IDENTIFIER.match(value):
        errors.append(invalid(path, value, _C_IDENTIFIER_MSG))
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


def label_value_errors(value: Any, path: str) -> list[FieldError]:
    """Errors for a label value (a taint's value): empty or ≤63 label characters."""
    if not isinstance(value, str):
        return [invalid(path, value, "must be a string")]
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return [invalid(path, value, _LABEL_VALUE_MSG + " and be at most 63 characters")]
    return []
