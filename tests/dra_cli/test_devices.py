"""`kubectl dra devices`: one row per device with capacity, counters, taints, health
and holders, filtered by node, driver and DeviceClass; tables and documents."""

from __future__ import annotations

import json

import yaml

from tests.dra_cli.conftest import Run


def _rows(run: Run, *args: str) -> dict[str, dict]:
    code, out, err = run("devices", "-o", "json", *args)
    assert (code, err) == (0, "")
    return {d["device"]: d for d in json.loads(out)["devices"]}


def test_every_device_of_both_drivers_is_a_row(run: Run) -> None:
    rows = _rows(run)
    assert sorted(rows) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3", "nic-0", "part-0", "part-1",
                            "whole"]
    assert {r["driver"] for r in rows.values()} == {"gpu.example.com", "net.example.com"}
    assert rows["gpu-1"]["attributes"] == {"index": "1", "model": "H100"}


def test_an_exclusive_device_is_used_wholly_and_names_its_holder_and_pod(run: Run) -> None:
    gpu0 = _rows(run)["gpu-0"]
    assert gpu0["capacity"] == [{"name": "memory", "used": "80Gi", "total": "80Gi"}]
    assert gpu0["allocated"] is True
    assert [(h["claim"], h["pods"]) for h in gpu0["holders"]] == [
        ("default/train", ["default/trainer"])]
    assert gpu0["health"] == "Unhealthy"  # from the pod's allocatedResourcesStatus
    free = _rows(run)["gpu-1"]
    assert (free["allocated"], free["capacity"][0]["used"], free["health"]) == (False, "0", None)


def test_shares_add_up_their_consumed_capacity(run: Run) -> None:
    nic = _rows(run)["nic-0"]
    assert nic["capacity"] == [{"name": "bandwidth", "used": "100G", "total": "100G"}]
    assert sorted((h["claim"], h["consumedCapacity"]["bandwidth"]) for h in nic["holders"]) == [
        ("default/web-a", "40G"), ("default/web-b", "60G")]
    assert all(h["shareID"] for h in nic["holders"])


def test_counters_are_the_pools_against_what_allocated_devices_consume(run: Run) -> None:
    rows = _rows(run)
    for name in ("part-0", "part-1", "whole"):
        assert rows[name]["counters"] == [
            {"name": "gpu-mem/memory", "used": "40Gi", "total": "80Gi"}], name


def test_a_tainted_device_shows_its_taint(run: Run) -> None:
    rows = _rows(run)
    assert rows["gpu-3"]["taints"] == ["example.com/broken=ecc:NoSchedule"]
    assert rows["gpu-2"]["taints"] == []


def test_filters_by_node_driver_and_class(run: Run) -> None:
    assert sorted(_rows(run, "--node", "node-2")) == ["part-0", "part-1", "whole"]
    assert sorted(_rows(run, "--driver", "net.example.com")) == ["nic-0"]
    assert sorted(_rows(run, "--class", "net")) == ["nic-0"]
    assert len(_rows(run, "--class", "gpu")) == 7


def test_an_unknown_class_is_one_line(run: Run) -> None:
    code, out, err = run("devices", "--class", "nope")
    assert (code, out) == (1, "")
    assert err == "kubectl-dra: deviceclass 'nope' not found\n"


def test_the_table_is_aligned_and_without_colour_off_a_terminal(run: Run) -> None:
    code, out, _ = run("devices")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() [:4] == ["NODE", "DRIVER", "POOL", "DEVICE"]
    assert "\033[" not in out
    column = lines[0].index("CAPACITY")
    assert all(line[column - 2:column] == "  " for line in lines)
    gpu0 = next(line for line in lines if " gpu-0 " in line)
    assert "memory 80Gi/80Gi" in gpu0 and "Unhealthy" in gpu0
    assert "default/train -> trainer" in gpu0
    nic = next(line for line in lines if " nic-0 " in line)
    assert "bandwidth 100G/100G" in nic


def test_yaml_is_the_json_document(run: Run) -> None:
    _, as_json, _ = run("devices", "-o", "json")
    _, as_yaml, _ = run("devices", "-o", "yaml")
    assert yaml.safe_load(as_yaml) == json.loads(as_json)


def test_the_snapshot_is_one_list_per_kind(cluster, run: Run) -> None:  # type: ignore[no-untyped-def]
    server, _ = cluster
    server.request_log.clear()
    run("devices", "--class", "gpu")
    counts = server.request_log.counts()
    assert counts == {("list", "resourceslices"): 1, ("list", "resourceclaims"): 1,
                      ("list", "pods"): 1, ("list", "deviceclasses"): 1,
                      ("list", "devicetaintrules"): 1}
