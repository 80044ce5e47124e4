"""Consumable-capacity request policy: rounding, defaults and refusals (api-facts 4.5, 4.8)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from simdra._driver.core.quantity import parse_quantity
from simdra._driver.devices.request_policy import NoFit, consumed_amount, fits_remaining, remaining

# The NIC profile's bandwidth: 10G shared, default 1M, at least 1M, in steps of 8.
NIC = {
    "value": "10G",
    "requestPolicy": {"default": "1M", "validRange": {"min": "1M", "step": "8"}},
}
BOUNDED = {
    "value": "100",
    "requestPolicy": {"default": "10", "validRange": {"min": "10", "max": "50", "step": "10"}},
}
NO_STEP = {
    "value": "100",
    "requestPolicy": {"default": "5", "validRange": {"min": "5", "max": "60"}},
}
VALUES = {"value": "8Gi", "requestPolicy": {"default": "1Gi", "validValues": ["1Gi", "2Gi", "4Gi"]}}
NO_POLICY = {"value": "40Gi"}


def q(text: str) -> Fraction:
    return parse_quantity(text)


@pytest.mark.parametrize(
    ("capacity", "requested", "expected"),
    [
        pytest.param(NIC, "1k", q("1M"), id="below-min-raised-to-min"),
        pytest.param(NIC, "0", q("1M"), id="zero-raised-to-min"),
        pytest.param(NIC, "1M", q("1M"), id="exactly-min"),
        pytest.param(NIC, "1000001", q("1000008"), id="between-steps-rounds-up"),
        pytest.param(NIC, "1000016", q("1000016"), id="on-a-step-unchanged"),
        pytest.param(NIC, "1G", q("1G"), id="large-aligned"),
        pytest.param(NIC, "10G", q("10G"), id="whole-capacity"),
        pytest.param(BOUNDED, "11", Fraction(20), id="bounded-rounds-up"),
        pytest.param(BOUNDED, "50", Fraction(50), id="exactly-max"),
        pytest.param(NO_STEP, "7", Fraction(7), id="no-step-used-as-is"),
        pytest.param(NO_STEP, "2500m", Fraction(5), id="no-step-below-min"),
        pytest.param(NO_STEP, "60", Fraction(60), id="no-step-exactly-max"),
        pytest.param(VALUES, "1", q("1Gi"), id="valid-values-smallest"),
        pytest.param(VALUES, "1Gi", q("1Gi"), id="valid-values-exact"),
        pytest.param(VALUES, "1500Mi", q("2Gi"), id="valid-values-next-up"),
        pytest.param(VALUES, "4Gi", q("4Gi"), id="valid-values-largest"),
        pytest.param(VALUES, "0", q("1Gi"), id="valid-values-zero"),
        pytest.param(NO_POLICY, "3Gi", q("3Gi"), id="no-policy-request-as-is"),
        pytest.param(NO_POLICY, "0", Fraction(0), id="no-policy-zero"),
    ],
)
def test_requested_amount_is_rounded_per_policy(capacity, requested, expected):
    assert consumed_amount(capacity, requested) == expected


def test_fractional_step_rounds_exactly():
    capacity = {"value": "4", "requestPolicy": {"validRange": {"min": "500m", "step": "250m"}}}
    assert consumed_amount(capacity, "600m") == Fraction(3, 4)


@pytest.mark.parametrize(
    ("capacity", "requested", "words"),
    [
        pytest.param(
            BOUNDED, "51", "rounds up to 60, above the policy maximum 50", id="round-past-max"
        ),
        pytest.param(BOUNDED, "500", "request 500 is above the policy maximum 50", id="far-above"),
        pytest.param(NO_STEP, "61", "request 61 is above the policy maximum 60", id="no-step-max"),
        pytest.param(VALUES, "5Gi", "above the largest valid value 4Gi", id="above-valid-values"),
        pytest.param(NO_POLICY, "-1", "negative", id="negative"),
    ],
)
def test_request_outside_policy_does_not_fit(capacity, requested, words):
    result = consumed_amount(capacity, requested)
    assert isinstance(result, NoFit)
    assert words in result.reason


@pytest.mark.parametrize(
    ("capacity", "expected"),
    [
        pytest.param(NIC, q("1M"), id="range-default"),
        pytest.param(VALUES, q("1Gi"), id="values-default"),
        pytest.param(NO_POLICY, q("40Gi"), id="no-policy-full-value"),
        pytest.param({"value": "7", "requestPolicy": {}}, Fraction(7), id="empty-policy-full"),
    ],
)
def test_unrequested_capacity_uses_default_or_whole_value(capacity, expected):
    assert consumed_amount(capacity) == expected


def test_remaining_and_fit_with_earlier_consumption():
    assert remaining("10G", ["9G", "500M"]) == q("500M")
    assert fits_remaining("10G", ["9G", "500M"], "500M")
    assert not fits_remaining("10G", ["9G", "500M"], "500000001")
    assert fits_remaining("10G", [], "10G")
    assert fits_remaining("0", [], "0")
    assert not fits_remaining("0", [], "1")
