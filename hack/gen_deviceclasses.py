#!/usr/bin/env python3
"""Regenerates the DeviceClasses the deployment ships from simdra's registered device
kinds, with the `simdra deviceclasses` command itself:

* deploy/base/deviceclasses.yaml: the whole file (`simdra deviceclasses`);
* deploy/helm/simdra/values.yaml: the lines between `# BEGIN GENERATED` and
  `# END GENERATED` in `deviceClasses.classes` (`simdra deviceclasses --helm-values`),
  indented like the BEGIN line; the rest of the file is left as it is.

With --check nothing is written: exit status 1 and one line per stale file.
tests/deploy/test_generated_deviceclasses.py runs it that way.

Usage: gen_deviceclasses.py [--check] [--root DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DRIVER_NAME = "dra.example.com"
BASE = Path("deploy/base/deviceclasses.yaml")
VALUES = Path("deploy/helm/simdra/values.yaml")
BEGIN = "# BEGIN GENERATED"
END = "# END GENERATED"


def simdra(*args: str) -> str:
    """The output of `simdra <args>` run from this checkout (its own `driver` package,
    no KINDS or DRIVER_NAME from the calling environment)."""
    env = {k: v for k, v in os.environ.items() if k not in ("KINDS", "DRIVER_NAME")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "simdra", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, check=False)
    if done.returncode != 0:
        sys.exit(f"simdra {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def with_block(text: str, block: str, where: Path) -> str:
    """`text` with the lines between its BEGIN and END markers replaced by `block`,
    indented as the BEGIN line is."""
    lines = text.splitlines(keepends=True)
    begin = [i for i, line in enumerate(lines) if line.strip().startswith(BEGIN)]
    end = [i for i, line in enumerate(lines) if line.strip().startswith(END)]
    if len(begin) != 1 or len(end) != 1 or end[0] < begin[0]:
        sys.exit(f"{where}: needs one `{BEGIN}` line and one `{END}` line after it")
    indent = lines[begin[0]][: len(lines[begin[0]]) - len(lines[begin[0]].lstrip())]
    body = [f"{indent}{line}\n" for line in block.splitlines()]
    return "".join(lines[: begin[0] + 1] + body + lines[end[0]:])


def expected(root: Path) -> dict[Path, str]:
    """Each generated file -> the text it should have."""
    classes = simdra("deviceclasses", "--driver-name", DRIVER_NAME)
    values = simdra("deviceclasses", "--helm-values")
    return {BASE: classes,
            VALUES: with_block((root / VALUES).read_text(), values, VALUES)}


def main() -> int:
    """Write (or with --check, compare) the generated files; the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a generated file is stale")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the tree whose files to write or check (default: this one)")
    args = parser.parse_args()
    stale = []
    for path, text in expected(args.root).items():
        target = args.root / path
        if target.read_text() == text:
            continue
        stale.append(path)
        if not args.check:
            target.write_text(text)
    for path in stale:
        verb = "is stale; run hack/gen-deviceclasses.sh" if args.check else "regenerated"
        print(f"{path} {verb}", file=sys.stderr if args.check else sys.stdout)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
