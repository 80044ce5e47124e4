"""One table of scenario x Kubernetes release from the results.tsv files the e2e runs
wrote (hack/e2e-matrix.sh): `pass`, `FAIL` or `skip`, skip reasons listed below it.

    python -m tests.e2e.matrix RUN_DIR/*/results.tsv
"""

from __future__ import annotations

import sys
from pathlib import Path

MARKS = {"passed": "pass", "failed": "FAIL", "skipped": "skip"}


def read(paths: list[Path]) -> dict[str, dict[str, tuple[str, str]]]:
    """release -> scenario -> (outcome, reason)."""
    table: dict[str, dict[str, tuple[str, str]]] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            release, scenario, outcome, _, reason = (line.split("\t") + [""] * 5)[:5]
            table.setdefault(release, {})[scenario] = (outcome, reason)
    return table


def render(table: dict[str, dict[str, tuple[str, str]]]) -> list[str]:
    """The table's lines: a header of releases, one row per scenario, then skip reasons."""
    releases = sorted(table, key=lambda r: [int(x) for x in r.lstrip("v").split(".")])
    scenarios = sorted({s for row in table.values() for s in row})
    width = max([len(s) for s in scenarios] + [8])
    lines = [f"{'scenario':<{width}} " + " ".join(f"{r:>8}" for r in releases)]
    for s in scenarios:
        cells = [MARKS.get(table[r].get(s, ("-", ""))[0], "-") for r in releases]
        lines.append(f"{s:<{width}} " + " ".join(f"{c:>8}" for c in cells))
    reasons = sorted({(r, s, why) for r in releases for s, (o, why) in table[r].items()
                      if o == "skipped"})
    lines += [f"skip {r} {s}: {why}" for r, s, why in reasons]
    return lines


if __name__ == "__main__":
    print("\n".join(render(read([Path(p) for p in sys.argv[1:]]))))
