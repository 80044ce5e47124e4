"""Opaque configs (`opaque.parameters` of a DeviceClass or a claim) are JSON any user who
can create a claim writes. Whatever they hold, decoding gives typed settings or a
ConfigError whose text is one line, each problem bounded, and the env a handler makes
of what it accepted is one line per value."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from simdra._driver.claims.plan.allocation import OpaqueConfig
from simdra._driver.claims.plan.config import ConfigError, ConfigTarget, decode_entries, resolve_all
from simdra._driver.kinds.config_handlers import GpuConfigHandler, NicConfigHandler
from simdra._driver.kinds.config_types import API_VERSION

from .strategies import assert_one_line, deep_values, hostile_text, json_values, mutated, numbers

HANDLERS = (GpuConfigHandler(), NicConfigHandler())
GPU: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "GpuConfig", "sharing": {
    "strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50,
                                     "defaultPinnedMemoryLimit": "4Gi"}}}
GPU_TS: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "GpuConfig", "sharing": {
    "strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}}
NIC: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "NicConfig", "mtu": 9000,
                       "vlan": 12, "rateLimit": "1G"}
TARGETS = [
    ConfigTarget(("gpus",), "gpu", "device node-a/gpu-0", {"memory": Fraction(80 * 2**30)}),
    ConfigTarget(("net",), "nic", "device node-a/nic-0 share x", {"bandwidth": Fraction(10**9)}),
]
PROBLEM_CHARS = 1_200  # one problem: a field path and a value, each shown bounded

parameters = st.one_of(
    mutated(GPU), mutated(GPU_TS), mutated(NIC),
    json_values(),
    deep_values,
    st.dictionaries(hostile_text, json_values(4), max_size=5).map(
        lambda extra: {**NIC, **extra}),
    st.sampled_from(["mtu", "vlan"]).flatmap(  # integers as long as JSON allows
        lambda field: numbers.map(lambda n: {**NIC, field: n})),
)
entries = st.builds(
    OpaqueConfig,
    source=st.sampled_from(["FromClass", "FromClaim", "", "x\ny"]),
    requests=st.lists(st.one_of(st.sampled_from(["gpus", "net", "gpus/sub"]), hostile_text),
                      max_size=2).map(tuple),
    driver=st.just("gpu.simdra.example.com"),
    parameters=parameters,
    path=st.sampled_from(["status.allocation.devices.config[0]", "config"]),
)


@given(found=st.lists(entries, min_size=1, max_size=3))
def test_opaque_parameters_decode_or_give_a_one_line_config_error(
        found: list[OpaqueConfig]) -> None:
    """decode_entries then resolve_all, as a prepare runs them: settings and env, or a
    ConfigError (never TypeError, KeyError, RecursionError...) on one line, each of its
    problems bounded."""
    try:
        resolved = resolve_all(decode_entries(found, HANDLERS), TARGETS)
    except ConfigError as err:
        assert err.problems
        for problem in err.problems:
            assert_one_line(problem, PROBLEM_CHARS)
        assert_one_line(str(err), len(err.problems) * (PROBLEM_CHARS + 2))
        return
    for config in resolved:
        if config is None:
            continue
        for key, value in config.env():
            assert key.isupper() or key.replace("_", "").isalnum()
            assert_one_line(f"{key}={value}", 400)
        assert config.to_json()["apiVersion"] == API_VERSION
