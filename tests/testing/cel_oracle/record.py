"""Print the JSON of Kubernetes' verdicts on cel_cases.txt (see regenerate.sh)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

DRIVER = "dra.example.com"
LIST_KINDS = ("ints", "bools", "strings", "versions")
DEVICE = {
    "name": "gpu-0",
    "attributes": {
        "model": {"string": "LATEST-GPU-MODEL"},
        "index": {"int": 3},
        "healthy": {"bool": True},
        "driverVersion": {"version": "1.2.3-rc.1"},
        "firmware": {"version": "2.10.0"},
        "modes": {"strings": ["compute", "graphics"]},
        "ports": {"ints": [1, 3, 5]},
        f"{DRIVER}/uuid": {"string": "gpu-1234"},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
    },
    "capacity": {
        "memory": {"value": "80Gi"},
        f"{DRIVER}/cores": {"value": "108"},
        "power": {"value": "1500m"},
    },
}


def verdicts(oracle: str, cases: list[str], device: dict, lists: bool) -> list[dict[str, str]]:
    """The oracle's verdict on each case: compile, runtime, true or false (and why)."""
    request = {"driver": DRIVER, "device": device, "expressions": cases}
    reply = subprocess.run(
        [oracle], input=json.dumps(request), capture_output=True, text=True, check=True,
        env={"LISTS": "1" if lists else ""},
    )  # fmt: skip
    found = []
    for expression, result in zip(cases, json.loads(reply.stdout), strict=True):
        ((outcome, detail),) = result.items()
        if outcome == "matches":
            outcome, detail = ("true" if detail else "false"), ""
        found.append({"expression": expression, "outcome": outcome,
                      "detail": (str(detail).splitlines() or [""])[0][:200]})  # fmt: skip
    return found


def main() -> None:
    """Run the oracle on every case, with and without DRAListTypeAttributes."""
    oracle = sys.argv[1]
    cases = [line for line in (Path(__file__).parent / "cel_cases.txt").read_text().splitlines()
             if line.strip()]  # fmt: skip
    # Without the gate, a device with a list attribute fails every selector: the
    # interesting cases need a device without one.
    scalar = {
        **DEVICE,
        "attributes": {
            k: v for k, v in DEVICE["attributes"].items() if not any(t in v for t in LIST_KINDS)
        },
    }
    document = {
        "source": "k8s.io/dynamic-resource-allocation/cel v0.36.3 (cel-go v0.26.0), "
        "DRAConsumableCapacity on",
        "driver": DRIVER,
        "configurations": [
            {"list_type_attributes": True, "device": DEVICE,
             "cases": verdicts(oracle, cases, DEVICE, lists=True)},
            {"list_type_attributes": False, "device": scalar,
             "cases": verdicts(oracle, cases, scalar, lists=False)},
        ],
    }  # fmt: skip
    json.dump(document, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
