"""`kubectl-dra` as installed without simdra[demo]: a child process in which cel-python
cannot be imported (as pip leaves it: ModuleNotFoundError), since this process has the
harness loaded already."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHILD = """
import io, json, sys

class NoCel:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "celpy":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoCel())
from simdra._driver.dra_cli.main import main
answers = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    answers.append([main(argv, out=out, err=err), out.getvalue(), err.getvalue()])
print(json.dumps(answers))
"""


def run_without_cel(commands: Sequence[Sequence[str]]) -> list[tuple[int, str, str]]:
    """(status, stdout, stderr) of each command, run one after another in one child."""
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(commands)],
                          capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={"PYTHONPATH": str(REPO)},
                          check=True)
    return [(code, out, err) for code, out, err in json.loads(done.stdout)]
