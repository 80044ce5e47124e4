"""`kubectl dra` as a user runs it: the real kubectl of the run's release finds our
`kubectl-dra` console script on PATH (the one installed next to this Python, as
`pip install simdra` puts it) and hands it the arguments.

The kubeconfig comes from $KUBECONFIG: kubectl looks a plugin up only when no flag comes
before its name, and passes none of its own flags on, so `kubectl --kubeconfig X dra`
would find no plugin at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .controlplane import ControlPlane

SCRIPT = "kubectl-dra"
# The DynamicResources plugin's allocation verdicts in a PodScheduled=False message (a
# claim not created yet, the pod's own resources are other plugins' refusals).
DRA_VERDICTS = ("cannot allocate all claims", "invalid resource pools")


def kubectl_dra(cp: ControlPlane, *args: str) -> str:
    """`kubectl dra ARGS` against the run's cluster: its stdout; AssertionError with its
    exit status and stderr when it fails or writes to stderr."""
    scripts = Path(sys.executable).parent
    if not (scripts / SCRIPT).is_file():
        raise AssertionError(f"no {SCRIPT} next to {sys.executable}: the package is not "
                             "installed there (hack/venv.sh installs it)")
    env = {**os.environ, "KUBECONFIG": str(cp.kubeconfig),
           "PATH": os.pathsep.join([str(scripts), os.environ.get("PATH", "")])}
    done = subprocess.run([str(cp.kubectl_path), "dra", *args], capture_output=True,
                          text=True, env=env, timeout=120)
    command = " ".join(["kubectl", "dra", *args])
    assert done.returncode == 0, f"{command}: exit {done.returncode}: {done.stderr.strip()}"
    assert done.stderr == "", f"{command}: wrote to stderr: {done.stderr.strip()}"
    return done.stdout


def kubectl_dra_json(cp: ControlPlane, *args: str) -> dict[str, Any]:
    """`kubectl dra ARGS -o json`, parsed."""
    found: dict[str, Any] = json.loads(kubectl_dra(cp, *args, "-o", "json"))
    return found


def why_agrees_pending(cp: ControlPlane, namespace: str, pod: str) -> None:
    """The scheduler has just left `pod` Unschedulable because of its claims: `kubectl dra
    why` must agree, that is, find at least one of them not allocatable now. Every e2e
    scenario with a Pending pod checks this as it waits for the scheduler's verdict. A
    pod the scheduler refuses for something else (its message does not name claims:
    "Insufficient cpu", which a claim's node-allocatable CPUs may cause, KEP-5517, is the
    node's resource fit, which `why` does not model) is skipped, as is a pod without
    claims."""
    message = _scheduler_message(cp, namespace, pod)
    if not any(verdict in message for verdict in DRA_VERDICTS):
        return
    reports = kubectl_dra_json(cp, "why", f"pod/{pod}", "-n", namespace)["claims"]
    verdicts = {r["claim"]: r["verdict"] for r in reports}
    assert any(not r["allocated"] and r["verdict"].startswith("not") for r in reports), (
        f"kubectl dra why pod/{pod} disagrees with the scheduler's Unschedulable: {verdicts}")


def _scheduler_message(cp: ControlPlane, namespace: str, pod: str) -> str:
    """The message of the pod's PodScheduled=False condition ("" without one)."""
    found = json.loads(cp.kubectl("get", "pod", "-n", namespace, pod, "-o", "json").stdout)
    for condition in (found.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or "")
    return ""
