"""Names from the kubelet and the claim, checked against the API server's rules (pure).

They become parts of file names (the claim UID), CDI device names and env values (pool,
device, request, namespace, name), so a value the API server would never accept (a NUL
in a request name, a newline in a namespace) is refused as that claim's error before it
reaches a file or a CDI spec. The rules are the ones the ResourceSlice validation uses
(`simdra._driver.core.validation.names`); this module only says which field follows which.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simdra._driver.claims.allocation import ClaimAllocation
from simdra._driver.claims.device_metadata import POD_CLAIM_ANNOTATION
from simdra._driver.claims.errors import ClaimError, claim_label
from simdra._driver.claims.types import ClaimRef
from simdra._driver.core.textlimits import clip
from simdra._driver.core.validation.errors import FieldError
from simdra._driver.core.validation.names import (
    dns_label_errors,
    dns_subdomain_errors,
    pool_name_errors,
    qualified_name_errors,
    uuid_errors,
)

Rule = Callable[[Any, str], list[FieldError]]
_RESULTS = "status.allocation.devices.results"


def check_ref(ref: ClaimRef) -> None:
    """Raise ClaimError when the kubelet's namespace, name or UID breaks the API rules."""
    problems = _problems(
        [
            ("namespace", ref.namespace, dns_label_errors, "a DNS label"),
            ("name", ref.name, dns_subdomain_errors, "a DNS subdomain"),
            ("uid", ref.uid, uuid_errors, "a lowercase UUID"),
        ]
    )
    if problems:
        label = claim_label(ref.namespace, ref.name, ref.uid)
        raise ClaimError(f"{label}: refused: {'; '.join(problems)}")


def check_allocation(allocation: ClaimAllocation) -> None:
    """Raise ClaimError naming every result field of this driver that breaks the rules:
    request names (`req` or `req/sub`, DNS labels), pools (DNS subdomains joined by
    `/`), devices (DNS labels) and consumedCapacity names (qualified names)."""
    fields: list[tuple[str, Any, Rule, str]] = [
        ("metadata.namespace", allocation.namespace, dns_label_errors, "a DNS label"),
        ("metadata.name", allocation.name, dns_subdomain_errors, "a DNS subdomain"),
        ("metadata.uid", allocation.uid, uuid_errors, "a lowercase UUID"),
    ]
    if allocation.pod_claim_name is not None:  # a path part of its device metadata
        fields.append((f"metadata.annotations[{POD_CLAIM_ANNOTATION}]",
                       allocation.pod_claim_name, dns_label_errors, "a DNS label"))
    for i, result in enumerate(allocation.results):
        path = f"{_RESULTS}[{i}]"
        fields.append((f"{path}.request", result.request, _request_errors, "a request name"))
        fields.append((f"{path}.pool", result.pool, pool_name_errors, "a pool name"))
        fields.append((f"{path}.device", result.device, dns_label_errors, "a DNS label"))
        for name in result.consumed_capacity:
            fields.append(
                (f"{path}.consumedCapacity", name, qualified_name_errors, "a capacity name")
            )
    problems = _problems(fields)
    if problems:
        raise ClaimError(f"{allocation.label}: refused: {'; '.join(problems)}")


def _request_errors(value: Any, path: str) -> list[FieldError]:
    """`req` or `req/sub` (a subrequest of a prioritized list), each part a DNS label."""
    if not isinstance(value, str):
        return dns_label_errors(value, path)
    parts = value.split("/")
    if len(parts) > 2:
        return dns_label_errors(value, path)  # a '/' is never part of a DNS label
    return [e for part in parts for e in dns_label_errors(part, path)]


def _problems(fields: list[tuple[str, Any, Rule, str]]) -> list[str]:
    # The rule's own message repeats the value in full; a clipped value is shown instead.
    return [
        f"field {path}: {clip(repr(value))} is not {what}"
        for path, value, rule, what in fields
        if rule(value, path)
    ]
