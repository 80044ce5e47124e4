"""Name and value formats of the API server (apimachinery's validation helpers), as
lists of FieldErrors at a given path."""

from __future__ import annotations

import re
from typing import Any

from simdra._driver.testing.apiserver.validation.field import (
    FieldError,
    invalid,
    required,
    too_long,
)

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL = re.compile(rf"^{_LABEL}$")
_DNS_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
DRIVER_NAME_MAX = 63
ID_MAX = 32  # the identifier part of a device attribute name

_DNS_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_DNS_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*"
    "[a-z0-9])?)*')"
)
_NAME_PART_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def _too_long(limit: int) -> str:
    return f"must be no more than {limit} characters"


def dns_label(value: Any, path: str) -> list[FieldError]:
    """An RFC 1123 label (request names): lower case, digits and '-', at most 63."""
    text = str(value)
    errors = []
    if len(text) > DNS_LABEL_MAX:
        errors.append(invalid(path, value, _too_long(DNS_LABEL_MAX)))
    if not _DNS_LABEL.match(text):
        errors.append(invalid(path, value, _DNS_LABEL_MSG))
    return errors


def dns_subdomain(value: Any, path: str, limit: int = DNS_SUBDOMAIN_MAX) -> list[FieldError]:
    """An RFC 1123 subdomain (class names): dot-separated labels, at most 253."""
    text = str(value)
    errors = []
    if len(text) > limit:
        errors.append(invalid(path, value, _too_long(limit)))
    if not _DNS_SUBDOMAIN.match(text):
        errors.append(invalid(path, value, _DNS_SUBDOMAIN_MSG))
    return errors


def driver_name(value: Any, path: str) -> list[FieldError]:
    """A driver name, checked as a CSI driver name: required, at most 63 bytes, and a
    subdomain once lower-cased (an empty one is both missing and malformed)."""
    text = "" if value is None else str(value)
    errors = [] if text else [required(path)]
    if len(text) > DRIVER_NAME_MAX:
        errors.append(too_long(path, DRIVER_NAME_MAX))
    errors += [invalid(path, value, m) for m in _subdomain_messages(text.lower())]
    return errors


def pool_name(value: Any, path: str) -> list[FieldError]:
    """A pool name: required, at most 253 bytes, subdomains joined by '/'."""
    text = "" if value is None else str(value)
    if not text:
        return [required(path)]
    errors = [too_long(path, DNS_SUBDOMAIN_MAX)] if len(text) > DNS_SUBDOMAIN_MAX else []
    for part in text.split("/"):
        errors += [invalid(path, part, m) for m in _subdomain_messages(part)]
    return errors


def object_name(meta: Any) -> list[FieldError]:
    """`metadata.name` of an object named as a DNS subdomain (name or generateName)."""
    meta = meta if isinstance(meta, dict) else {}
    name = meta.get("name")
    if not name:
        if meta.get("generateName"):
            return []
        return [required("metadata.name", "name or generateName is required")]
    return dns_subdomain(name, "metadata.name")


def _subdomain_messages(text: str) -> list[str]:
    messages = [_too_long(DNS_SUBDOMAIN_MAX)] if len(text) > DNS_SUBDOMAIN_MAX else []
    if not _DNS_SUBDOMAIN.match(text):
        messages.append(_DNS_SUBDOMAIN_MSG)
    return messages


def qualified_name_messages(text: str) -> list[str]:
    """Why `text` is not a qualified name ([prefix/]name, as label keys), [] when it is."""
    parts = text.split("/")
    if len(parts) > 2:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character with an optional DNS "
            "subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    messages = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            messages.append("prefix part must be non-empty")
        elif len(prefix) > DNS_SUBDOMAIN_MAX or not _DNS_SUBDOMAIN.match(prefix):
            messages.append(f"prefix part {_DNS_SUBDOMAIN_MSG}")
    if not name:
        messages.append("name part must be non-empty")
    else:
        if len(name) > DNS_LABEL_MAX:
            messages.append(f"name part {_too_long(DNS_LABEL_MAX)}")
        if not _NAME_PART.match(name):
            messages.append(_NAME_PART_MSG)
    return messages


def label_name(value: Any, path: str) -> list[FieldError]:
    """A label key (toleration keys): an optional subdomain prefix, '/', a name part."""
    return [invalid(path, value, m) for m in qualified_name_messages(str(value))]


def label_value(value: Any, path: str) -> list[FieldError]:
    """A label value (toleration values): empty, or at most 63 of [-A-Za-z0-9_.]."""
    text = str(value)
    errors = []
    if len(text) > DNS_LABEL_MAX:
        errors.append(invalid(path, value, _too_long(DNS_LABEL_MAX)))
    if not _LABEL_VALUE.match(text):
        errors.append(invalid(path, value, _LABEL_VALUE_MSG))
    return errors


def qualified_name(value: Any, path: str) -> list[FieldError]:
    """A device attribute or capacity name: a C identifier, optionally after a driver-style
    domain and one '/'. The server reports it on the map's path, not the key's."""
    text = str(value)
    parts = text.split("/")
    if len(parts) > 2:
        return [invalid(path, value, "must not contain more than one slash")]
    if len(parts) == 1:
        return _c_identifier(text, path)
    domain, ident = parts
    errors = (
        driver_name(domain, path) if domain else [invalid(path, "", "the domain must not be empty")]
    )
    if not ident:
        return [*errors, invalid(path, "", "the name must not be empty")]
    return errors + _c_identifier(ident, path)


def fully_qualified_name(value: Any, path: str) -> list[FieldError]:
    """A device attribute name with its domain (`dra.example.com/model`)."""
    errors = qualified_name(value, path)
    if "/" not in str(value):
        errors.append(
            invalid(
                path,
                value,
                "a fully qualified name must be a domain and a name separated by a slash",
            )
        )
    return errors


def _c_identifier(ident: str, path: str) -> list[FieldError]:
    errors = []
    if len(ident) > ID_MAX:
        errors.append(too_long(path, ID_MAX))
    if not _C_IDENTIFIER.match(ident):
        errors.append(
            invalid(
                path,
                ident,
                "a valid C identifier must start with alphabetic character "
                "or '_', followed by a string of alphanumeric characters or '_' (e.g. "
                "'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is "
                "'[A-Za-z_][A-Za-z0-9_]*')",
            )
        )
    return errors


def is_extended_resource_name(name: str) -> bool:
    """True for a name like `example.com/gpu`: a domain outside kubernetes.io, a name part,
    valid as a quota key (`requests.<name>`)."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return not qualified_name_messages(f"requests.{name}")
