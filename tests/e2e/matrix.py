"""One table of scenario x Kubernetes release from the results.tsv files the e2e runs
wrote (hack/e2e-matrix.sh): `pass`, `FAIL` or `skip`, skip reasons listed below it, and
the kubelet of a release that ran another's.

    python -m tests.e2e.matrix RUN_DIR/*/results.tsv
"""

from __future__ import annotations

import sys
from pathlib import Path

MARKS = {"passed": "pass", "failed": "FAIL", "skipped": "skip"}
KUBELET = "(kubelet)"


def read(paths: list[Path]) -> dict[str, dict[str, tuple[str, str]]]:
    """release -> scenario -> (outcome, reason); a release whose kubelet was another's
    has the pseudo-scenario KUBELET -> ("kubelet", its version)."""
    table: dict[str, dict[str, tuple[str, str]]] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            release, scenario, outcome, _, reason, kubelet = (line.split("\t") + [""] * 6)[:6]
            table.setdefault(release, {})[scenario] = (outcome, reason)
            if kubelet:
                table[release][KUBELET] = ("kubelet", kubelet)
    return table


def release_key(release: str) -> tuple[int, ...]:
    """Sort key of "v1.38.0-beta.0": a pre-release before its release."""
    core, _, pre = release.lstrip("v").partition("-")
    numbers = tuple(int(x) for x in core.split(".") if x.isdigit())
    return numbers + ((0,) if pre else (1,))


def render(table: dict[str, dict[str, tuple[str, str]]]) -> list[str]:
    """The table's lines: a header of releases, one row per scenario, then skip reasons."""
    releases = sorted(table, key=release_key)
    scenarios = sorted({s for row in table.values() for s in row} - {KUBELET})
    width = max([len(s) for s in scenarios] + [8])
    column = max([len(r) for r in releases] + [8])
    lines = [f"{'scenario':<{width}} " + " ".join(f"{r:>{column}}" for r in releases)]
    for s in scenarios:
        cells = [MARKS.get(table[r].get(s, ("-", ""))[0], "-") for r in releases]
        lines.append(f"{s:<{width}} " + " ".join(f"{c:>{column}}" for c in cells))
    reasons = sorted({(r, s, why) for r in releases for s, (o, why) in table[r].items()
                      if o == "skipped"})
    lines += [f"skip {r} {s}: {why}" for r, s, why in reasons]
    lines += [f"{r}: control plane {r}, kubelet {table[r][KUBELET][1]}"
              for r in releases if KUBELET in table[r]]
    return lines


if __name__ == "__main__":
    print("\n".join(render(read([Path(p) for p in sys.argv[1:]]))))
