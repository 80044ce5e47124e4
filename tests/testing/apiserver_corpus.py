"""A corpus of valid and invalid ResourceSlices, ResourceClaims, ResourceClaimTemplates and
DeviceClasses, with the verdicts a real kube-apiserver gave for each.

The verdicts (HTTP status and, for a 422, the rejected field paths) were recorded from a
real kube-apiserver (the version is in the verdicts file) with
`python -m tests.e2e.test_apiserver_differential --record`. Two suites use this corpus:
the fast `tests/testing/test_apiserver_corpus.py` checks our API stand-in against the
recorded answers, and the e2e differential re-asks a live real server, so a change in
either shows up.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JSON = dict[str, Any]
# One file of recorded verdicts per Kubernetes minor release (`1.37.json`): releases
# validate differently, so each is held to its own answers.
VERDICTS_DIR = Path(__file__).with_name("apiserver_verdicts")
# The release whose answers the stand-in gives: the e2e's default (tests/e2e/go.mod pins it).
MODELLED_RELEASE = "1.37"
CLASS_NAME = "gpu.dra.example.com"
PATHS = {
    "ResourceSlice": "/apis/resource.k8s.io/v1/resourceslices",
    "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
    "ResourceClaim": "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims",
    "ResourceClaimTemplate": "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates",
}


@dataclass(frozen=True)
class Verdict:
    """A server's answer to one create: the HTTP status and, if rejected, the field paths."""

    code: int
    fields: tuple[str, ...] = ()

    @property
    def accepted(self) -> bool:
        """True for a 2xx answer."""
        return self.code < 300

    def __str__(self) -> str:
        return f"{self.code} {list(self.fields)}" if self.fields else str(self.code)


@dataclass(frozen=True)
class Case:
    """One object to create, and where our stand-in knowingly answers otherwise, why."""

    name: str
    build: Callable[[], JSON]
    # The stand-in's own answer where it deliberately differs from the real server.
    stand_in: Verdict | None = None
    why: str = ""


def disagreement(real: Verdict, ours: Verdict) -> str | None:
    """Why `ours` does not match `real` (None when it does).

    Both must accept, or both reject with the same status (400 for a body that fails to
    decode, 422 for an invalid object) and, for a 422, name the same fields.
    """
    if real.accepted and ours.accepted:
        return None
    if (real.code, real.fields) != (ours.code, ours.fields):
        return f"real server {real}, stand-in {ours}"
    return None


def expected_stand_in(case: Case, real: Verdict) -> str | None:
    """Why the stand-in's answer is wrong for `case` given the real server's, else None."""
    return None if case.stand_in is None else f"stand-in should answer {case.stand_in} ({real})"


def minor_of(version: str) -> str:
    """'1.37' for 'v1.37.2' or '1.37.2'."""
    return ".".join(version.lstrip("v").split(".")[:2])


def verdicts_file(release: str = MODELLED_RELEASE) -> Path:
    """Where the verdicts of `release` (a version or a minor) are recorded."""
    return VERDICTS_DIR / f"{minor_of(release)}.json"


def load_verdicts(release: str = MODELLED_RELEASE) -> tuple[str, dict[str, Verdict]]:
    """(server version, case name -> the real server's recorded verdict) for `release`."""
    data = json.loads(verdicts_file(release).read_text())
    verdicts = {
        name: Verdict(int(v["code"]), tuple(v.get("fields", ())))
        for name, v in data["cases"].items()
    }
    return str(data["server"]), verdicts


def save_verdicts(server: str, verdicts: dict[str, Verdict]) -> None:
    """Write recorded verdicts: sorted by case name, one case a line."""
    lines = []
    for name in sorted(verdicts):
        v = verdicts[name]
        entry = {"code": v.code, **({"fields": list(v.fields)} if v.fields else {})}
        lines.append(f"  {json.dumps(name)}: {json.dumps(entry)}")
    body = ",\n".join(lines)
    text = f'{{"server": {json.dumps(server)}, "cases": {{\n{body}\n}}}}\n'
    verdicts_file(server).write_text(text)


def verdict_of(code: int, status: JSON) -> Verdict:
    """The Verdict of an HTTP answer (`status` the Status body of a rejection)."""
    if code != 422:
        return Verdict(code)
    causes = (status.get("details") or {}).get("causes") or []
    return Verdict(code, tuple(sorted({str(c.get("field", "")) for c in causes})))


def body_of(case: Case) -> JSON:
    """The object of `case` ready to POST: unset (None) spec fields dropped, unique name."""
    obj = case.build()
    if isinstance(obj.get("spec"), dict):
        obj["spec"] = {k: v for k, v in obj["spec"].items() if v is not None}
    obj["metadata"]["name"] = f"{obj['metadata']['name']}-{zlib.crc32(case.name.encode())}"
    return obj


# --- builders ---------------------------------------------------------------------------


def _slice(**spec: Any) -> JSON:
    base: JSON = {
        "driver": "dra.example.com",
        "nodeName": "e2e-gpu",
        "pool": {"name": "pool-a", "generation": 1, "resourceSliceCount": 1},
        "devices": [
            {
                "name": "gpu-0",
                "attributes": {"type": {"string": "gpu"}},
                "capacity": {"memory": {"value": "80Gi"}},
            }
        ],
    }
    base.update(spec)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": base,
    }


def _device(**fields: Any) -> JSON:
    device: JSON = {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}}
    device.update(fields)
    return device


def _shared_nic(policy: JSON) -> JSON:
    return _device(
        name="nic-0",
        allowMultipleAllocations=True,
        capacity={"bandwidth": {"value": "10G", "requestPolicy": policy}},
    )


def _class(*expressions: str, name: str = "c", **spec: Any) -> JSON:
    if not expressions:
        expressions = ('device.driver == "dra.example.com"',)
    selectors = [{"cel": {"expression": e}} for e in expressions]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": selectors, **spec},
    }


def _request(name: str = "gpu", **exactly: Any) -> JSON:
    return {"name": name, "exactly": {"deviceClassName": CLASS_NAME, **exactly}}


def _sub(name: str, **fields: Any) -> JSON:
    return {"name": name, "deviceClassName": CLASS_NAME, **fields}


def _claim(*requests: JSON, **devices: Any) -> JSON:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": {"requests": list(requests) or [_request()], **devices}},
    }


def _template(*requests: JSON, **devices: Any) -> JSON:
    spec = _claim(*requests, **devices)["spec"]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "default"},
        "spec": {"spec": spec},
    }


def _cel(expression: str) -> list[JSON]:
    return [{"cel": {"expression": expression}}]


def _opaque(driver: str = "dra.example.com", parameters: Any = None, **extra: Any) -> JSON:
    opaque = {"driver": driver, "parameters": {"a": 1} if parameters is None else parameters}
    return {"opaque": opaque, **extra}


def _gpu_pair() -> list[JSON]:
    return [_request("a"), _request("b")]


_TYPE_ERRORS = (
    "the stand-in reports a value of the wrong JSON type as 422 Invalid naming the field; "
    "a real server fails to decode the body: 400 BadRequest"
)
_QUALIFIED = "dra.example.com/model"
_GOOD_CEL = 'device.attributes["dra.example.com"].model == "x"'


def _cases() -> list[Case]:
    slices = [
        Case("slice: valid", lambda: _slice()),
        Case("slice: device name not a DNS label", lambda: _slice(devices=[_device(name="GPU_0")])),
        Case("slice: no driver", lambda: _slice(driver="")),
        Case("slice: bad driver name", lambda: _slice(driver="Not A Domain")),
        Case(
            "slice: bad pool name",
            lambda: _slice(pool={"name": "Pool!", "generation": 1, "resourceSliceCount": 1}),
        ),
        Case(
            "slice: zero resourceSliceCount",
            lambda: _slice(pool={"name": "p", "generation": 1, "resourceSliceCount": 0}),
        ),
        Case(
            "slice: negative generation",
            lambda: _slice(pool={"name": "p", "generation": -1, "resourceSliceCount": 1}),
        ),
        Case("slice: nodeName and allNodes", lambda: _slice(allNodes=True)),
        Case("slice: no node selection", lambda: _slice(nodeName=None)),
        Case("slice: duplicate device names", lambda: _slice(devices=[_device(), _device()])),
        Case(
            "slice: 129 devices",
            lambda: _slice(devices=[_device(name=f"d-{i}") for i in range(129)]),
        ),
        Case(
            "slice: attribute with two values",
            lambda: _slice(devices=[_device(attributes={"type": {"string": "gpu", "int": 1}})]),
        ),
        Case(
            "slice: attribute with no value",
            lambda: _slice(devices=[_device(attributes={"x": {}})]),
        ),
        Case(
            "slice: bad version attribute",
            lambda: _slice(devices=[_device(attributes={"v": {"version": "1.0"}})]),
        ),
        Case(
            "slice: bad attribute name",
            lambda: _slice(devices=[_device(attributes={"bad name": {"string": "x"}})]),
        ),
        Case(
            "slice: string attribute too long",
            lambda: _slice(devices=[_device(attributes={"s": {"string": "x" * 65}})]),
        ),
        Case(
            "slice: taint with bad effect",
            lambda: _slice(
                devices=[_device(taints=[{"key": "k", "value": "v", "effect": "Sometimes"}])]
            ),
        ),
        Case(
            "slice: valid taint",
            lambda: _slice(
                devices=[
                    _device(
                        taints=[
                            {
                                "key": "dra.example.com/unhealthy",
                                "value": "true",
                                "effect": "NoSchedule",
                            }
                        ]
                    )
                ]
            ),
        ),
        Case(
            "slice: shared device valid policy",
            lambda: _slice(
                devices=[_shared_nic({"default": "1M", "validRange": {"min": "1M", "step": "8"}})]
            ),
        ),
        Case(
            "slice: policy default below min",
            lambda: _slice(
                devices=[_shared_nic({"default": "1k", "validRange": {"min": "1M", "step": "8"}})]
            ),
        ),
        Case(
            "slice: policy default above max",
            lambda: _slice(
                devices=[_shared_nic({"default": "5G", "validRange": {"min": "1M", "max": "2G"}})]
            ),
        ),
        Case(
            "slice: policy with range and values",
            lambda: _slice(
                devices=[
                    _shared_nic(
                        {"default": "1M", "validRange": {"min": "1M"}, "validValues": ["1M"]}
                    )
                ]
            ),
        ),
        Case(
            "slice: counters and devices together",
            lambda: _slice(
                sharedCounters=[{"name": "cs", "counters": {"memory": {"value": "1Gi"}}}]
            ),
        ),
        Case(
            "slice: counters only",
            lambda: _slice(
                devices=None,
                sharedCounters=[{"name": "cs", "counters": {"memory": {"value": "1Gi"}}}],
            ),
        ),
        Case(
            "slice: bad capacity quantity",
            lambda: _slice(devices=[_device(capacity={"memory": {"value": "lots"}})]),
        ),
        Case(
            "slice: generation not a number",
            lambda: _slice(pool={"name": "p", "generation": "one", "resourceSliceCount": 1}),
            stand_in=Verdict(422, ("spec.pool.generation",)),
            why=_TYPE_ERRORS,
        ),
        Case(
            "slice: unknown field",
            lambda: _slice(colour="blue"),
            stand_in=Verdict(422, ("spec.colour",)),
            why="the stand-in reports unknown fields as 422 Invalid, whatever fieldValidation "
            "asks; a real server answers 400 (Strict) or drops them with a warning",
        ),
    ]
    return (slices + _list_attribute_cases() + _fractional_cases() + _node_allocatable_cases()
            + _class_cases() + _claim_cases() + _template_cases())


def _listed(**attributes: JSON) -> JSON:
    return _slice(devices=[_device(attributes={"type": {"string": "nic"}, **attributes})])


def _list_attribute_cases() -> list[Case]:
    """DRAListTypeAttributes (alpha 1.36; on in the e2e): list-valued attributes."""
    return [
        Case("slice: list attributes of every kind", lambda: _listed(
            ports={"ints": [1, 3]}, up={"bools": [True, False]}, names={"strings": ["a", "b"]},
            fw={"versions": ["1.0.0", "2.1.0-rc.1"]})),
        Case("slice: standard numaNode as a list", lambda: _listed(
            **{"resource.kubernetes.io/numaNode": {"ints": [2, 3]}})),
        Case("slice: empty int list", lambda: _listed(ports={"ints": []})),
        Case("slice: scalar and list in one attribute",
             lambda: _listed(ports={"int": 1, "ints": [1]})),
        Case("slice: bad semver in a version list",
             lambda: _listed(fw={"versions": ["1.0.0", "1.0"]})),
        Case("slice: string list item too long",
             lambda: _listed(names={"strings": ["ok", "x" * 65]})),
        Case("slice: 49 attribute values",
             lambda: _listed(ports={"ints": list(range(48))})),
        Case("slice: 48 attribute values",
             lambda: _listed(ports={"ints": list(range(47))})),
    ]


def _gpu_share(policy: JSON, value: str = "1") -> JSON:
    capacity = {"compute": {"value": value, "requestPolicy": policy}}
    return _slice(devices=[_device(allowMultipleAllocations=True, capacity=capacity)])


def _fractional_cases() -> list[Case]:
    """DRAFractionalCapacityRange (beta 1.37, on): milli-unit request policy ranges."""
    milli = {"min": "100m", "step": "50m"}
    return [
        Case("slice: fractional range", lambda: _gpu_share(
            {"default": "100m", "validRange": {**milli, "max": "900m"}})),
        Case("slice: fractional default off the step",
             lambda: _gpu_share({"default": "125m", "validRange": milli})),
        Case("slice: fractional max off the step", lambda: _gpu_share(
            {"default": "100m", "validRange": {**milli, "max": "975m"}})),
        Case("slice: step finer than a milli", lambda: _gpu_share(
            {"default": "100m", "validRange": {"min": "100m", "step": "500u"}})),
        Case("slice: fractional default of an integer range", lambda: _gpu_share(
            {"default": "1500m", "validRange": {"min": "1", "step": "1"}}, value="4")),
        Case("slice: fractional range without step", lambda: _gpu_share(
            {"default": "250m", "validRange": {"min": "100m", "max": "900m"}})),
        Case("slice: fractional valid values", lambda: _gpu_share(
            {"default": "250m", "validValues": ["250m", "500m", "1"]})),
        Case("slice: valid values 1 and 1000m", lambda: _gpu_share(
            {"default": "1", "validValues": ["1", "1000m"]}, value="2")),
        Case("slice: negative min with a step", lambda: _gpu_share(
            {"default": "0", "validRange": {"min": "-1", "step": "1"}}, value="4")),
    ]


def _cpus(resources: JSON) -> JSON:
    """A slice of one shared CPU device whose `cpus` have these node-allocatable mappings."""
    return _slice(devices=[_device(
        name="cpu-0", allowMultipleAllocations=True,
        capacity={"cpus": {"value": "32"}}, nodeAllocatableResources=resources)])


_NODE_FEATURES = (
    "kube-apiserver's NodeDeclaredFeatures admission forbids (403) a valid slice with "
    "nodeAllocatableResources unless its node exists and declares the feature "
    "DRANodeAllocatableResources (the recording cluster has no node); the stand-in has "
    "no node features and admits it")


def _node_allocatable_cases() -> list[Case]:
    """KEP-5517 (DRANodeAllocatableResources, on in the e2e's servers): 1.37's shape."""
    mapped = {"capacityKey": "cpus", "capacityMultiplier": "1"}
    return [
        Case("slice: cpus mapped to node cpu", lambda: _cpus({"cpu": {"mapping": mapped}}),
             stand_in=Verdict(201), why=_NODE_FEATURES),
        Case("slice: node allocatable overhead only",
             lambda: _cpus({"memory": {"overhead": {"perPod": "1Gi", "perContainer": "0"}}}),
             stand_in=Verdict(201), why=_NODE_FEATURES),
        Case("slice: node allocatable extended resource",
             lambda: _cpus({"example.com/cores": {"mapping": mapped}})),
        Case("slice: node allocatable neither mapping nor overhead", lambda: _cpus({"cpu": {}})),
        Case("slice: node allocatable key not a capacity",
             lambda: _cpus({"cpu": {"mapping": {"capacityKey": "cores",
                                                "capacityMultiplier": "1"}}})),
        Case("slice: node allocatable key without multiplier",
             lambda: _cpus({"cpu": {"mapping": {"capacityKey": "cpus"}}})),
        Case("slice: node allocatable capacity and device counts",
             lambda: _cpus({"cpu": {"mapping": {**mapped, "deviceMultiplier": "1"}}})),
        Case("slice: node allocatable empty mapping", lambda: _cpus({"cpu": {"mapping": {}}})),
        Case("slice: node allocatable zero multiplier",
             lambda: _cpus({"cpu": {"mapping": {"deviceMultiplier": "0"}}})),
        Case("slice: node allocatable negative overhead",
             lambda: _cpus({"memory": {"overhead": {"perPod": "-1Gi"}}})),
    ]


def _class_cases() -> list[Case]:
    return [
        Case("class: valid", lambda: _class()),
        Case("class: valid attribute selector", lambda: _class(_GOOD_CEL)),
        Case(
            "class: valid capacity comparison",
            lambda: _class(
                'device.capacity["dra.example.com"].memory.compareTo(quantity("1Gi")) >= 0'
            ),
        ),
        Case(
            "class: valid in and logic",
            lambda: _class(
                '"gpu" in device.attributes["dra.example.com"] && !device.allowMultipleAllocations'
            ),
        ),
        Case("class: no selectors", lambda: _class() | {"spec": {}}),
        Case("class: CEL syntax error", lambda: _class("device.driver ==")),
        Case("class: CEL unknown field", lambda: _class("device.colour == 1")),
        Case("class: CEL unknown variable", lambda: _class('colour == "red"')),
        Case("class: CEL not boolean", lambda: _class("device.driver")),
        Case("class: CEL int result", lambda: _class("1 + 2")),
        Case("class: CEL map result", lambda: _class('device.attributes["dra.example.com"]')),
        Case("class: CEL compares string with int", lambda: _class("device.driver == 1")),
        Case("class: CEL int equals double", lambda: _class("1 == 1.0")),
        Case("class: CEL field of a string", lambda: _class("device.driver.x == 1")),
        Case(
            "class: CEL bool compared with string",
            lambda: _class('device.allowMultipleAllocations == "true"'),
        ),
        Case("class: CEL in on a string", lambda: _class('device.driver in "abc"')),
        Case("class: CEL quantity of an int", lambda: _class('quantity(1) == quantity("1")')),
        Case(
            "class: CEL iterates an attribute",
            lambda: _class('device.attributes["dra.example.com"].ids.exists(i, i > 1)'),
        ),
        Case("class: CEL ternary to int", lambda: _class('device.driver == "a" ? 1 : 2')),
        Case(
            "class: CEL quantity result",
            lambda: _class('device.capacity["dra.example.com"].memory'),
        ),
        Case(
            "class: CEL attribute result",
            lambda: _class('device.attributes["dra.example.com"].healthy'),
        ),
        Case(
            "class: CEL has and matches",
            lambda: _class(
                'has(device.attributes["dra.example.com"].model) && '
                'device.attributes["dra.example.com"].model.matches("^sim-")'
            ),
        ),
        Case("class: CEL empty expression", lambda: _class("")),
        Case("class: CEL too long", lambda: _class(" || ".join(["true"] * 1500))),
        Case("class: second selector bad", lambda: _class("true", "device.driver")),
        Case("class: selector without cel", lambda: _class() | {"spec": {"selectors": [{}]}}),
        Case("class: 33 selectors", lambda: _class(*["true"] * 33)),
        Case("class: 32 selectors", lambda: _class(*["true"] * 32)),
        Case("class: bad name", lambda: _class(name="Bad_Name")),
        Case("class: valid config", lambda: _class(config=[_opaque()])),
        Case("class: config without opaque", lambda: _class(config=[{}])),
        Case("class: config bad driver", lambda: _class(config=[_opaque("Not A Driver")])),
        Case(
            "class: config parameters not an object",
            lambda: _class(config=[_opaque(parameters=[1])]),
        ),
        Case(
            "class: config null parameters",
            lambda: _class(config=[{"opaque": {"driver": "dra.example.com", "parameters": None}}]),
        ),
        Case(
            "class: config parameters too large",
            lambda: _class(config=[_opaque(parameters={"x": "y" * 10240})]),
        ),
        Case("class: 33 configs", lambda: _class(config=[_opaque()] * 33)),
        Case(
            "class: valid extendedResourceName",
            lambda: _class(extendedResourceName="example.com/gpu"),
        ),
        Case(
            "class: extendedResourceName without domain", lambda: _class(extendedResourceName="gpu")
        ),
        Case(
            "class: extendedResourceName in kubernetes.io",
            lambda: _class(extendedResourceName="kubernetes.io/gpu"),
        ),
        Case(
            "class: extendedResourceName bad name",
            lambda: _class(extendedResourceName="example.com/bad name"),
        ),
    ]


def _claim_cases() -> list[Case]:
    return [
        Case("claim: valid", lambda: _claim()),
        Case("claim: bad request name", lambda: _claim(_request(name="GPU!"))),
        Case("claim: request name too long", lambda: _claim(_request(name="g" * 64))),
        Case("claim: duplicate request names", lambda: _claim(_request(), _request())),
        Case("claim: 33 requests", lambda: _claim(*[_request(f"r{i}") for i in range(33)])),
        Case("claim: 32 requests", lambda: _claim(*[_request(f"r{i}") for i in range(32)])),
        Case("claim: no requests", lambda: _claim() | {"spec": {"devices": {}}}),
        Case("claim: neither exactly nor firstAvailable", lambda: _claim({"name": "gpu"})),
        Case(
            "claim: exactly and firstAvailable",
            lambda: _claim({**_request(), "firstAvailable": [_sub("a")]}),
        ),
        Case("claim: no class name", lambda: _claim({"name": "gpu", "exactly": {}})),
        Case("claim: empty class name", lambda: _claim(_request(deviceClassName=""))),
        Case("claim: bad class name", lambda: _claim(_request(deviceClassName="Bad_Class"))),
        Case("claim: zero count", lambda: _claim(_request(count=0))),
        Case("claim: negative count", lambda: _claim(_request(count=-1))),
        Case("claim: count 3", lambda: _claim(_request(count=3))),
        Case("claim: mode All", lambda: _claim(_request(allocationMode="All"))),
        Case("claim: unknown allocation mode", lambda: _claim(_request(allocationMode="Some"))),
        Case("claim: count with mode All", lambda: _claim(_request(allocationMode="All", count=2))),
        Case("claim: valid selector", lambda: _claim(_request(selectors=_cel(_GOOD_CEL)))),
        Case(
            "claim: bad CEL selector", lambda: _claim(_request(selectors=_cel("device.driver ===")))
        ),
        Case(
            "claim: CEL selector not boolean",
            lambda: _claim(_request(selectors=_cel("device.driver"))),
        ),
        Case(
            "claim: CEL unknown device field",
            lambda: _claim(_request(selectors=_cel("device.colour"))),
        ),
        Case("claim: selector without cel", lambda: _claim(_request(selectors=[{}]))),
        Case("claim: 33 selectors", lambda: _claim(_request(selectors=_cel("true") * 33))),
        Case(
            "claim: capacity request",
            lambda: _claim(_request(capacity={"requests": {"bandwidth": "1G"}})),
        ),
        Case(
            "claim: qualified capacity request",
            lambda: _claim(_request(capacity={"requests": {"dra.example.com/bandwidth": "1G"}})),
        ),
        Case(
            "claim: bad capacity name",
            lambda: _claim(_request(capacity={"requests": {"bad name": "1G"}})),
        ),
        # 1.38 checks a request's capacity names (validateCapacityNames), at most
        # MaxCapacityRequirements (32) of them and no negative amount; 1.37 took them all.
        Case(
            "claim: 33 capacity requests",
            lambda: _claim(_request(capacity={"requests": {f"c{i}": "1" for i in range(33)}})),
        ),
        Case(
            "claim: negative capacity request",
            lambda: _claim(_request(capacity={"requests": {"bandwidth": "-1G"}})),
        ),
        Case(
            "claim: bad capacity quantity",
            lambda: _claim(_request(capacity={"requests": {"bandwidth": "lots"}})),
        ),
        Case(
            "claim: adminAccess",
            lambda: _claim(_request(adminAccess=True)),
            stand_in=Verdict(201),
            why="a real server allows adminAccess only in a namespace labelled "
            "resource.kubernetes.io/admin-access=true; the stand-in serves no Namespaces, "
            "so it cannot look, and allows it everywhere",
        ),
        Case(
            "claim: valid tolerations",
            lambda: _claim(
                _request(
                    tolerations=[
                        {
                            "key": "dra.example.com/unhealthy",
                            "operator": "Exists",
                            "effect": "NoSchedule",
                        },
                        {"key": "k", "operator": "Equal", "value": "v"},
                        {"operator": "Exists", "tolerationSeconds": 30, "effect": "NoExecute"},
                    ]
                )
            ),
        ),
        Case(
            "claim: toleration bad operator",
            lambda: _claim(_request(tolerations=[{"key": "k", "operator": "Sometimes"}])),
        ),
        Case(
            "claim: toleration Exists with value",
            lambda: _claim(
                _request(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}])
            ),
        ),
        Case(
            "claim: toleration bad key",
            lambda: _claim(_request(tolerations=[{"key": "bad key!", "operator": "Exists"}])),
        ),
        Case(
            "claim: toleration bad value",
            lambda: _claim(_request(tolerations=[{"key": "k", "value": "bad value!"}])),
        ),
        Case(
            "claim: toleration bad effect",
            lambda: _claim(
                _request(tolerations=[{"key": "k", "operator": "Exists", "effect": "Maybe"}])
            ),
        ),
        Case(
            "claim: firstAvailable",
            lambda: _claim({"name": "gpu", "firstAvailable": [_sub("big"), _sub("small")]}),
        ),
        Case(
            "claim: firstAvailable 9 subrequests",
            lambda: _claim({"name": "gpu", "firstAvailable": [_sub(f"s{i}") for i in range(9)]}),
        ),
        Case(
            "claim: firstAvailable 8 subrequests",
            lambda: _claim({"name": "gpu", "firstAvailable": [_sub(f"s{i}") for i in range(8)]}),
        ),
        Case(
            "claim: firstAvailable duplicate names",
            lambda: _claim({"name": "gpu", "firstAvailable": [_sub("a"), _sub("a")]}),
        ),
        Case(
            "claim: firstAvailable bad name",
            lambda: _claim({"name": "gpu", "firstAvailable": [_sub("A_1")]}),
        ),
        Case(
            "claim: firstAvailable no class name",
            lambda: _claim({"name": "gpu", "firstAvailable": [{"name": "a"}]}),
        ),
        Case(
            "claim: firstAvailable count with mode All",
            lambda: _claim(
                {"name": "gpu", "firstAvailable": [_sub("a", allocationMode="All", count=1)]}
            ),
        ),
        Case(
            "claim: firstAvailable bad selector",
            lambda: _claim({"name": "gpu", "firstAvailable": [_sub("a", selectors=_cel("1"))]}),
        ),
        Case(
            "claim: firstAvailable bad toleration",
            lambda: _claim(
                {"name": "gpu", "firstAvailable": [_sub("a", tolerations=[{"operator": "No"}])]}
            ),
        ),
        Case(
            "claim: valid constraint",
            lambda: _claim(
                *_gpu_pair(), constraints=[{"requests": ["a", "b"], "matchAttribute": _QUALIFIED}]
            ),
        ),
        Case(
            "claim: constraint on all requests",
            lambda: _claim(*_gpu_pair(), constraints=[{"distinctAttribute": _QUALIFIED}]),
        ),
        Case(
            "claim: constraint unknown request",
            lambda: _claim(constraints=[{"requests": ["nope"], "matchAttribute": _QUALIFIED}]),
        ),
        Case(
            "claim: constraint duplicate request",
            lambda: _claim(
                constraints=[{"requests": ["gpu", "gpu"], "matchAttribute": _QUALIFIED}]
            ),
        ),
        Case(
            "claim: constraint unqualified attribute",
            lambda: _claim(constraints=[{"matchAttribute": "model"}]),
        ),
        Case(
            "claim: constraint without attribute",
            lambda: _claim(constraints=[{"requests": ["gpu"]}]),
        ),
        Case(
            "claim: constraint on subrequest",
            lambda: _claim(
                {"name": "gpu", "firstAvailable": [_sub("big"), _sub("small")]},
                constraints=[{"requests": ["gpu/big"], "matchAttribute": _QUALIFIED}],
            ),
        ),
        Case(
            "claim: constraint unknown subrequest",
            lambda: _claim(
                {"name": "gpu", "firstAvailable": [_sub("big")]},
                constraints=[{"requests": ["gpu/nope"], "matchAttribute": _QUALIFIED}],
            ),
        ),
        Case(
            "claim: constraint three segments",
            lambda: _claim(constraints=[{"requests": ["gpu/a/b"], "matchAttribute": _QUALIFIED}]),
        ),
        Case(
            "claim: 33 constraints",
            lambda: _claim(constraints=[{"matchAttribute": _QUALIFIED}] * 33),
        ),
        Case("claim: valid config", lambda: _claim(config=[_opaque(requests=["gpu"])])),
        Case("claim: config unknown request", lambda: _claim(config=[_opaque(requests=["x"])])),
        Case("claim: config without opaque", lambda: _claim(config=[{"requests": ["gpu"]}])),
        Case("claim: config bad driver", lambda: _claim(config=[_opaque("Bad Driver")])),
        Case("claim: config parameters a string", lambda: _claim(config=[_opaque(parameters="x")])),
        Case("claim: 33 configs", lambda: _claim(config=[_opaque()] * 33)),
        Case(
            "claim: count not a number",
            lambda: _claim(_request(count="two")),
            stand_in=Verdict(422, ("spec.devices.requests[0].exactly.count",)),
            why=_TYPE_ERRORS,
        ),
    ]


def _template_cases() -> list[Case]:
    return [
        Case("template: valid", lambda: _template()),
        Case("template: bad request name", lambda: _template(_request(name="GPU!"))),
        Case(
            "template: exactly and firstAvailable",
            lambda: _template({**_request(), "firstAvailable": [_sub("a")]}),
        ),
        Case(
            "template: bad CEL selector",
            lambda: _template(_request(selectors=_cel("device.driver"))),
        ),
        Case(
            "template: constraint unknown request",
            lambda: _template(constraints=[{"requests": ["nope"], "matchAttribute": _QUALIFIED}]),
        ),
        Case(
            "template: bad capacity quantity",
            lambda: _template(_request(capacity={"requests": {"bandwidth": "lots"}})),
        ),
    ]


def _partition(groups: Any = None, **attributes: Any) -> JSON:
    """A partition that consumes a counter set (defined in another slice of the pool)."""
    consumption: JSON = {"counterSet": "gpu-0-counters",
                         "counters": {"memory": {"value": "10Gi"}}}
    if groups is not None:
        consumption["compatibilityGroups"] = groups
    return _device(name="gpu-0-1g-0",
                   attributes={"type": {"string": "gpu"}, **attributes},
                   consumesCounters=[consumption])


_PROFILE = {"profile": {"string": "1g.10gb"}}
_PTYPE = "dra.example.com/profile"


def _cases_1_37() -> list[Case]:
    """The 1.37 alpha fields (the e2e's servers have their gates on)."""
    return [
        Case("slice: skipNodeOperations all", lambda: _slice(skipNodeOperations=["*"])),
        Case("slice: skipNodeOperations prepare and unprepare", lambda: _slice(
            skipNodeOperations=["NodePrepareResources", "NodeUnprepareResources"])),
        Case("slice: skipNodeOperations prepare alone",
             lambda: _slice(skipNodeOperations=["NodePrepareResources"])),
        Case("slice: skipNodeOperations unknown operation",
             lambda: _slice(skipNodeOperations=["NodeUnprepareResources", "Attach"])),
        Case("slice: skipNodeOperations twice",
             lambda: _slice(skipNodeOperations=["*", "*"])),
        Case("slice: compatibilityGroups two",
             lambda: _slice(devices=[_partition(["mig", "time-sliced"])])),
        Case("slice: compatibilityGroups three",
             lambda: _slice(devices=[_partition(["a", "b", "c"])])),
        Case("slice: compatibilityGroups repeated",
             lambda: _slice(devices=[_partition(["mig", "mig"])])),
        Case("slice: compatibilityGroups not a DNS label",
             lambda: _slice(devices=[_partition(["Time_Sliced"])])),
        Case("slice: partitionTypeAttribute on partitions",
             lambda: _slice(devices=[_partition(**_PROFILE)], partitionTypeAttribute=_PTYPE)),
        Case("slice: partitionTypeAttribute without counter consumers",
             lambda: _slice(partitionTypeAttribute=_PTYPE)),
        Case("slice: partitionTypeAttribute without a domain",
             lambda: _slice(devices=[_partition(**_PROFILE)], partitionTypeAttribute="profile")),
        Case("slice: partitionTypeAttribute a partition lacks",
             lambda: _slice(devices=[_partition()], partitionTypeAttribute=_PTYPE)),
        Case("slice: partitionTypeAttribute not a string", lambda: _slice(
            devices=[_partition(profile={"int": 1})], partitionTypeAttribute=_PTYPE)),
    ]


CORPUS: dict[str, Case] = {case.name: case for case in (*_cases(), *_cases_1_37())}
