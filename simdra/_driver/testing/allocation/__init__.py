"""The test allocator's parts, split by role.

`cel` (selectors: celpy in the Kubernetes DRA CEL environment), `pools` (slices -> usable
devices), `requests` (claim requests normalized), `taken` (what other claims hold),
`search` (the backtracking core), `diagnose` (failure messages), `result`
(AllocationResult JSON). The public entry points live in `simdra._driver.testing.scheduler`.
"""
