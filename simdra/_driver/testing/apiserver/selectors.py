"""Field and label selectors of list/watch/deletecollection requests (pure)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from simdra._driver.testing.apiserver.errors import bad_request
from simdra._driver.testing.apiserver.resources import ResourceType, field_value


@dataclass(frozen=True)
class Selector:
    """A parsed selector: matches an object when every term does."""

    terms: tuple[Callable[[dict[str, Any]], bool], ...] = ()

    def matches(self, obj: dict[str, Any]) -> bool:
        """True when `obj` satisfies every term (an empty selector matches everything)."""
        return all(term(obj) for term in self.terms)

    def __and__(self, other: Selector) -> Selector:
        return Selector(self.terms + other.terms)


EVERYTHING = Selector()


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, current, escaped = [], [], False
    for char in text:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            current.append(char)
            escaped = True
        elif char == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def parse_field_selector(text: str | None, resource: ResourceType) -> Selector:
    """Parse `spec.nodeName=node-1,spec.driver!=x`; 400 for syntax or unsupported labels."""
    if not text:
        return EVERYTHING
    terms = []
    for raw in _split_unescaped(text, ","):
        match = re.fullmatch(r"\s*([^=!\s]+)\s*(==|=|!=)(.*)", raw)
        if not match:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{raw}'")
        label, op, value = match[1], match[2], _unescape(match[3])
        if label not in resource.field_labels():
            raise bad_request(f"field label not supported: {label}")
        terms.append(_field_term(label, op != "!=", value))
    return Selector(tuple(terms))


def _field_term(label: str, equal: bool, value: str) -> Callable[[dict[str, Any]], bool]:
    return lambda obj: (field_value(obj, label) == value) == equal


_LABEL_TERM = re.compile(
    r"\s*(?P<neg>!)?\s*(?P<key>[A-Za-z0-9_./-]+)\s*"
    r"(?:(?P<op>==|=|!=|>|<)\s*(?P<value>[A-Za-z0-9_.-]*)"
    r"|\s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\))?\s*"
)


def parse_label_selector(text: str | None) -> Selector:
    """Parse `a=b,c!=d,e,!f,g in (x,y),h notin (z)`; 400 on syntax errors."""
    if not text:
        return EVERYTHING
    terms = []
    for raw in _split_outside_parens(text):
        match = _LABEL_TERM.fullmatch(raw)
        if not match or (match["neg"] and (match["op"] or match["setop"])):
            raise bad_request(f"unable to parse requirement: invalid label selector {text!r}")
        terms.append(_label_term(match))
    return Selector(tuple(terms))


def _split_outside_parens(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _label_term(match: re.Match[str]) -> Callable[[dict[str, Any]], bool]:
    key = match["key"]
    if match["neg"]:
        return lambda obj: key not in _labels(obj)
    if match["setop"]:
        values = {v.strip() for v in match["values"].split(",") if v.strip()}
        if match["setop"] == "in":
            return lambda obj: _labels(obj).get(key) in values
        return lambda obj: _labels(obj).get(key) not in values
    op, value = match["op"], match["value"]
    if op is None:
        return lambda obj: key in _labels(obj)
    if op in ("=", "=="):
        return lambda obj: _labels(obj).get(key) == value
    if op == "!=":
        return lambda obj: _labels(obj).get(key) != value
    return _numeric_term(key, op, value)


def _numeric_term(key: str, op: str, value: str) -> Callable[[dict[str, Any]], bool]:
    try:
        bound = int(value)
    except ValueError:
        raise bad_request(f"invalid label selector: {value!r} is not an integer") from None

    def term(obj: dict[str, Any]) -> bool:
        try:
            actual = int(_labels(obj).get(key, ""))
        except ValueError:
            return False
        return actual > bound if op == ">" else actual < bound

    return term


def selector_for(query: dict[str, str], resource: ResourceType) -> Selector:
    """The combined field + label selector of a request's query parameters."""
    return parse_field_selector(query.get("fieldSelector"), resource) & parse_label_selector(
        query.get("labelSelector")
    )


def select(objs: Iterable[dict[str, Any]], selector: Selector) -> list[dict[str, Any]]:
    """The objects `selector` matches, in order."""
    return [o for o in objs if selector.matches(o)]
