"""The shipped Grafana dashboard (deploy/grafana/simdra-dra.json) as its readers see it:
its panels and their PromQL, with the dashboard's variables filled in as Grafana would,
and the metric and label names each query uses.

Used by tests/deploy/test_grafana_dashboard.py (every name exists) and the e2e's
tests/e2e/node_scenarios/test_dashboard.py (every query returns data on a real
Prometheus).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tests.deploy.layout import DEPLOY, REPO

DASHBOARD = DEPLOY / "grafana" / "simdra-dra.json"
# Where docs/operator.md's pictures of the panels are (the e2e writes them).
PICTURES = REPO / "docs" / "dashboard"
JSON = dict[str, Any]

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{([^}]*)\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
# A name not glued to a word or a number before it (`1e3`, `5m` are no metric).
_NAME = re.compile(r"(?<![\w.$])[a-zA-Z_:][a-zA-Z0-9_:]*")
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool",
             "offset", "and", "or", "unless", "atan2", "inf", "nan"}


@dataclass(frozen=True)
class PanelQueries:
    """A panel's title and its targets as (PromQL, legend)."""

    title: str
    queries: tuple[tuple[str, str], ...]


def load() -> JSON:
    """The committed dashboard."""
    data: JSON = json.loads(DASHBOARD.read_text())
    return data


def panels(dashboard: JSON) -> list[PanelQueries]:
    """Every panel that queries (rows are headers, and have none)."""
    return [PanelQueries(p["title"], tuple((t["expr"], t.get("legendFormat", ""))
                                           for t in p["targets"]))
            for p in dashboard["panels"] if p.get("targets")]


def variable_defaults(dashboard: JSON) -> dict[str, str]:
    """Each dashboard variable with a default value -> that value (the driver's name)."""
    return {v["name"]: v["current"]["value"] for v in dashboard["templating"]["list"]
            if "value" in v.get("current", {})}


def substitute(expr: str, values: dict[str, str]) -> str:
    """`expr` with `$name` and `${name}` replaced from `values` (Grafana's own
    `$__rate_interval` among them, which Grafana fills from its scrape interval)."""
    def one(match: re.Match[str]) -> str:
        name = match[1] or match[2]
        if name not in values:
            raise KeyError(f"no value for ${name} in {expr}")
        return values[name]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, expr)


def metric_names(expr: str) -> set[str]:
    """The metrics a PromQL expression selects: every name outside strings, label
    matchers, ranges and grouping clauses that is not a function, an aggregation or a
    keyword."""
    bare = _GROUPING.sub(" ", _RANGE.sub(" ", _MATCHERS.sub(" ", _STRING.sub('""', expr))))
    return {m[0] for m in _NAME.finditer(bare)
            if m[0].lower() not in _KEYWORDS and not re.match(r"\s*\(", bare[m.end():])}


def label_names(expr: str, legend: str = "") -> set[str]:
    """The labels a query groups by, matches on or shows in its legend (`{{label}}`)."""
    plain = _STRING.sub('""', expr)
    grouped = {name.strip() for m in _GROUPING.finditer(plain) for name in m[2].split(",")}
    matched = {m[0] for block in _MATCHERS.findall(plain)
               for m in re.finditer(r"[a-zA-Z_]\w*(?=\s*(?:=~|!~|!=|=))", block)}
    shown = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend))
    return (grouped | matched | shown) - {""}


def slug(title: str) -> str:
    """A panel's picture's file name, without `.svg`."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
