"""Slice names: index prefix (priority, matching) and a stable, valid body."""

from __future__ import annotations

from simdra._driver.core.validation import dns_subdomain_errors
from simdra._driver.slices import naming


def test_name_starts_with_the_helper_index_prefix_and_is_stable():
    a = naming.slice_name(3, 5, "gpu.example.com", "node-1", "pool-a")
    assert a.startswith("00003-gpu.example.com-node-1-")
    assert a == naming.slice_name(3, 5, "gpu.example.com", "node-1", "pool-a")
    assert naming.decode_index(a, 5) == 3
    assert dns_subdomain_errors(a, "name") == []


def test_names_differ_per_pool_and_node():
    names = {naming.slice_name(0, 5, "d.example.com", n, p)
             for n in ("n1", "n2") for p in ("p", "q/r")}
    assert len(names) == 4


def test_go_helper_names_are_matched_by_prefix():
    assert naming.decode_index("0000a-gpu.example.com-node-1-xk2lp", 5) == 10
    assert naming.decode_index("node-1-gpu.example.com-xk2lp", 5) is None
    assert naming.decode_index("000001-gpu", 5) is None  # other width: unmatched


def test_index_width_grows_only_past_five_hex_digits():
    assert naming.index_width(1) == 5
    assert naming.index_width(0x100000) == 5
    assert naming.index_width(0x100001) == 6


def test_very_long_node_names_still_give_valid_unique_names():
    node = ".".join(["a" * 60] * 4)  # 243 characters
    a = naming.slice_name(0, 5, "Gpu.Example.com", node, "p1")
    b = naming.slice_name(0, 5, "Gpu.Example.com", node, "p2")
    assert a != b and len(a) <= 253
    assert dns_subdomain_errors(a, "name") == []
    prefix = naming.name_prefix(0, 5, "gpu.example.com", node)
    assert dns_subdomain_errors(prefix + "abcde", "name") == []
