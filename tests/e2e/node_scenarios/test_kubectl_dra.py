"""`kubectl dra` on the real node, run by the real kubectl as a plugin
(tests/e2e/kubectl_plugin.py): `devices` and `top` show the device the real scheduler
gave a running pod, held by its claim and pod, and the node's other devices free; `why`
names the one reason each of three pods stays Pending (a device taint, bandwidth used
up, a selector nothing matches), its verdict agrees with the scheduler's (the pod still
Pending and Unschedulable after), and once a reason is removed the scheduler and `why`
both allocate the device."""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

from simdra._driver.core.quantity import parse_quantity

from .. import releases
from ..kubectl_plugin import kubectl_dra, kubectl_dra_json
from ..realnode import (
    DATA_DIR,
    DRIVER,
    JSON,
    NAMESPACE,
    Kube,
    PluginDeployment,
    allocated,
    require_feature,
    slice_device,
    wait,
)

GPU = "gpu.dra.example.com"
NIC = "nic.dra.example.com"
FAULT = ("simdra", "fault", "--plugin-dir", DATA_DIR)
NOT_ALLOCATABLE = "not allocatable now"
Key = tuple[str, str, str]  # (driver, pool, device)


def _published(kube: Kube) -> dict[Key, JSON]:
    """Every device the node's ResourceSlices publish, of any driver, as the API has them."""
    slices = kube.resource.list_resource_slice(
        field_selector=f"spec.nodeName={kube.node.name}").items
    found: dict[Key, JSON] = {}
    for item in (kube.api.sanitize_for_serialization(s) for s in slices):
        spec = item["spec"]
        for device in spec.get("devices") or []:
            found[(spec["driver"], spec["pool"]["name"], device["name"])] = device
    return found


def _rows(kube: Kube) -> dict[Key, JSON]:
    """`kubectl dra devices --node <node> -o json`, by device."""
    document = kubectl_dra_json(kube.cp, "devices", "--node", kube.node.name)
    assert document["kind"] == "DeviceList"
    return {(r["driver"], r["pool"], r["device"]): r for r in document["devices"]}


def _capacity_totals(devices: Iterable[JSON]) -> dict[str, Fraction]:
    totals: dict[str, Fraction] = {}
    for device in devices:
        for name, entry in (device.get("capacity") or {}).items():
            totals[name] = totals.get(name, Fraction(0)) + parse_quantity(entry["value"])
    return totals


def _allocated_on(kube: Kube, published: dict[Key, JSON]) -> set[Key]:
    """The node's devices that some claim in the cluster has an allocation result for."""
    claims = kube.api.sanitize_for_serialization(
        kube.resource.list_resource_claim_for_all_namespaces().items)
    results = {(r["driver"], r["pool"], r["device"]) for c in claims
               for r in ((c.get("status") or {}).get("allocation") or {})
               .get("devices", {}).get("results") or []}
    return results & set(published)


def _wait_healthy(kube: Kube, pod: str, claim: JSON, device: str) -> None:
    """Wait until the kubelet shows the claim's device Healthy in the pod's status."""
    resource = f"k8s.{DRIVER}/device={claim['metadata']['uid']}-{device}"

    def shown() -> bool:
        statuses = ((kube.get_pod(pod) or {}).get("status") or {}).get("containerStatuses")
        return any(r.get("resourceID") == resource and r.get("health") == "Healthy"
                   for s in (statuses or [{}])[0].get("allocatedResourcesStatus") or []
                   for r in s.get("resources") or [])

    wait(f"pod {pod} shows {device} Healthy", shown, 90, kube.node.kubelet_log)


def _start_holder(kube: Kube) -> tuple[JSON, JSON]:
    """A running pod with one GPU of the scheduler's choice: its claim and result."""
    kube.template("any-gpu", GPU)
    kube.pod("holder", "any-gpu")
    claim = kube.claim_of(kube.wait_running("holder"))
    [result] = allocated(claim)
    if require_health(kube):
        _wait_healthy(kube, "holder", claim, result["device"])
    return claim, result


def require_health(kube: Kube) -> bool:
    """Whether this release's kubelet shows device health in this pod's status."""
    return bool(kube.cp.features().get("ResourceHealthStatus")) and \
        releases.health_names_generated_claims(kube.cp)


def test_node_kubectl_dra_devices_shows_the_pod_holding_its_gpu(kube: Kube) -> None:
    """`devices --node`: a row for each device the node publishes; the GPU the scheduler
    gave the running pod is held by its claim and pod, used wholly and (where the kubelet
    reports it) Healthy; every other device is free; the table says the same."""
    claim, result = _start_holder(kube)
    held: Key = (result["driver"], result["pool"], result["device"])
    published = _published(kube)
    rows = _rows(kube)
    assert set(rows) == set(published)
    name = f"{NAMESPACE}/{claim['metadata']['name']}"
    row = rows.pop(held)
    assert row["allocated"] is True
    assert [(h["claim"], h["request"], h["pods"]) for h in row["holders"]] == [
        (name, "dev", [f"{NAMESPACE}/holder"])]
    [memory] = row["capacity"]
    assert parse_quantity(memory["used"]) == parse_quantity(memory["total"]) > 0
    if require_health(kube):
        assert row["health"] == "Healthy"
    busy = {key: r["holders"] for key, r in rows.items() if r["allocated"] or r["holders"]}
    assert busy == {}, "devices no claim holds shown held"
    assert {r["health"] for r in rows.values()} == {None}
    line = next(line for line in kubectl_dra(kube.cp, "devices", "--node", kube.node.name)
                .splitlines() if f" {held[2]} " in line)
    assert f"{name} -> holder" in line


def test_node_kubectl_dra_top_and_why_agree_with_the_cluster(kube: Kube) -> None:
    """`top`: the node's devices and allocated devices are what its slices and the
    cluster's claims hold, capacity totals what the slices publish; `why` on the running
    pod names the scheduler's allocation."""
    claim, result = _start_holder(kube)
    published = _published(kube)
    groups = {g["group"]: g for g in kubectl_dra_json(kube.cp, "top")["groups"]}
    node = groups[kube.node.name]
    assert node["devices"] == len(published)
    assert node["allocated"] == len(_allocated_on(kube, published)) == 1
    totals = {c["name"]: parse_quantity(c["total"]) for c in node["capacity"]}
    assert totals == _capacity_totals(published.values())
    used = {c["name"]: parse_quantity(c["used"]) for c in node["capacity"]}
    gpu = published[(result["driver"], result["pool"], result["device"])]
    assert used["memory"] == parse_quantity(gpu["capacity"]["memory"]["value"])
    table = kubectl_dra(kube.cp, "top").splitlines()
    assert table[0].split()[:3] == ["NODE", "DEVICES", "ALLOCATED"]
    [line] = [line.split() for line in table if line.startswith(f"{kube.node.name} ")]
    assert line[1:3] == [str(len(published)), "1"]
    text = kubectl_dra(kube.cp, "why", "pod/holder", "-n", NAMESPACE).splitlines()
    assert text == [
        f"claim {NAMESPACE}/{claim['metadata']['name']}: allocated on node {kube.node.name}",
        f"  {result['driver']}/{result['pool']}/{result['device']} (dev)",
        "  reserved for: holder"]


# -- why: pods the scheduler keeps Pending --------------------------------------------------


def _still_unschedulable(kube: Kube, name: str) -> None:
    """The scheduler's verdict stands: the pod is Pending, unbound, PodScheduled False."""
    pod = kube.get_pod(name) or {}
    conditions = {c["type"]: c for c in (pod.get("status") or {}).get("conditions") or []}
    scheduled = conditions.get("PodScheduled") or {}
    assert (pod.get("status", {}).get("phase"), pod["spec"].get("nodeName")) == ("Pending", None)
    assert (scheduled.get("status"), scheduled.get("reason")) == ("False", "Unschedulable")


def _why_pending(kube: Kube, pod: str) -> dict[str, JSON]:
    """`why pod/POD -o json` for a pod the scheduler marked Unschedulable: not
    allocatable, as the scheduler says (checked again after); its one request's checks of
    the real node's devices, by device name (other nodes' devices: ruled out by node)."""
    kube.wait_unschedulable(pod)
    document = kubectl_dra_json(kube.cp, "why", f"pod/{pod}", "-n", NAMESPACE)
    assert document["missing"] == []
    [report] = document["claims"]
    assert (report["allocated"], report["verdict"], report["error"]) == (
        False, NOT_ALLOCATABLE, "")
    [request] = report["requests"]
    here = f"{kube.node.name}/"
    elsewhere = {d["stage"] for d in request["devices"] if not d["device"].startswith(here)}
    assert elsewhere <= {"node"}, elsewhere
    _still_unschedulable(kube, pod)
    return {d["device"].rsplit("/", 1)[1]: d for d in request["devices"]
            if d["device"].startswith(here)}


def _allocated_now(kube: Kube, pod: str, device: str) -> None:
    """The reason gone, the scheduler runs the pod on `device` and `why` says so."""
    [result] = allocated(kube.claim_of(kube.wait_running(pod)))
    assert result["device"] == device
    [report] = kubectl_dra_json(kube.cp, "why", f"pod/{pod}", "-n", NAMESPACE)["claims"]
    assert (report["allocated"], report["node"]) == (True, kube.node.name)
    assert report["results"] == [f"{DRIVER}/{result['pool']}/{device} (dev)"]


def _stages(checks: dict[str, JSON], kind: str) -> dict[str, set[str]]:
    """The stages the node's devices failed at: the devices of `kind` ("gpu", "nic") on
    the request's own selector, the others on their DeviceClass's."""
    stages: dict[str, set[str]] = {"same": set(), "other": set()}
    for name, check in checks.items():
        stages["same" if name.startswith(f"{kind}-") else "other"].add(check["stage"])
    return stages


def _only(checks: dict[str, JSON], device: str) -> JSON:
    """The check of `device`; every other device of its kind fails on the request's
    selector, every device of another kind on the class."""
    found = checks.pop(device)
    assert _stages(checks, device.split("-")[0]) == {"same": {"selector"},
                                                     "other": {"class"}}, checks
    return found


def test_node_kubectl_dra_why_names_the_taint(kube: Kube, plugin: PluginDeployment) -> None:
    """(a) The only GPU a claim may have is tainted NoSchedule by the plugin (`simdra
    fault unhealthy`): `devices` shows the taint, `why` names it as gpu-3's failed check;
    after `fault reset` the pod runs on gpu-3."""
    require_feature(kube.cp, "DRADeviceTaints")
    plugin.exec(*FAULT, "gpu-3", "unhealthy")
    try:
        taints: list[JSON] = []

        def tainted() -> bool:
            taints[:] = (slice_device(kube.cp, kube.node.name, "gpu-3") or {}).get("taints") or []
            return bool(taints)

        wait("gpu-3 tainted in the node's slice", tainted, 60, kube.node.kubelet_log)
        [taint] = taints
        text = f"{taint['key']}={taint['value']}:{taint['effect']}"
        assert [r["taints"] for k, r in _rows(kube).items() if k[2] == "gpu-3"] == [[text]]
        kube.template("gpu-3", GPU, selector=f'device.attributes["{DRIVER}"].index == 3')
        kube.pod("tainted", "gpu-3")
        check = _only(_why_pending(kube, "tainted"), "gpu-3")
        assert (check["stage"], check["reason"]) == ("taint", f"has taint {text}, not tolerated")
    finally:
        plugin.exec(*FAULT, "reset")
    _allocated_now(kube, "tainted", "gpu-3")


def test_node_kubectl_dra_why_names_the_bandwidth_used_up(kube: Kube) -> None:
    """(b) A running pod holds 8G of nic-5's 10G; a pod wanting 4G of nic-5 stays
    Pending: `devices` shows 8G of 10G used, `why` names nic-5's bandwidth; the holder
    gone, the waiting pod runs on nic-5."""
    releases.require_capacity_requests(kube.cp)
    nic5 = f'device.attributes["{DRIVER}"].interfaceName == "sim5"'
    kube.template("nic5-8g", NIC, capacity={"bandwidth": "8G"}, selector=nic5)
    kube.template("nic5-4g", NIC, capacity={"bandwidth": "4G"}, selector=nic5)
    kube.pod("bw-holder", "nic5-8g")
    kube.wait_running("bw-holder")
    [row] = [r for k, r in _rows(kube).items() if k[2] == "nic-5"]
    [bandwidth] = row["capacity"]
    assert (parse_quantity(bandwidth["used"]), parse_quantity(bandwidth["total"])) == (
        parse_quantity("8G"), parse_quantity("10G"))
    kube.pod("bw-waiter", "nic5-4g")
    check = _only(_why_pending(kube, "bw-waiter"), "nic-5")
    assert (check["stage"], check["reason"]) == ("capacity", "bandwidth: 8G of 10G used")
    kube.delete_pod("bw-holder")
    _allocated_now(kube, "bw-waiter", "nic-5")


def test_node_kubectl_dra_why_quotes_the_selector_nothing_matches(kube: Kube) -> None:
    """(c) A GPU request whose CEL selector no device matches: `why` quotes it as every
    GPU's failed check (the class's selector for the node's other devices), in its text
    too."""
    expression = f'device.attributes["{DRIVER}"].model == "no-such-model"'
    kube.template("no-model", GPU, selector=expression)
    kube.pod("no-match", "no-model")
    checks = _why_pending(kube, "no-match")
    quoted = f"selector `{expression}` of request dev is false"
    gpus = {name: d["reason"] for name, d in checks.items() if name.startswith("gpu-")}
    assert gpus and set(gpus.values()) == {quoted}
    device_class = kube.api.sanitize_for_serialization(kube.resource.read_device_class(GPU))
    [selector] = device_class["spec"]["selectors"]
    by_class = f"selector `{selector['cel']['expression']}` of class {GPU} is false"
    assert {d["reason"] for name, d in checks.items() if name not in gpus} == {by_class}
    assert _stages(checks, "gpu") == {"same": {"selector"}, "other": {"class"}}
    text = kubectl_dra(kube.cp, "why", "no-match", "-n", NAMESPACE)  # a bare name: the pod
    assert f": {quoted}" in text and f"  verdict: {NOT_ALLOCATABLE}" in text
    _still_unschedulable(kube, "no-match")
