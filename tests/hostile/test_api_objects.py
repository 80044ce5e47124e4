"""What the plugin reads from the API server and the kubelet: ResourceClaims (anyone who
can create a claim writes most of one), error bodies, the publisher's ResourceSlices
from lists and watches, and the kubelet's PodResources answer. Whatever they hold, the
readers give a result or their own one-line error, never another exception."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from simdra._driver.claims.plan.allocation import parse_claim
from simdra._driver.claims.source import names_missing_claim
from simdra._driver.claims.types import ClaimError, ClaimRef
from simdra._driver.core.textlimits import ERROR_LIMIT, value_depth
from simdra._driver.kubelet.gen import podresources_v1_pb2 as pb
from simdra._driver.kubelet.pod_resources import usage_of
from simdra._driver.slices.observed import SliceCache
from tests.claims.builders import DRIVER, SHARE_1, claim, fixture_claim, result

from .strategies import (
    PATHS,
    assert_one_line,
    hostile_text,
    json_values,
    mutated,
    to_json_bytes,
    utf8_text,
)

A = "aaaaaaaa-0000-4000-8000-000000000001"
CLAIM = claim(A, [result("gpus", "gpu-0"),
                  result("net", "nic-0", share=SHARE_1, consumed={"bandwidth": "1M"}, admin=False),
                  result("other", "x", driver="other.example.com")],
              config=[{"source": "FromClaim", "requests": ["gpus"], "opaque": {
                  "driver": DRIVER, "parameters": {"kind": "GpuConfig"}}}])
CLAIM["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
EVERY_FIELD = fixture_claim()

_FIELDS = [("metadata", "namespace"), ("metadata", "name"), ("metadata", "uid"),
           ("status", "allocation", "devices", "results", 0, "request"),
           ("status", "allocation", "devices", "results", 0, "pool"),
           ("status", "allocation", "devices", "results", 1, "shareID"),
           ("status", "allocation", "devices", "results", 1, "consumedCapacity"),
           ("status", "allocation", "devices", "config", 0, "source")]


@st.composite
def _named(draw: st.DrawFn) -> dict[str, Any]:
    """The claim with hostile text where names and amounts go."""
    raw = copy.deepcopy(CLAIM)
    *parents, key = draw(st.sampled_from(_FIELDS))
    target = raw
    for parent in parents:
        target = target[parent]
    text = draw(hostile_text)
    target[key] = {text: draw(st.sampled_from(["-1", text, "1e999999"]))} if (
        key == "consumedCapacity") else text
    return raw


claims = st.one_of(
    _named(),
    mutated(CLAIM, 4),
    mutated(EVERY_FIELD, 4),
    json_values(),
)


@given(raw=claims, expected=st.booleans())
def test_a_claim_parses_or_gives_a_one_line_claim_error(raw: Any, expected: bool) -> None:
    """parse_claim: our allocation, or ClaimError on one line within the per-claim
    error limit (never TypeError, KeyError, AttributeError...), as the kubelet gets it."""
    ref = ClaimRef("default", CLAIM["metadata"]["name"], A) if expected else None
    try:
        allocation = parse_claim(raw, DRIVER, ref)
    except ClaimError as err:
        assert_one_line(str(err), ERROR_LIMIT)
        return
    assert all(isinstance(r.pool, str) and r.pool for r in allocation.results)
    assert all(c.driver == DRIVER for c in allocation.config)


@given(status=st.sampled_from([404, 404, 500, 200]), body=st.one_of(
    st.binary(max_size=100),
    json_values().map(to_json_bytes),
    mutated({"kind": "Status", "reason": "NotFound", "details": {
        "name": "c", "group": "resource.k8s.io", "kind": "resourceclaims"}}).map(to_json_bytes),
    st.just(b"[" * 100_000 + b"]" * 100_000),
    st.just(b'{"code": ' + b"4" * 5_000 + b"}"),
))
def test_an_error_body_never_says_a_claim_is_gone_unless_it_does(status: int, body: bytes) -> None:
    """names_missing_claim: a bool for any body (a proxy's page, a deep or huge JSON),
    True only for a NotFound Status naming this claim."""
    said = names_missing_claim(status, body, "c")
    assert said in (True, False)
    if said:
        assert status == 404 and b"NotFound" in body and b"resourceclaims" in body


SLICE: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
    "metadata": {"name": "node-1-gpus-x", "uid": "u1", "resourceVersion": "10"},
    "spec": {"driver": DRIVER, "nodeName": "node-1",
             "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
             "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]},
}
# The API client parses with json.loads, which stops at Python's recursion limit:
# slices as deep as that cannot arrive, shallower ones can.
slices = st.one_of(mutated(SLICE, 3), json_values(6).map(lambda v: {"metadata": v})).filter(
    lambda obj: value_depth(obj, 200) <= 200)


@given(events=st.lists(st.tuples(st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]),
                                 slices), max_size=6),
       listed=st.lists(slices, max_size=3))
def test_the_slice_cache_takes_any_object_the_server_sends(events: list[tuple[str, Any]],
                                                            listed: list[Any]) -> None:
    """SliceCache, fed by the publisher's list and watch: any object the server sends
    (a field missing, retyped or hostile) is applied or ignored without an exception,
    and the cache then still answers by pool."""
    cache = SliceCache()
    cache.put(copy.deepcopy(SLICE))
    cache.replace([copy.deepcopy(SLICE), *listed], "11", cache.mark())
    for kind, obj in events:
        cache.apply_event(kind, obj)
    pools = cache.by_pool()
    cache.share_devices("node-1", {"gpu-0": {"name": "gpu-0"}})
    assert all(isinstance(name, str) for name in pools)
    for pool in pools:
        assert cache.pool_slices(pool)


_names = st.one_of(st.sampled_from([*PATHS[:8], "", DRIVER]), utf8_text)
_devices = st.builds(pb.ClaimResource, driver_name=_names, pool_name=_names,
                     device_name=_names, share_id=_names,
                     cdi_devices=st.lists(st.builds(pb.CDIDevice, name=_names), max_size=2))
_resources = st.builds(pb.DynamicResource, claim_name=_names, claim_namespace=_names,
                       claim_resources=st.lists(_devices, max_size=3))
_answers = st.builds(pb.ListPodResourcesResponse, pod_resources=st.lists(st.builds(
    pb.PodResources, name=_names, namespace=_names, containers=st.lists(st.builds(
        pb.ContainerResources, name=_names,
        dynamic_resources=st.lists(_resources, max_size=3)), max_size=2)), max_size=3))


@given(answer=_answers)
def test_the_kubelet_pod_resources_answer_is_read_whatever_it_names(
        answer: pb.ListPodResourcesResponse) -> None:
    """usage_of: only this driver's devices, and whether any DRA resource is listed at
    all, whatever names the kubelet's answer holds."""
    usage = usage_of(answer, DRIVER)
    listed = [r for p in answer.pod_resources for c in p.containers for r in c.dynamic_resources]
    assert usage.lists_dra == bool(listed)
    ours = {(d.pool_name, d.device_name) for p in answer.pod_resources for c in p.containers
            for r in c.dynamic_resources for d in r.claim_resources if d.driver_name == DRIVER}
    assert {key[:2] for key in usage.devices} == ours
