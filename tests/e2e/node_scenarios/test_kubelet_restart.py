"""A kubelet restart on the real node while claims are prepared: the kubelet resumes from
its checkpoint and registers the plugin again; running pods keep their devices and the
kubelet asks the plugin for nothing on their behalf; a new pod is prepared as usual.

What the kubelet asks is read from the plugin's own count of the kubelet's gRPC calls
(`simdra_kubelet_calls_total{service,method,code}` on its metrics port), not from log
lines: the kubelet (1.37, pkg/kubelet/kuberuntime) calls NodePrepareResources only when
it creates a pod's sandbox, and the sandboxes of running pods survive its restart."""

from __future__ import annotations

from .. import realnode
from ..realnode import (
    PLUGIN_NAMESPACE,
    Kube,
    PluginDeployment,
    cdi_files,
    cdi_mtimes,
    metric_sum,
    plugin_usage,
    spec_file,
    unit_env,
    wait,
)

CALLS = "simdra_kubelet_calls_total"
# The plugin watcher's two calls on the registration socket: the kubelet registered us.
REGISTRATION = ("GetInfo", "NotifyRegistrationStatus")


def _calls(plugin: PluginDeployment) -> dict[str, float]:
    """Successful kubelet calls per gRPC method, as the plugin counted them (the sum over
    the services that have the method: DRA v1 and v1beta1 alike)."""
    text = plugin.metrics()
    methods = (*REGISTRATION, "NodePrepareResources", "NodeUnprepareResources")
    return {m: metric_sum(text, CALLS, method=m, code="OK") for m in methods}


def _serves_exec(plugin: PluginDeployment) -> bool:
    """The API server reaches the kubelet for the plugin pod (logs, exec): after a
    restart, the kubelet's server comes up a moment after the Node is Ready again."""
    pods = plugin.ready_pods()
    return len(pods) == 1 and plugin.cp.kubectl(
        "logs", "-n", PLUGIN_NAMESPACE, pods[0]["metadata"]["name"], "--tail=1", check=False
    ).returncode == 0


def _container_ids(kube: Kube, name: str) -> list[tuple[str, int]]:
    statuses = (kube.get_pod(name) or {}).get("status", {}).get("containerStatuses") or []
    return [(s.get("containerID", ""), s.get("restartCount", 0)) for s in statuses]


def test_node_kubelet_restart_keeps_prepared_claims(
    kube: Kube, plugin: PluginDeployment
) -> None:
    """Restart the kubelet with a GPU pod and a NIC-share pod running: the restarted
    kubelet registers the plugin again (its GetInfo and NotifyRegistrationStatus calls
    counted by the plugin) and neither prepares nor unprepares anything; both pods keep
    running (same containers) with their CDI spec files untouched; a new pod costs one
    NodePrepareResources call; deleting the old pods still unprepares them."""
    kube.template("gpu-r", "gpu.dra.example.com")
    kube.template("nic-r", "nic.dra.example.com",
                  capacity=realnode.incidental_capacity(kube.cp, "1G"))
    kube.pod("keep-gpu", "gpu-r")
    kube.pod("keep-nic", "nic-r")
    names = ("keep-gpu", "keep-nic")
    claims = [kube.claim_of(kube.wait_running(n)) for n in names]
    before = {n: unit_env(kube.env(n)) for n in names}
    files = {spec_file(c) for c in claims}
    mtimes = {f: t for f, t in cdi_mtimes().items() if f in files}
    assert set(mtimes) == files
    containers = {n: _container_ids(kube, n) for n in names}
    calls = _calls(plugin)  # both pods run: the kubelet prepared their claims
    assert calls["NodePrepareResources"] >= 2, calls

    log = kube.node.kubelet_log
    kube.node.restart_kubelet()  # and waits for Node Ready
    plugin.wait_ready()  # its readiness is probed afresh by the new kubelet
    wait("restarted kubelet serves exec and logs of the plugin pod",
         lambda: _serves_exec(plugin), 60, log)
    now: dict[str, float] = {}

    def registered_again() -> bool:
        now.update(_calls(plugin))
        return all(now[m] > calls[m] for m in REGISTRATION)

    wait("restarted kubelet registers the plugin again (GetInfo and "
         "NotifyRegistrationStatus counted by the plugin)", registered_again, 90, log,
         lambda: f"calls before {calls}, now {now}")

    for n in names:
        assert _container_ids(kube, n) == containers[n], f"{n}: containers changed"
        assert (kube.get_pod(n) or {})["status"]["phase"] == "Running"
    assert {f: t for f, t in cdi_mtimes().items() if f in files} == mtimes
    after_restart = _calls(plugin)
    # The restarted kubelet found both claims in its checkpoint and the pods' sandboxes
    # running: it has no reason to prepare or unprepare anything.
    for method in ("NodePrepareResources", "NodeUnprepareResources"):
        assert after_restart[method] == calls[method], (
            f"{method} called across the kubelet restart: {calls} -> {after_restart}")
    held = {h["claim"]["uid"] for d in plugin_usage()["devices"] for h in d["holders"]}
    assert {c["metadata"]["uid"] for c in claims} <= held
    assert [f for f in kube.failed_prepares() if f.split(":")[0] in names] == []

    kube.pod("after-restart", "gpu-r")
    claim = kube.claim_of(kube.wait_running("after-restart"))
    [unit] = unit_env(kube.env("after-restart")).values()
    assert unit["CLAIM_UID"] == claim["metadata"]["uid"]
    [old] = before["keep-gpu"].values()
    assert unit["NAME"] != old["NAME"]
    # The one pod that needed a prepare got it through the restarted kubelet.
    assert _calls(plugin)["NodePrepareResources"] == after_restart["NodePrepareResources"] + 1

    for n in names:
        kube.delete_pod(n)
    wait("CDI spec files of the pods from before the restart removed",
         lambda: not (files & cdi_files()), 60, log, lambda: str(sorted(files & cdi_files())))
    unprepared = _calls(plugin)["NodeUnprepareResources"]
    assert unprepared >= after_restart["NodeUnprepareResources"] + len(names), (
        f"NodeUnprepareResources {after_restart['NodeUnprepareResources']} -> {unprepared} "
        f"for {len(names)} deleted pods")
