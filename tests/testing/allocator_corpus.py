"""A corpus of ResourceSlices, DeviceClasses and ResourceClaims, with the allocations a real
kube-scheduler made of them.

Each case is one node's slices (one driver), the classes, and claims allocated in turn:
the last is the claim under test, any before it are allocated first so that it meets
used devices, capacity and counters. The verdict is what each claim got (request, pool,
device, whether it is a share, admin access, consumedCapacity) or `unschedulable`.

The verdicts were recorded from a real control plane (the version is in the verdicts
file) with `python -m tests.e2e.test_allocator_differential --record`. The fast
`tests/testing/test_allocator_corpus.py` holds the harness allocator
(`simdra._driver.testing.scheduler.allocate`) to them, and the e2e differential re-asks a live
scheduler, so a change on either side shows up.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simdra._driver.testing.allocation.errors import AllocationError
from simdra._driver.testing.scheduler import allocate
from tests.testing.apiserver_corpus import minor_of

JSON = dict[str, Any]
# One file of recorded verdicts per Kubernetes minor release (`1.37.json`).
VERDICTS_DIR = Path(__file__).with_name("allocator_verdicts")
# The release whose scheduler the harness allocator follows (tests/e2e/go.mod pins it).
MODELLED_RELEASE = "1.37"
DRIVER = "alloc.example.com"
NODE = "alloc-diff-node"
NAMESPACE = "alloc-diff"  # labelled for admin access by the recorder
CLASS = "alloc.example.com"
UNSCHEDULABLE = "unschedulable"

Verdict = tuple[str, ...]
"""One line per allocation result, `#<claim> <request> <pool>/<device>[ share][ admin]
[ consumed[name=amount,...]]`, or `#<claim> unschedulable`; sorted."""


@dataclass(frozen=True)
class Case:
    """Slices, classes and claims to allocate in turn; where the harness knowingly
    allocates otherwise than the scheduler, its own verdict and why."""

    name: str
    slices: tuple[JSON, ...]
    claims: tuple[JSON, ...]  # each a claim's spec.devices; the last is under test
    classes: tuple[JSON, ...] = field(default_factory=lambda: (device_class(),))
    # Published instead of `slices` once every claim but the last is allocated.
    republished: tuple[JSON, ...] | None = None
    taint_rules: tuple[JSON, ...] = ()  # DeviceTaintRule specs
    harness: Verdict | None = None
    why: str = ""


def verdicts_file(release: str = MODELLED_RELEASE) -> Path:
    """Where the verdicts of `release` (a version or a minor) are recorded."""
    return VERDICTS_DIR / f"{minor_of(release)}.json"


def load_verdicts(release: str = MODELLED_RELEASE) -> tuple[str, dict[str, Verdict]]:
    """(scheduler version, case name -> the recorded verdict) for `release`."""
    data = json.loads(verdicts_file(release).read_text())
    return str(data["server"]), {name: tuple(v) for name, v in data["cases"].items()}


def save_verdicts(server: str, verdicts: dict[str, Verdict]) -> None:
    """Write recorded verdicts: sorted by case name, one case a line."""
    lines = [f"  {json.dumps(n)}: {json.dumps(list(verdicts[n]))}" for n in sorted(verdicts)]
    body = ",\n".join(lines)
    verdicts_file(server).write_text(f'{{"server": {json.dumps(server)}, "cases": {{\n'
                                     f"{body}\n}}}}\n")


def result_lines(index: int, allocation: JSON | None) -> list[str]:
    """The verdict lines of claim `index` from its status.allocation (None: none)."""
    if not allocation:
        return [f"#{index} {UNSCHEDULABLE}"]
    lines = []
    for result in (allocation.get("devices") or {}).get("results") or []:
        line = f"#{index} {result['request']} {result['pool']}/{result['device']}"
        if result.get("shareID"):
            line += " share"
        if result.get("adminAccess"):
            line += " admin"
        consumed = result.get("consumedCapacity") or {}
        if consumed:
            line += f" consumed[{','.join(f'{k}={consumed[k]}' for k in sorted(consumed))}]"
        lines.append(line)
    return lines


def claim_object(case: Case, index: int) -> JSON:
    """Claim `index` of `case` as a ResourceClaim in NAMESPACE."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"claim-{index}", "namespace": NAMESPACE,
                     "uid": f"00000000-0000-0000-0000-{index:012d}"},
        "spec": {"devices": case.claims[index]},
    }


def harness_verdict(case: Case) -> Verdict:
    """What the harness allocator gives each claim of `case`, in turn."""
    classes = {c["metadata"]["name"]: c for c in case.classes}
    allocated: list[JSON] = []
    lines: list[str] = []
    for index in range(len(case.claims)):
        last = index == len(case.claims) - 1
        slices = case.republished if last and case.republished is not None else case.slices
        claim = claim_object(case, index)
        try:
            claim["status"] = {"allocation": allocate(
                claim, slices, classes, allocated, node_name=NODE,
                taint_rules=case.taint_rules)}
        except AllocationError:
            lines += result_lines(index, None)
            continue
        allocated.append(claim)
        lines += result_lines(index, claim["status"]["allocation"])
    return tuple(sorted(lines))


def harness_disagreement(case: Case, real: Verdict) -> str | None:
    """Why the harness's allocation of `case` is wrong given the scheduler's `real`
    verdict (None: it is right). Where the case names the harness's own answer, the
    harness must give that one, and it must still differ from the scheduler's."""
    ours = harness_verdict(case)
    if case.harness is not None:
        if ours != tuple(sorted(case.harness)):
            return f"harness {list(ours)}, the case expects {list(case.harness)}"
        if ours == real:
            return "the harness now allocates as the scheduler: drop the case's exception"
        return None
    return None if ours == real else f"scheduler {list(real)}, harness {list(ours)}"


# --- builders ---------------------------------------------------------------------------


def resource_slice(name: str, devices: list[JSON], *, pool: str = "pool-a",
                   generation: int = 1, count: int = 1, **spec: Any) -> JSON:
    """A slice of DRIVER on NODE (no devices and `sharedCounters` in spec: a counter slice)."""
    body: JSON = {"driver": DRIVER, "nodeName": NODE,
                  "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
                  **spec}
    if devices:
        body["devices"] = devices
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name}, "spec": body}


def counter_slice(name: str, *sets: tuple[str, JSON], pool: str = "pool-a",
                  count: int = 2) -> JSON:
    """A slice holding only counter sets (1.35+ keeps them apart from devices)."""
    counters = [{"name": n, "counters": {k: {"value": v} for k, v in c.items()}}
                for n, c in sets]
    return resource_slice(name, [], pool=pool, count=count, sharedCounters=counters)


def device_class(name: str = CLASS, *selectors: str) -> JSON:
    """A DeviceClass selecting DRIVER's devices (and `selectors`)."""
    expressions = [f'device.driver == "{DRIVER}"', *selectors]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]}}


def gpu(name: str, **fields: Any) -> JSON:
    """An exclusive device with a model attribute and 40Gi memory."""
    return {"name": name, "attributes": {"model": {"string": "a"}},
            "capacity": {"memory": {"value": "40Gi"}}, **fields}


def nic(name: str, bw: JSON | None = None, **fields: Any) -> JSON:
    """A multi-allocatable device: 4G bandwidth `bw` (default: 1G default, 1G steps,
    4G max) and 8Gi memory without a request policy."""
    policy = bw or {"default": "1G", "validRange": {"min": "1G", "max": "4G", "step": "1G"}}
    return {"name": name, "allowMultipleAllocations": True,
            "attributes": {"model": {"string": "n"}},
            "capacity": {"bw": {"value": "4G", "requestPolicy": policy},
                         "memory": {"value": "8Gi"}},
            **fields}


def bw_nic(name: str, **fields: Any) -> JSON:
    """A multi-allocatable device with only 4G bw (default 1G, 1G steps)."""
    policy = {"default": "1G", "validRange": {"min": "1G", "max": "4G", "step": "1G"}}
    return nic(name, capacity={"bw": {"value": "4G", "requestPolicy": policy}}, **fields)


def partition(name: str, amount: str, counter_set: str = "cs", **fields: Any) -> JSON:
    """A device that consumes `amount` of counter `mem` of `counter_set`."""
    return {"name": name, "consumesCounters": [
        {"counterSet": counter_set, "counters": {"mem": {"value": amount}}}], **fields}


def exactly(name: str = "r", **fields: Any) -> JSON:
    """An `exactly` request of CLASS."""
    return {"name": name, "exactly": {"deviceClassName": CLASS, **fields}}


def sub(name: str, **fields: Any) -> JSON:
    """A firstAvailable subrequest of CLASS."""
    return {"name": name, "deviceClassName": CLASS, **fields}


def devices(*requests: JSON, **more: Any) -> JSON:
    """A claim's spec.devices."""
    return {"requests": list(requests), **more}


def bandwidth(amount: str, **fields: Any) -> JSON:
    """An `exactly` request for a share with `amount` of bw."""
    return exactly(capacity={"requests": {"bw": amount}}, **fields)


def cel(expression: str) -> list[JSON]:
    """A selectors list with one CEL expression."""
    return [{"cel": {"expression": expression}}]


def taint(effect: str = "NoSchedule") -> JSON:
    """A device taint example.com/broken=yes."""
    return {"key": "example.com/broken", "value": "yes", "effect": effect}


TOLERATE = [{"key": "example.com/broken", "operator": "Exists"}]
ONE_GPU = (resource_slice("s", [gpu("gpu-0")]),)
TWO_GPUS = (resource_slice("s", [gpu("gpu-0"), gpu("gpu-1")]),)
ONE_NIC = (resource_slice("s", [nic("nic-0")]),)

_MODELS = (resource_slice("s", [gpu("gpu-0"), gpu("gpu-1", attributes={"model": {"string": "b"}}),
                                gpu("gpu-2")]),)
_NUMA = (resource_slice("s", [
    gpu("gpu-0", attributes={"numa": {"ints": [0, 1]}}),
    gpu("gpu-1", attributes={"numa": {"ints": [1]}}),
    gpu("gpu-2", attributes={"numa": {"ints": [2]}}),
]),)
_PARTITIONS = (
    counter_slice("counters", ("cs", {"mem": "80Gi"})),
    resource_slice("s", [partition("p-0", "40Gi"), partition("p-1", "40Gi"),
                         partition("p-2", "40Gi")], count=2),
)
# A multi-allocatable device that consumes counters, beside an exclusive partition.
_SHARED_PARTITION = (
    counter_slice("counters", ("cs", {"mem": "80Gi"})),
    resource_slice("s", [bw_nic("nic-0", consumesCounters=[
        {"counterSet": "cs", "counters": {"mem": {"value": "60Gi"}}}]),
        partition("p-0", "40Gi", attributes={"model": {"string": "p"}})], count=2),
)

# Partitions of one counter set in compatibility groups (KEP-5963): "mig", "ts" and
# "both" (the two groups), and "plain" in none.
_COMPAT = (
    counter_slice("counters", ("cs", {"mem": "80Gi"})),
    resource_slice("s", [{
        "name": f"{model}-0", "attributes": {"model": {"string": model}},
        "consumesCounters": [{"counterSet": "cs", "counters": {"mem": {"value": "20Gi"}},
                              **({"compatibilityGroups": groups} if groups else {})}]}
        for model, groups in (("mig", ["mig"]), ("ts", ["time-sliced"]),
                              ("both", ["mig", "time-sliced"]), ("plain", []))], count=2),
)


def _model(model: str) -> list[JSON]:
    return cel(f'device.attributes["{DRIVER}"].model == "{model}"')



CASES = [
    # -- counting and selection
    Case("exact: one of two", TWO_GPUS, (devices(exactly()),)),
    Case("exact: two of three", _MODELS, (devices(exactly(count=2)),)),
    Case("exact: more than published", TWO_GPUS, (devices(exactly(count=3)),)),
    Case("all: every device", _MODELS, (devices(exactly(allocationMode="All")),)),
    Case("all: every selected device", _MODELS,
         (devices(exactly(allocationMode="All", selectors=_model("a"))),)),
    Case("selector: by attribute", _MODELS,
         (devices(exactly(selectors=_model("b"))),)),
    Case("selector: by class", _MODELS, (devices(exactly()),),
         classes=(device_class(CLASS, _model("b")[0]["cel"]["expression"]),)),
    Case("selector: capacity too small", ONE_GPU,
         (devices(exactly(capacity={"requests": {"memory": "80Gi"}})),)),
    Case("selector: capacity large enough", ONE_GPU,
         (devices(exactly(capacity={"requests": {"memory": "40Gi"}})),)),
    Case("prior: exclusive device taken", TWO_GPUS, (devices(exactly()), devices(exactly()))),
    Case("prior: every device taken", ONE_GPU, (devices(exactly()), devices(exactly()))),
    Case("prior: two requests in one claim", _MODELS,
         (devices(exactly("a"), exactly("b")), devices(exactly()))),
    # -- counters
    Case("counters: two partitions fill the set", _PARTITIONS,
         (devices(exactly()), devices(exactly()), devices(exactly()))),
    Case("counters: two partitions in one claim", _PARTITIONS, (devices(exactly(count=2)),)),
    Case("counters: three partitions in one claim", _PARTITIONS, (devices(exactly(count=3)),)),
    Case("counters: shared device consumes once for many shares", _SHARED_PARTITION,
         (devices(bandwidth("1G")), devices(bandwidth("1G")),
          devices(bandwidth("1G")))),
    Case("counters: shared device leaves too little for a partition", _SHARED_PARTITION,
         (devices(bandwidth("1G")), devices(exactly(selectors=_model("p"))))),
    Case("counters: partition leaves too little for a shared device", _SHARED_PARTITION,
         (devices(exactly(selectors=_model("p"))),
          devices(bandwidth("1G")))),
    Case("compat: another group waits although the counters have room", _COMPAT,
         (devices(exactly(selectors=_model("mig"))), devices(exactly(selectors=_model("ts"))))),
    Case("compat: a device in both groups joins either", _COMPAT,
         (devices(exactly(selectors=_model("mig"))),
          devices(exactly(selectors=_model("both"))))),
    Case("compat: the groups in common narrow", _COMPAT,
         (devices(exactly(selectors=_model("both"))), devices(exactly(selectors=_model("mig"))),
          devices(exactly(selectors=_model("ts"))))),
    Case("compat: a device in no group waits beside a grouped one", _COMPAT,
         (devices(exactly(selectors=_model("mig"))),
          devices(exactly(selectors=_model("plain"))))),
    Case("compat: one claim takes two of one group", _COMPAT,
         (devices(exactly(count=2, selectors=cel(
             f'device.attributes["{DRIVER}"].model in ["mig", "both"]'))),)),
    Case("counters: scope is the pool", (
        counter_slice("counters-a", ("cs", {"mem": "40Gi"}), pool="pool-a"),
        resource_slice("s-a", [partition("p-0", "40Gi")], pool="pool-a", count=2),
        counter_slice("counters-b", ("cs", {"mem": "40Gi"}), pool="pool-b"),
        resource_slice("s-b", [partition("p-0", "40Gi")], pool="pool-b", count=2),
    ), (devices(exactly()), devices(exactly()))),
    # -- consumable capacity and request policies
    Case("capacity: several, one without a policy", ONE_NIC, (devices(bandwidth("2G")),)),
    Case("capacity: no policy means all of it", ONE_NIC,
         (devices(bandwidth("1G")), devices(bandwidth("1G")))),
    Case("capacity: shares up to the total", (resource_slice("s", [bw_nic("nic-0")]),),
         (devices(bandwidth("3G")), devices(bandwidth("1G")))),
    Case("capacity: shares past the total", (resource_slice("s", [bw_nic("nic-0")]),),
         (devices(bandwidth("3G")), devices(bandwidth("2G")))),
    Case("capacity: two shares of one device in one claim", (resource_slice("s", [nic(
        "nic-0", capacity={"bw": {"value": "4G", "requestPolicy": {"default": "1G"}}})]),),
         (devices(exactly(count=2)),)),
    Case("policy: default when not requested", ONE_NIC, (devices(exactly()),)),
    Case("policy: rounds up to min", ONE_NIC, (devices(bandwidth("500M")),)),
    Case("policy: rounds up to a step", ONE_NIC, (devices(bandwidth("1500M")),)),
    Case("policy: at max", ONE_NIC, (devices(bandwidth("4G")),)),
    Case("policy: above max", ONE_NIC, (devices(bandwidth("5G")),)),
    Case("policy: step from min", (resource_slice("s", [nic("nic-0", {
        "default": "1500M", "validRange": {"min": "1500M", "step": "1G"}})]),),
         (devices(bandwidth("1600M")),)),
    Case("policy: valid values round up", (resource_slice("s", [nic("nic-0", {
        "default": "1G", "validValues": ["1G", "2G", "3500M"]})]),),
         (devices(bandwidth("2500M")),)),
    Case("policy: above every valid value", (resource_slice("s", [nic("nic-0", {
        "default": "1G", "validValues": ["1G", "2G"]})]),),
         (devices(bandwidth("3G")),)),
    # -- taints
    Case("taint: NoSchedule device passed over", (resource_slice(
        "s", [gpu("gpu-0", taints=[taint()]), gpu("gpu-1")]),), (devices(exactly()),)),
    Case("taint: NoSchedule, the only device", (resource_slice(
        "s", [gpu("gpu-0", taints=[taint()])]),), (devices(exactly()),)),
    Case("taint: NoSchedule tolerated", (resource_slice(
        "s", [gpu("gpu-0", taints=[taint()])]),), (devices(exactly(tolerations=TOLERATE)),)),
    Case("taint: NoExecute, the only device", (resource_slice(
        "s", [gpu("gpu-0", taints=[taint("NoExecute")])]),), (devices(exactly()),)),
    Case("taint: toleration for another key", (resource_slice(
        "s", [gpu("gpu-0", taints=[taint()])]),),
         (devices(exactly(tolerations=[{"key": "other", "operator": "Exists"}])),)),
    Case("taint rule: taints a device", TWO_GPUS, (devices(exactly()),),
         taint_rules=({"deviceSelector": {"driver": DRIVER, "pool": "pool-a",
                                          "device": "gpu-0"}, "taint": taint()},)),
    Case("taint rule: a pool-wide rule, tolerated", TWO_GPUS,
         (devices(exactly(tolerations=TOLERATE)),),
         taint_rules=({"deviceSelector": {"pool": "pool-a"}, "taint": taint()},)),
    Case("taint rule: a rule for another driver", TWO_GPUS, (devices(exactly()),),
         taint_rules=({"deviceSelector": {"driver": "other.example.com"},
                       "taint": taint()},)),
    # -- admin access
    Case("admin: device already used", ONE_GPU,
         (devices(exactly()), devices(exactly(adminAccess=True)))),
    Case("admin: shared device capacity used up", ONE_NIC,
         (devices(bandwidth("4G")), devices(bandwidth("4G", adminAccess=True)))),
    Case("admin: counters used up", _PARTITIONS,
         (devices(exactly()), devices(exactly()), devices(exactly(adminAccess=True)))),
    # -- list attributes (DRAListTypeAttributes)
    Case("list: matchAttribute on overlapping lists", _NUMA,
         (devices(exactly(count=2), constraints=[{"matchAttribute": f"{DRIVER}/numa"}]),)),
    Case("list: distinctAttribute on disjoint lists", _NUMA,
         (devices(exactly(count=2), constraints=[{"distinctAttribute": f"{DRIVER}/numa"}]),)),
    Case("list: matchAttribute over three", _NUMA,
         (devices(exactly(count=3), constraints=[{"matchAttribute": f"{DRIVER}/numa"}]),)),
    # -- prioritized lists and constraints
    Case("firstAvailable: first fits", _MODELS, (devices(
        {"name": "r", "firstAvailable": [sub("big", count=2), sub("small")]}),)),
    Case("firstAvailable: falls back", _MODELS, (devices(
        {"name": "r", "firstAvailable": [sub("big", count=4), sub("small", count=2)]}),)),
    Case("firstAvailable: none fits", TWO_GPUS, (devices(
        {"name": "r", "firstAvailable": [sub("big", count=4), sub("small", count=3)]}),)),
    Case("firstAvailable: constraint picks the alternative", _MODELS, (devices(
        exactly("a", selectors=_model("a")),
        {"name": "r", "firstAvailable": [sub("x", count=2), sub("y")]},
        constraints=[{"matchAttribute": f"{DRIVER}/model"}]),)),
    Case("matchAttribute: same model", _MODELS,
         (devices(exactly(count=2), constraints=[{"matchAttribute": f"{DRIVER}/model"}]),)),
    Case("matchAttribute: across requests", _MODELS, (devices(
        exactly("a", selectors=_model("a")), exactly("b"),
        constraints=[{"matchAttribute": f"{DRIVER}/model", "requests": ["a", "b"]}]),)),
    Case("matchAttribute: unsatisfiable", _MODELS,
         (devices(exactly(count=3), constraints=[{"matchAttribute": f"{DRIVER}/model"}]),)),
    Case("distinctAttribute: different models", _MODELS,
         (devices(exactly(count=2), constraints=[{"distinctAttribute": f"{DRIVER}/model"}]),)),
    Case("distinctAttribute: unsatisfiable", _MODELS,
         (devices(exactly(count=3), constraints=[{"distinctAttribute": f"{DRIVER}/model"}]),)),
    # -- known departures of the harness from k8s.io/dynamic-resource-allocation
    Case("all: a device short of capacity", (resource_slice("s", [
        bw_nic("nic-0"), bw_nic("nic-1", attributes={"model": {"string": "b"}})]),),
         (devices(bandwidth("3G", selectors=_model("b"))),
          devices(exactly(allocationMode="All", capacity={"requests": {"bw": "2G"}})))),
    Case("all: pool incomplete", (resource_slice("s", [gpu("gpu-0")], count=2),),
         (devices(exactly(allocationMode="All")),)),
    Case("all: another pool incomplete", (
        resource_slice("s", [gpu("gpu-0")]),
        resource_slice("t", [gpu("gpu-0")], pool="pool-b", count=2)),
         (devices(exactly(allocationMode="All")),)),
    Case("exact: pool incomplete", (resource_slice("s", [gpu("gpu-0")], count=2),),
         (devices(exactly()),)),
    Case("capacity name: qualified request, plain name published", ONE_GPU,
         (devices(exactly(capacity={"requests": {f"{DRIVER}/memory": "1Gi"}})),)),
    Case("capacity name: plain request, qualified name published",
         (resource_slice("s", [gpu("gpu-0", capacity={f"{DRIVER}/memory": {"value": "40Gi"}})]),),
         (devices(exactly(capacity={"requests": {"memory": "1Gi"}})),)),
    Case("pool: missing counter set", (
        counter_slice("counters", ("cs", {"mem": "80Gi"})),
        resource_slice("s", [gpu("gpu-0"), partition("p-0", "40Gi", "nope")], count=2)),
         (devices(exactly(selectors=_model("a"))),)),
    Case("pool: duplicate counter set", (
        counter_slice("counters", ("cs", {"mem": "80Gi"}), count=3),
        counter_slice("counters-2", ("cs", {"mem": "80Gi"}), count=3),
        resource_slice("s", [gpu("gpu-0")], count=3)),
         (devices(exactly()),)),
    Case("pool: duplicate device name", (
        resource_slice("s", [gpu("gpu-0")], count=2),
        resource_slice("t", [gpu("gpu-0"), gpu("gpu-1")], count=2)),
         (devices(exactly()),)),
    Case("existing: exclusive result on a device now shared", ONE_GPU,
         (devices(exactly()), devices(exactly())),
         republished=(resource_slice("s", [nic("gpu-0")], generation=2),)),
    Case("existing: shared result on a device now exclusive", ONE_NIC,
         (devices(exactly()), devices(exactly())),
         republished=(resource_slice("s", [gpu("nic-0")], generation=2),)),
]
CORPUS = {case.name: case for case in CASES}
assert len(CORPUS) == len(CASES), "case names must be unique"
