"""Opaque config (simdra.dra.example.com/v1alpha1): precedence, filters, strict errors, effect."""

from __future__ import annotations

import json

import pytest

from simdra._driver.claims.plan.allocation import parse_claim
from simdra._driver.claims.plan.prepared import plan_prepare
from simdra._driver.claims.types import ClaimError
from tests.claims.builders import RULES

from .builders import (
    CONFIG_API,
    DRIVER,
    OTHER_DRIVER,
    SHARE_1,
    SHARE_2,
    ProfileCluster,
    claim,
    config_entry,
    env_of,
    gpu_config,
    inventory,
    nic_config,
    result,
    wants,
)

UID = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
CONFIG = "status.allocation.devices.config"


def _plan(results, config):
    return plan_prepare(
        parse_claim(claim(UID, results, config=config), DRIVER), inventory(), DRIVER
    , rules=RULES)


def _env(planned, index=0):
    unit = planned.units[index]
    return env_of(dict(planned.cdi_spec), unit.cdi_name)


def _nic(request="net", share=SHARE_1, amount="2G"):
    return result(request, "nic-0", share=share, consumed={"bandwidth": amount})


def _error(results, config):
    with pytest.raises(ClaimError) as info:
        _plan(results, config)
    message = str(info.value)
    assert message.startswith(f"claim default/claim-0a1b2c3d (uid {UID}): invalid opaque config")
    return message


def test_class_entries_apply_first_and_claim_entries_win_field_by_field():
    planned = _plan(
        [_nic()],
        [
            # The claim entry comes first in the list, yet is applied after the class.
            config_entry(nic_config(mtu=9000)),
            config_entry(nic_config(mtu=1500, vlan=10), source="FromClass"),
        ],
    )
    env = _env(planned)
    assert (env["NIC_MTU"], env["NIC_VLAN"]) == ("9000", "10")
    assert planned.units[0].config == {
        "apiVersion": CONFIG_API,
        "kind": "NicConfig",
        "mtu": 9000,
        "vlan": 10,
    }


def test_requests_filter_selects_results_and_a_request_covers_its_subrequests():
    planned = _plan(
        [_nic("net-a", SHARE_1), _nic("net-b/fast", SHARE_2)],
        [
            config_entry(nic_config(mtu=9000), requests=["net-a"]),
            config_entry(nic_config(vlan=42), requests=["net-b"]),
        ],
    )
    first, second = _env(planned, 0), _env(planned, 1)
    assert first["NIC_MTU"] == "9000" and "NIC_VLAN" not in first
    assert second["NIC_VLAN"] == "42" and "NIC_MTU" not in second


def test_config_of_other_drivers_is_ignored_whatever_it_holds():
    planned = _plan(
        [_nic()],
        [config_entry({"kind": "Nonsense", "mtu": "x"}, driver=OTHER_DRIVER)],
    )
    assert not any(k.startswith("NIC_") for k in _env(planned))
    assert planned.units[0].config == {}


def test_untargeted_entry_configures_only_devices_of_its_type():
    planned = _plan(
        [_nic(), result("gpu", "gpu-0")],
        [
            config_entry(nic_config(mtu=9000)),
            config_entry(gpu_config(sharing={"strategy": "TimeSlicing"})),
        ],
    )
    nic_env, gpu_env = _env(planned, 0), _env(planned, 1)
    assert nic_env["NIC_MTU"] == "9000" and "GPU_SHARING_STRATEGY" not in nic_env
    assert gpu_env["GPU_SHARING_STRATEGY"] == "TimeSlicing"
    assert gpu_env["GPU_TIME_SLICE_INTERVAL"] == "Default"
    assert "NIC_MTU" not in gpu_env


def test_gpu_sharing_settings_reach_the_workload():
    mps = {
        "strategy": "MPS",
        "mpsConfig": {"defaultActiveThreadPercentage": 50, "defaultPinnedMemoryLimit": "4Gi"},
    }
    env = _env(_plan([result("gpu", "gpu-0")], [config_entry(gpu_config(sharing=mps))]))
    assert env["GPU_SHARING_STRATEGY"] == "MPS"
    assert env["GPU_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    assert env["GPU_MPS_PINNED_MEMORY_LIMIT"] == "4Gi"
    assert env["GPU_MPS_PINNED_MEMORY_LIMIT_VALUE"] == str(4 * 2**30)
    sliced = {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}
    env = _env(_plan([result("gpu", "gpu-0")], [config_entry(gpu_config(sharing=sliced))]))
    assert env["GPU_TIME_SLICE_INTERVAL"] == "Long"


def test_nic_rate_limit_up_to_the_share_bandwidth():
    env = _env(_plan([_nic(amount="2G")], [config_entry(nic_config(rateLimit="2G"))]))
    assert (env["NIC_RATE_LIMIT"], env["NIC_RATE_LIMIT_VALUE"]) == ("2G", "2000000000")
    message = _error([_nic(amount="2G")], [config_entry(nic_config(rateLimit="2001M"))])
    assert (
        f"{CONFIG}[0].opaque.parameters.rateLimit: 2001M is more than the 2G of bandwidth "
        f"that device node-a-nics/nic-0 share {SHARE_1} holds"
    ) in message
    # A share finer than milli-units cannot be written as a quantity; still named.
    message = _error([_nic(amount="0.000001m")], [config_entry(nic_config(rateLimit="1"))])
    assert f"{CONFIG}[0].opaque.parameters.rateLimit: 1 is more than the 1/1000000000" in message


P = f"{CONFIG}[0].opaque.parameters"


@pytest.mark.parametrize(
    ("parameters", "expected"),
    [
        (nic_config(mut=9000), f"{P}.mut: unknown field"),
        (
            gpu_config(sharing={"strategy": "MPS", "mpsConfig": {"threads": 5}}),
            f"{P}.sharing.mpsConfig.threads: unknown field",
        ),
        ({"kind": "NicConfig", "mtu": 9000}, f"{P}.apiVersion: required"),
        (
            {"apiVersion": "simdra.dra.example.com/v1", "kind": "NicConfig"},
            f"{P}.apiVersion: unknown version 'simdra.dra.example.com/v1'",
        ),
        ({"apiVersion": CONFIG_API}, f"{P}.kind: required"),
        (
            {"apiVersion": CONFIG_API, "kind": "TpuConfig"},
            f"{P}.kind: unknown kind 'TpuConfig' (one of GpuConfig, NicConfig)",
        ),
        (nic_config(mtu="9000"), f"{P}.mtu: '9000' is not an integer"),
        (nic_config(vlan=True), f"{P}.vlan: True is not an integer"),
        (nic_config(mtu=575), f"{P}.mtu: 575 is out of range (must be 576 to 9216)"),
        (nic_config(mtu=9217), f"{P}.mtu: 9217 is out of range (must be 576 to 9216)"),
        (nic_config(vlan=0), f"{P}.vlan: 0 is out of range (must be 1 to 4094)"),
        (nic_config(rateLimit="fast"), f"{P}.rateLimit: 'fast' is not a valid quantity"),
        (nic_config(rateLimit="0"), f"{P}.rateLimit: must be greater than 0"),
        (nic_config(rateLimit="1e5000"), f"{P}.rateLimit: '1e5000' is out of range"),
        (
            gpu_config(sharing={"strategy": "Spatial"}),
            f"{P}.sharing.strategy: 'Spatial' is not one of TimeSlicing, MPS",
        ),
        (gpu_config(sharing={}), f"{P}.sharing.strategy: required"),
        (
            gpu_config(sharing={"strategy": "MPS", "timeSlicingConfig": {"interval": "Long"}}),
            f"{P}.sharing.timeSlicingConfig: only allowed with strategy TimeSlicing",
        ),
        (
            gpu_config(sharing={"strategy": "TimeSlicing",
                                "timeSlicingConfig": {"interval": "Hour"}}),
            f"{P}.sharing.timeSlicingConfig.interval: 'Hour' is not one of Default, Short, "
            "Medium, Long",
        ),
        (
            gpu_config(sharing={"strategy": "MPS",
                                "mpsConfig": {"defaultActiveThreadPercentage": 0}}),
            f"{P}.sharing.mpsConfig.defaultActiveThreadPercentage: 0 is out of range "
            "(must be 1 to 100)",
        ),
        (gpu_config(sharing="MPS"), f"{P}.sharing: 'MPS' is not an object"),
        ([1, 2], f"{P}: list is not an object"),
        (None, f"{P}: null is not an object"),
    ],
)
def test_each_invalid_config_is_a_claim_error_quoting_field_and_reason(parameters, expected):
    results = [result("gpu", "gpu-0")] if "Gpu" in json.dumps(parameters) else [_nic()]
    message = _error(results, [config_entry(parameters)])
    assert expected in message
    assert "(FromClaim)" in message


def test_every_problem_of_every_entry_is_reported_at_once():
    message = _error(
        [_nic()],
        [
            config_entry(nic_config(speed="x", mtu="big")),
            config_entry(nic_config(mtu=1, vlan=5000), source="FromClass"),
        ],
    )
    second = f"{CONFIG}[1].opaque.parameters"
    assert f"{P}.speed: unknown field (FromClaim)" in message
    assert f"{P}.mtu: 'big' is not an integer (FromClaim)" in message
    assert f"{second}.mtu: 1 is out of range (must be 576 to 9216) (FromClass)" in message
    assert f"{second}.vlan: 5000 is out of range (must be 1 to 4094) (FromClass)" in message


def test_wrong_kind_for_the_targeted_device_is_an_error():
    message = _error(
        [result("gpu", "gpu-0"), _nic()],
        [config_entry(nic_config(mtu=9000), requests=["gpu"], source="FromClass")],
    )
    assert (
        f"{P}.kind: NicConfig configures devices of type nic, but request gpu got device "
        "node-a/gpu-0 of type gpu (FromClass)"
    ) in message


def test_untargeted_entry_that_configures_nothing_is_an_error():
    message = _error([_nic()], [config_entry(gpu_config(sharing={"strategy": "MPS"}))])
    assert f"{P}: kind GpuConfig configures devices of type gpu, but the claim has none" in message


def test_pinned_memory_limit_cannot_exceed_the_gpu_share(tmp_path):
    cluster = ProfileCluster("gpu-shared")
    mps = {"strategy": "MPS", "mpsConfig": {"defaultPinnedMemoryLimit": "9Gi"}}
    ref = cluster.allocate(
        "small", wants("gpu", "gpu", memory="8Gi"), config=[config_entry(gpu_config(sharing=mps))]
    )
    preparer = cluster.preparer(tmp_path)
    error = preparer.prepare([ref])[ref.uid].error
    assert "sharing.mpsConfig.defaultPinnedMemoryLimit: 9Gi is more than the 8Gi of memory" in error
    assert "[step: plan]" in error
    # Nothing was prepared for the refused claim.
    assert list((tmp_path / "cdi").iterdir()) == []
    assert list((tmp_path / "data" / "claims").iterdir()) == []


# --- config kinds and env attributes a device kind declares (simdra._driver.claims.plan.config)


class _SlotConfigHandler:
    """A kind a backend brings: `SlotConfig` with one field, for `gpu` devices."""

    api_version = "slots.example.com/v1"
    kind = "SlotConfig"
    device_type = "gpu"

    def decode(self, fields):
        from dataclasses import make_dataclass

        slot = fields.integer("slot")
        config_type = make_dataclass("SlotConfig", [("slot", int | None, None)], frozen=True)
        config_type.to_json = lambda self: {"kind": "SlotConfig", "slot": self.slot}
        return config_type(slot=slot)

    def problems(self, config, path):
        return [] if config.slot is None or config.slot < 4 else [f"{path}.slot: too big"]

    def device_problems(self, config, target, origin):
        return []

    def env(self, config):
        return [("SLOT", str(config.slot))]


def _slot_rules():
    from simdra._driver.claims.plan.config import ClaimRules

    return ClaimRules(config_handlers=(_SlotConfigHandler(),),
                      env_attributes={"index": "GPU_INDEX"})


def _slot_plan(parameters):
    raw = claim(UID, [result("gpus", "gpu-1")], config=[config_entry(parameters)])
    return plan_prepare(parse_claim(raw, DRIVER), inventory(), DRIVER, _slot_rules())


def test_a_kinds_own_config_handler_and_env_attributes_are_used():
    planned = _slot_plan({"apiVersion": "slots.example.com/v1", "kind": "SlotConfig",
                          "slot": 2})

    env = _env(planned)
    assert env["SLOT"] == "2" and env["GPU_INDEX"] == "1"
    assert "UUID" not in env  # only the attributes the kind chose
    assert planned.units[0].config == {"kind": "SlotConfig", "slot": 2}


@pytest.mark.parametrize(("parameters", "problem"), [
    ({"apiVersion": "slots.example.com/v1", "kind": "SlotConfig", "slot": 9},
     ".opaque.parameters.slot: too big"),
    ({"apiVersion": "slots.example.com/v1", "kind": "SlotConfig", "slots": 1},
     ".opaque.parameters.slots: unknown field"),
    ({"apiVersion": "slots.example.com/v1", "kind": "SlotConfig", "slot": "1"},
     ".opaque.parameters.slot: '1' is not an integer"),
    (gpu_config(), "unknown version 'simdra.dra.example.com/v1alpha1' (this driver reads "
                   "slots.example.com/v1)"),
])
def test_a_kinds_own_config_is_strict(parameters, problem):
    with pytest.raises(ClaimError, match="invalid opaque config") as info:
        _slot_plan(parameters)

    assert problem in str(info.value)
