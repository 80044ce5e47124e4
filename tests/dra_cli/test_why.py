"""`kubectl dra why`: per request, each device with the first check it fails (a CEL
selector quoted, capacity, taint, already allocated, node), and a verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from simdra._driver.testing.apiserver import APIServer
from tests.dra_cli.conftest import Run


def _why(run: Run, target: str) -> dict[str, Any]:
    code, out, err = run("why", target, "-o", "json")
    assert (code, err) == (0, ""), err
    return dict(json.loads(out))


def _checks(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    [request] = report["requests"]
    return {d["device"].rsplit("/", 1)[1]: (d["stage"], d["reason"]) for d in request["devices"]}


def test_a_selector_that_matches_nothing_is_quoted(run: Run) -> None:
    [report] = _why(run, "want-a100")["claims"]
    assert (report["allocated"], report["verdict"]) == (False, "not allocatable now")
    checks = _checks(report)
    expression = 'device.attributes["gpu.example.com"].model == "A100"'
    assert checks["gpu-1"] == ("selector", f"selector `{expression}` of request req is false")
    assert checks["nic-0"] == (
        "class", 'selector `device.driver == "gpu.example.com"` of class gpu is false')


def test_capacity_exhausted(run: Run) -> None:
    [report] = _why(run, "claim/want-bw")["claims"]
    assert _checks(report)["nic-0"] == ("capacity", "bandwidth: 100G of 100G used")
    assert report["verdict"] == "not allocatable now"


def test_a_taint_not_tolerated_and_a_device_already_allocated(run: Run) -> None:
    [report] = _why(run, "want-gpu3")["claims"]
    assert _checks(report)["gpu-3"] == (
        "taint", "has taint example.com/broken=ecc:NoSchedule, not tolerated")
    [any_gpu] = _why(run, "want-any")["claims"]
    checks = _checks(any_gpu)
    assert checks["gpu-0"] == ("allocated", "in use by claim default/train")
    assert checks["gpu-1"] == ("usable", "usable")
    assert checks["part-0"][0] == "allocated"
    assert checks["whole"] == ("counters", "counter gpu-mem/memory: needs 80Gi, 40Gi of 80Gi used")
    assert any_gpu["verdict"] == "allocatable now on node node-1: gpu.example.com/node-1/gpu-1"


def test_a_pod_means_its_claims_on_its_node(run: Run) -> None:
    [report] = _why(run, "waiting")["claims"]  # bound to node-2, claim want-any
    assert report["claim"] == "default/want-any"
    checks = _checks(report)
    assert checks["gpu-1"] == ("node", "on node node-1, the pod is bound to node-2")
    assert checks["part-1"] == ("usable", "usable")
    assert report["verdict"] == "allocatable now on node node-2: gpu.example.com/node-2/part-1"
    [pending] = _why(run, "pod/unscheduled")["claims"]
    assert pending["claim"] == "default/want-bw"


def test_an_allocated_claim_says_where(run: Run) -> None:
    code, out, _ = run("why", "trainer")
    assert code == 0
    assert out.splitlines() == ["claim default/train: allocated on node node-1",
                                "  gpu.example.com/node-1/gpu-0 (req)",
                                "  reserved for: trainer"]


def test_the_text_lists_the_most_promising_devices_first(run: Run) -> None:
    code, out, _ = run("why", "want-any", "--max-devices", "3")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "claim default/want-any: not allocated"
    assert lines[1].startswith("  request req (class gpu, 1 device(s)): 3 of 8 devices usable")
    assert [line.rsplit("/", 1)[1] for line in lines[2:5]] == [
        "gpu-1: usable", "gpu-2: usable", "part-1: usable"]
    assert lines[5].startswith("    ... and 5 more (first failed check: ")
    assert lines[-1].startswith("  verdict: allocatable now on node node-1")


def test_an_unknown_name_is_one_line(run: Run) -> None:
    code, out, err = run("why", "nothing-here")
    assert (code, out) == (1, "")
    assert err == "kubectl-dra: no pod or claim 'nothing-here' in namespace 'default'\n"
    code, _, err = run("why", "deployment/x")
    assert code == 2 and err.count("\n") == 1


def test_a_device_taint_rule_counts_as_the_devices_own_taint(
        run: Run, cluster: tuple[APIServer, Path]) -> None:
    """As the scheduler counts it (DeviceTaintRules are GA in 1.37): the node's pool
    drained by a rule sends the claim elsewhere, and `why` names the rule's taint."""
    server, _ = cluster
    rule = {"metadata": {"name": "drain-node-1"}, "spec": {
        "deviceSelector": {"driver": "gpu.example.com", "pool": "node-1"},
        "taint": {"key": "example.com/drain", "value": "maintenance", "effect": "NoSchedule"}}}
    server.put_object("devicetaintrules", rule)
    try:
        [report] = _why(run, "want-any")["claims"]
    finally:
        server.delete_object("devicetaintrules", "drain-node-1")

    assert _checks(report)["gpu-1"] == (
        "taint", "has taint example.com/drain=maintenance:NoSchedule, not tolerated")
    assert report["verdict"].startswith("allocatable now on node node-2")  # not node-1
    [untainted] = _why(run, "want-any")["claims"]
    assert _checks(untainted)["gpu-1"] == ("usable", "usable")
