"""A line chart as a small, self-contained SVG: the pictures of the dashboard's panels in
docs/operator.md, drawn from what Prometheus answered in the e2e (Grafana is not
packaged here, and an SVG needs no plotting library)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from xml.sax.saxutils import escape

WIDTH, PLOT_HEIGHT = 640, 180
LEFT, RIGHT, TOP = 64, 16, 34
LEGEND_LINE = 18
LONG_LEGEND = 40  # characters: one legend entry a line from there, two otherwise
# Grafana's first palette colours, in its order.
COLORS = ("#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#5794f2", "#b877d9",
          "#705da0", "#37872d", "#fade2a")


@dataclass(frozen=True)
class Series:
    """One line: its legend and its (seconds, value) points; a NaN value is a gap."""

    legend: str
    points: tuple[tuple[float, float], ...]


def nice_top(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten at or above `value` (1 for 0)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= value * (1 - 1e-9))


def label(value: float, unit: str) -> str:
    """An axis label in the panel's unit (Grafana's ids: s, ops, short)."""
    if unit == "s" and 0 < value < 1:
        return f"{value * 1000:g} ms"
    suffix = {"s": " s", "ops": "/s"}.get(unit, "")
    return f"{value:g}{suffix}"


def _segments(points: tuple[tuple[float, float], ...]) -> list[list[tuple[float, float]]]:
    """The runs of finite points (a NaN, or a missing sample, ends one)."""
    runs: list[list[tuple[float, float]]] = [[]]
    for t, v in points:
        if math.isfinite(v):
            runs[-1].append((t, v))
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r]


def _axes(top: float, span: float, unit: str) -> list[str]:
    """Grid lines and labels: four steps up to `top`, one tick a nice interval of time."""
    out = []
    for i in range(5):
        y = TOP + PLOT_HEIGHT * (1 - i / 4)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
                   'stroke="#d8d9da" stroke-width="1"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                   f"{escape(label(top * i / 4, unit))}</text>")
    every = nice_top(span / 6)
    for k in range(int(span // every) + 1):
        x = LEFT + (WIDTH - LEFT - RIGHT) * k * every / span
        out.append(f'<text x="{x:.1f}" y="{TOP + PLOT_HEIGHT + 16}" text-anchor="middle">'
                   f"{k * every:g} s</text>")
    return out


def _legend(series: list[Series], columns: int) -> list[str]:
    out = []
    column = (WIDTH - LEFT - RIGHT) / columns
    for i, s in enumerate(series):
        x = LEFT + column * (i % columns)
        y = TOP + PLOT_HEIGHT + 38 + LEGEND_LINE * (i // columns)
        color = COLORS[i % len(COLORS)]
        out.append(f'<rect x="{x:.1f}" y="{y - 9}" width="14" height="4" fill="{color}"/>')
        out.append(f'<text x="{x + 20:.1f}" y="{y}">{escape(s.legend)}</text>')
    return out


def chart(title: str, unit: str, series: list[Series], span: float) -> str:
    """An SVG of `series` over 0..`span` seconds, 0 at the bottom, with title and legend."""
    finite = [v for s in series for _, v in s.points if math.isfinite(v)]
    top = nice_top(max(finite, default=0.0))
    columns = 1 if any(len(s.legend) > LONG_LEGEND for s in series) else 2
    height = TOP + PLOT_HEIGHT + 30 + LEGEND_LINE * -(-len(series) // columns)
    scale_x = (WIDTH - LEFT - RIGHT) / span
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
             f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11" '
             'fill="#464c54">',
             f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
             f'<text x="{LEFT}" y="20" font-size="14" font-weight="bold">{escape(title)}</text>',
             *_axes(top, span, unit)]
    for i, s in enumerate(series):
        for run in _segments(s.points):
            xy = " ".join(f"{LEFT + t * scale_x:.1f},{TOP + PLOT_HEIGHT * (1 - v / top):.1f}"
                          for t, v in run)
            color = COLORS[i % len(COLORS)]
            if len(run) == 1:  # a polyline of one point draws nothing
                x, y = xy.split(",")
                parts.append(f'<circle cx="{x}" cy="{y}" r="2" fill="{color}"/>')
            else:
                parts.append(f'<polyline points="{xy}" fill="none" stroke="{color}" '
                             'stroke-width="2"/>')
    parts += _legend(series, columns)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
