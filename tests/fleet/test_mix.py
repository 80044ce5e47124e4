"""The mix (which shape each node gets) and the shards (which replica plays it)."""

from __future__ import annotations

from collections import Counter

import pytest

from simdra._driver.fleet.mix import MixError, node_names, parse_mix
from simdra._driver.fleet.plan import created_fleet, owned, to_prune
from simdra._driver.fleet.shard import Shard, ShardError, parse_shard


def test_a_mix_gives_each_shape_about_its_share_and_the_same_seed_the_same_fleet() -> None:
    mix = parse_mix("gpu8:70,nic2:20,partitioned:10")
    fleet = created_fleet("f", 2000, mix, seed=7)
    counts = Counter(node.shape.name for node in fleet)
    assert abs(counts["gpu8"] - 1400) < 100
    assert abs(counts["nic2"] - 400) < 80
    assert abs(counts["partitioned"] - 200) < 60
    assert created_fleet("f", 2000, mix, seed=7) == fleet
    assert created_fleet("f", 2000, mix, seed=8) != fleet


def test_a_node_keeps_its_shape_when_the_fleet_grows() -> None:
    mix = parse_mix("gpu8:50,nic2:50")
    small, large = created_fleet("f", 10, mix, 3), created_fleet("f", 100, mix, 3)
    assert large[:10] == small


def test_shapes_name_what_simdra_run_would_be_started_with() -> None:
    (gpu, _), (nic, _), (partitioned, _) = parse_mix("gpu8:70,nic2:20,partitioned:10").parts
    assert (gpu.profile, gpu.num_devices) == ("gpu", 8)
    assert (nic.profile, nic.num_devices) == ("nic", 2)
    assert partitioned.profile == "gpu-partitioned"


@pytest.mark.parametrize(("text", "problem"), [
    ("gpu8:70,nic2:20", "add up to 90, not 100"),
    ("gpu9:100", "unknown shape 'gpu9'"),
    ("gpu8", "is not shape:percent"),
    ("gpu8:x", "is not shape:percent"),
    ("gpu8:50,gpu8:50", "appears twice"),
])
def test_a_bad_mix_says_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(MixError, match=problem):
        parse_mix(text)


def test_an_inventory_file_is_a_shape() -> None:
    ((shape, percent),) = parse_mix("/etc/simdra/big.yaml:100").parts
    assert (shape.profile, percent) == ("/etc/simdra/big.yaml", 100)


def test_node_names_sort_in_index_order() -> None:
    names = node_names("simdra-fleet", 12)
    assert names[0] == "simdra-fleet-0000" and names == sorted(names)


def test_two_shards_split_the_fleet_without_overlap_or_gap() -> None:
    fleet = created_fleet("f", 500, parse_mix("gpu8:100"), 1)
    first, second = owned(fleet, parse_shard("0/2")), owned(fleet, parse_shard("1/2"))
    names = [node.name for node in first + second]
    assert sorted(names) == sorted(node.name for node in fleet)  # no gap, no overlap
    assert 150 < len(first) < 350  # both replicas get a real part


def test_prune_takes_only_the_shards_own_nodes_that_left_the_fleet() -> None:
    shard = Shard(0, 2)
    wanted = owned(created_fleet("f", 5, parse_mix("gpu8:100"), 1), shard)
    existing = node_names("f", 20)
    pruned = to_prune(existing, wanted, shard)
    assert pruned == sorted(n for n in existing[5:] if shard.owns(n))


@pytest.mark.parametrize("text", ["2/2", "1", "a/b", "0/0", "-1/2"])
def test_a_bad_shard_is_refused(text: str) -> None:
    with pytest.raises(ShardError):
        parse_shard(text)
