"""Reading ResourceClaims: our results only, identity checks, malformed input."""

from __future__ import annotations

import copy
from fractions import Fraction

import pytest

from simdra._driver.claims.plan.allocation import parse_claim
from simdra._driver.claims.types import ClaimError, ClaimRef

from .builders import DRIVER, OTHER_DRIVER, SHARE_1, claim, fixture_claim, result

UID = "5f0c2a8e-7d1b-4c6a-9e3f-1a2b3c4d5e6f"


def _config(driver, requests, source, marker):
    return {
        "source": source,
        "requests": requests,
        "opaque": {"driver": driver, "parameters": {"marker": marker}},
    }


def test_keeps_only_this_drivers_results_and_config():
    raw = claim(
        UID,
        [
            result("gpus", "gpu-0"),
            result("other", "dev-9", pool="p", driver=OTHER_DRIVER),
            result("net/fast", "nic-0", share=SHARE_1, consumed={"bandwidth": "1500M"}),
        ],
        config=[
            _config(DRIVER, [], "FromClaim", "claim-all"),
            _config(OTHER_DRIVER, [], "FromClass", "other"),
            _config(DRIVER, ["net"], "FromClass", "class-net"),
        ],
    )
    alloc = parse_claim(raw, DRIVER, ClaimRef("default", "claim-5f0c2a8e", UID))
    assert [(r.request, r.device, r.share_id) for r in alloc.results] == [
        ("gpus", "gpu-0", None),
        ("net/fast", "nic-0", SHARE_1),
    ]
    shared = alloc.results[1]
    assert shared.main_request == "net"
    assert shared.consumed_capacity == {"bandwidth": Fraction(1_500_000_000)}
    assert [c.parameters["marker"] for c in alloc.config] == ["claim-all", "class-net"]
    # Class config first, so that claim config applied after it wins.
    assert [c.parameters["marker"] for c in alloc.config_for("net/fast")] == [
        "class-net",
        "claim-all",
    ]
    assert [c.parameters["marker"] for c in alloc.config_for("gpus")] == ["claim-all"]


def test_every_field_claim_for_another_driver_reads_identity_and_nothing_else():
    alloc = parse_claim(fixture_claim(), DRIVER)
    identity = (alloc.namespace, alloc.name, alloc.uid)
    assert identity == ("namespaceSample", "nameSample", "uidSample")
    assert alloc.results == () and alloc.config == ()


def test_every_field_claim_placeholder_share_id_is_refused_naming_the_field():
    # The fixture's driver is "driverSample"; its shareID "shareIDSample" is no UUID and
    # would end up in CDI names, so it is refused rather than trusted.
    with pytest.raises(ClaimError) as info:
        parse_claim(fixture_claim(), "driverSample")
    message = str(info.value)
    assert "namespaceSample/nameSample (uid uidSample)" in message
    assert "status.allocation.devices.results[0].shareID" in message
    assert "'shareIDSample'" in message


def test_every_field_claim_with_a_real_share_id_parses_every_used_field():
    raw = fixture_claim()
    raw["status"]["allocation"]["devices"]["results"][0]["shareID"] = SHARE_1
    alloc = parse_claim(raw, "driverSample", ClaimRef("namespaceSample", "nameSample", "uidSample"))
    (only,) = alloc.results
    assert (only.request, only.pool, only.device) == ("requestSample", "poolSample", "deviceSample")
    assert only.admin_access is True
    assert only.consumed_capacity == {"capacityKey": Fraction(1)}
    (config,) = alloc.config
    assert config.source == "sourceSample" and config.requests == ("requestSample",)
    assert config.parameters["kind"] == "SampleParameters"


def test_replaced_claim_is_refused():
    raw = claim("new-uid", [result("gpus", "gpu-0")], name="c1")
    with pytest.raises(ClaimError, match="got replaced") as info:
        parse_claim(raw, DRIVER, ClaimRef("default", "c1", "old-uid"))
    assert "default/c1 (uid old-uid)" in str(info.value)
    assert "new-uid" in str(info.value)


@pytest.mark.parametrize("status", [None, {}, {"allocation": None}, {"reservedFor": []}], ids=str)
def test_unallocated_claim_is_refused(status):
    raw = claim(UID, [])
    if status is None:
        del raw["status"]
    else:
        raw["status"] = status
    with pytest.raises(ClaimError, match="not allocated"):
        parse_claim(raw, DRIVER)


def _set(path, value):
    def change(raw):
        target = raw
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


_RESULT0 = ["status", "allocation", "devices", "results", 0]


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (_set(["metadata", "uid"], ""), "metadata.uid", "non-empty string"),
        (_set(["metadata"], None), "metadata", "missing"),
        (_set(["metadata"], []), "metadata", "expected an object"),
        (_set(["status", "allocation", "devices", "results"], {}), "results", "expected a list"),
        (_set([*_RESULT0[:-1], 0], "gpu-0"), "results[0]", "expected an object"),
        (_set([*_RESULT0, "pool"], None), "results[0].pool", "missing"),
        (_set([*_RESULT0, "device"], 7), "results[0].device", "got 7"),
        (_set([*_RESULT0, "request"], ""), "results[0].request", "non-empty"),
        (_set([*_RESULT0, "driver"], None), "results[0].driver", "missing"),
        (_set([*_RESULT0, "shareID"], "ABC"), "results[0].shareID", "not a lowercase UUID"),
        (_set([*_RESULT0, "adminAccess"], "yes"), "results[0].adminAccess", "not a boolean"),
        (
            _set([*_RESULT0, "consumedCapacity"], {"bandwidth": "ten"}),
            "results[0].consumedCapacity[bandwidth]",
            "not a valid quantity",
        ),
        (
            _set(["status", "allocation", "devices", "config"], [{"opaque": {"driver": 1}}]),
            "config[0].opaque.driver",
            "got 1",
        ),
    ],
)
def test_malformed_claim_errors_name_claim_field_and_problem(change, field, problem):
    raw = claim(UID, [result("gpus", "gpu-0")], name="bad")
    change(raw)
    with pytest.raises(ClaimError) as info:
        parse_claim(raw, DRIVER, ClaimRef("default", "bad", UID))
    message = str(info.value)
    assert "default/bad" in message and UID in message
    assert field in message and problem in message


def test_parse_does_not_change_its_input():
    raw = claim(UID, [result("net", "nic-0", share=SHARE_1, consumed={"bandwidth": "1M"})])
    before = copy.deepcopy(raw)
    parse_claim(raw, DRIVER)
    assert raw == before


def test_non_object_claim_is_refused():
    with pytest.raises(ClaimError, match="not a JSON object"):
        parse_claim(["x"], DRIVER, ClaimRef("ns", "n", "u"))


def test_negative_consumed_capacity_is_refused_naming_the_field():
    # A negative share would lower the ledger's sum and let another claim overbook.
    raw = claim(UID, [result("gpu", "gpu-0", share=SHARE_1, consumed={"memory": "-80Gi"})])

    with pytest.raises(ClaimError) as error:
        parse_claim(raw, DRIVER)

    assert "consumedCapacity[memory]" in str(error.value) and "negative" in str(error.value)


@pytest.mark.parametrize("amount", ["1e5000", "1e-5000", "1" + "0" * 5000])
def test_absurd_consumed_capacity_is_refused_naming_the_field(amount):
    # Exact arithmetic on such values costs minutes ("1e999999999") or cannot be printed
    # back; the claim gets an error that says which field, not a ValueError.
    raw = claim(UID, [result("net", "nic-0", share=SHARE_1, consumed={"bandwidth": amount})])

    with pytest.raises(ClaimError) as error:
        parse_claim(raw, DRIVER)

    assert "results[0].consumedCapacity[bandwidth]" in str(error.value)
    assert len(str(error.value)) < 500
