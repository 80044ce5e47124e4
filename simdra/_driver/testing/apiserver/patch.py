"""PATCH bodies: JSON merge patch (RFC 7386) and JSON patch (RFC 6902), pure functions.

Strategic merge patch is applied as a merge patch: lists are replaced, not merged by key.
That is enough for the status writes drivers make (they send whole lists).
"""

from __future__ import annotations

import copy
from typing import Any

from simdra._driver.testing.apiserver.errors import APIError, bad_request

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
SUPPORTED = (JSON_PATCH, MERGE, STRATEGIC)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _invalid(message: str) -> APIError:
    return APIError(
        422, "Invalid", f"the server rejected our request due to an error in our request: {message}"
    )


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _invalid(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> tuple[Any, str]:
    node = doc
    for part in parts[:-1]:
        node = _child(node, part)
    return node, parts[-1]


def _child(node: Any, part: str) -> Any:
    try:
        if isinstance(node, list):
            return node[int(part)]
        return node[part]
    except (KeyError, IndexError, ValueError, TypeError):
        raise _invalid(f"path element {part!r} not found") from None


def _get(doc: Any, path: str) -> Any:
    node = doc
    for part in _pointer(path):
        node = _child(node, part)
    return node


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent, last = _parent(doc, parts)
    if isinstance(parent, list):
        index = len(parent) if last == "-" else _index(last, len(parent) + 1)
        parent.insert(index, value)
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise _invalid(f"cannot add at {path!r}")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    parts = _pointer(path)
    if not parts:
        raise _invalid("cannot remove the whole document")
    parent, last = _parent(doc, parts)
    if isinstance(parent, list):
        return doc, parent.pop(_index(last, len(parent)))
    if isinstance(parent, dict) and last in parent:
        return doc, parent.pop(last)
    raise _invalid(f"unable to remove nonexistent key {last!r}")


def _index(text: str, size: int) -> int:
    try:
        index = int(text)
    except ValueError:
        raise _invalid(f"invalid array index {text!r}") from None
    if not 0 <= index < size:
        raise _invalid(f"array index {index} out of bounds")
    return index


def json_patch(doc: Any, operations: Any) -> Any:
    """RFC 6902: apply add/remove/replace/move/copy/test operations in order."""
    if not isinstance(operations, list):
        raise bad_request("a JSON patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in operations:
        if not isinstance(op, dict) or "path" not in op:
            raise _invalid(f"malformed operation {op!r}")
        doc = _apply(doc, op)
    return doc


def _apply(doc: Any, op: dict[str, Any]) -> Any:
    kind, path = op.get("op"), op["path"]
    if kind == "add":
        return _add(doc, path, copy.deepcopy(op.get("value")))
    if kind == "remove":
        return _remove(doc, path)[0]
    if kind == "replace":
        doc, _ = _remove(doc, path) if _pointer(path) else (doc, None)
        return _add(doc, path, copy.deepcopy(op.get("value")))
    if kind == "move":
        doc, value = _remove(doc, op["from"])
        return _add(doc, path, value)
    if kind == "copy":
        return _add(doc, path, copy.deepcopy(_get(doc, op["from"])))
    if kind == "test":
        if _get(doc, path) != op.get("value"):
            raise _invalid(f"testing value {path} failed")
        return doc
    raise _invalid(f"unexpected operation {kind!r}")


def apply_patch(content_type: str, target: dict[str, Any], patch: Any) -> Any:
    """The patched object for a PATCH request of `content_type`."""
    if content_type == JSON_PATCH:
        return json_patch(target, patch)
    return merge_patch(target, patch)
