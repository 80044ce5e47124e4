"""The fleet bench's pure helpers (bench/fleet_*.py): what it prints from figures and the
API server's metrics, without a cluster. The bench itself runs by hand (docs/ci.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import fleet_bench
from fleet_pods import PodTimes
from fleet_requests import by_schema, codes, delta, flow_schemas, line, writes

PUBLISHED_ONLY = {"nodes": 100.0, "shards": 1.0, "publish_s": 2.0, "floor_s": 1.6,
                  "publish_vs_floor": 1.25, "start_requests_per_node": 2.26,
                  "floor_requests_per_node": 2.26, "idle_requests_per_node_hour": 0.0,
                  "rss_mib": 60.0, "idle_cpu_pct": 0.0}


def test_no_pods_make_no_rates_instead_of_failing() -> None:
    times = PodTimes()
    assert times.created_per_second() == 0.0
    assert times.scheduled_per_second() == 0.0
    assert times.start_latencies() == []


def test_a_run_without_pods_prints_its_targets_and_table_without_pod_rows() -> None:
    lines = fleet_bench.targets(PUBLISHED_ONLY)
    assert all(line.startswith("  PASS") for line in lines)
    assert not any("claims" in line for line in lines)
    text = fleet_bench.table([PUBLISHED_ONLY, {**PUBLISHED_ONLY, "nodes": 300.0}])
    assert "publish / floor" in text
    assert "pods created per second" not in text


@pytest.mark.parametrize("argv", [["--pods-per-node", "-1"], ["--shards", "0"]])
def test_impossible_counts_are_refused_before_any_cluster(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        fleet_bench.main(argv)
    assert exit_.value.code == 2


def test_the_fleets_requests_are_read_by_verb_and_resource_and_answers_by_code() -> None:
    names = [s["metadata"]["name"] for s in flow_schemas("kube-system", "simdra-fleet")]
    assert "simdra-fleet" in names and "simdra-fleet-create-slices" in names
    before = ('apiserver_flowcontrol_dispatched_requests_total{flow_schema="simdra-fleet",'
              'priority_level="workload-high"} 3\n')
    after = (before.replace(" 3", " 4") +
             'apiserver_flowcontrol_dispatched_requests_total{flow_schema='
             '"simdra-fleet-create-nodes",priority_level="workload-high"} 100\n'
             'apiserver_flowcontrol_dispatched_requests_total{flow_schema="global-default",'
             'priority_level="global-default"} 7\n'
             'apiserver_request_total{code="409",component="apiserver",group="",'
             'resource="nodes",scope="resource",subresource="status",verb="PATCH",'
             'version="v1"} 8\n'
             'apiserver_request_total{code="201",component="apiserver",group="coordination.'
             'k8s.io",resource="leases",scope="resource",subresource="",verb="POST",'
             'version="v1"} 100\n'
             'apiserver_request_total{code="200",component="apiserver",group="",'
             'resource="nodes",scope="resource",subresource="",verb="LIST",version="v1"} 2\n')
    counts = delta(by_schema(after), by_schema(before))
    assert counts == {"create-nodes": 100.0, "other": 1.0}
    assert line(counts, 100) == "create-nodes 100 (1.00/node), other 1 (0.01/node)"
    assert codes(after) == {"patch nodes/status 409": 8.0, "post leases 201": 100.0,
                            "list nodes 200": 2.0}
    assert writes(codes(after)) == {"patch nodes/status": 8.0, "post leases": 100.0}
