"""Seamless upgrade: two plugin instances (different --pod-uid) over the same directories,
as a DaemonSet rolling update with maxSurge runs them. Claims move between instances."""

from __future__ import annotations

import signal

from simdra._driver.testing.allocation.builders import exactly
from simdra._driver.testing.cluster import LocalCluster

OLD, NEW = "0a0a0a0a-0000-4000-8000-00000000000a", "0b0b0b0b-0000-4000-8000-00000000000b"


def _gpu_claim(cluster: LocalCluster, name: str) -> None:
    cluster.create_claim(name, exactly("gpu", "gpu.dra.example.com"))
    cluster.allocate(name)


def test_claims_move_between_two_instances(cluster: LocalCluster) -> None:
    old = cluster.start_plugin(pod_uid=OLD, num_devices=2)
    _gpu_claim(cluster, "before-upgrade")
    first = cluster.prepare("before-upgrade")
    before = cluster.claim_ref("before-upgrade")

    new = cluster.start_plugin(pod_uid=NEW, num_devices=2)
    assert cluster.kubelet is not None
    assert len(cluster.kubelet.instances) == 2
    assert cluster.kubelet.plugin(cluster.driver_name).registration_socket == str(
        new.registration_socket)  # the kubelet prefers the newest instance

    # The new instance answers for a claim the old one prepared, and sees its device as
    # taken when a second claim arrives after the old one prepared more.
    assert cluster.prepare("before-upgrade") == first
    _gpu_claim(cluster, "during-upgrade")
    during = cluster.prepare("during-upgrade")
    [device] = during[cluster.claim_ref("during-upgrade").uid]["devices"]
    assert device["device_name"] != first[before.uid]["devices"][0]["device_name"]

    assert old.stop(signal.SIGTERM) == 0
    assert old.registration_socket is not None and not old.registration_socket.exists()
    assert new.registration_socket is not None and new.registration_socket.is_socket()
    assert (cluster.data_dir / f"dra-{NEW}.sock").is_socket()
    assert not (cluster.data_dir / f"dra-{OLD}.sock").exists()

    cluster.kubelet.sync()
    assert [i.registration_socket for i in cluster.kubelet.instances] == [
        str(new.registration_socket)]
    assert cluster.unprepare(before) == {before.uid: {"error": ""}}
    assert list(cluster.cdi_root.glob(f"*{before.uid}*")) == []


def test_claim_prepared_by_old_instance_after_new_started_is_unprepared_by_new(
        cluster: LocalCluster) -> None:
    old = cluster.start_plugin(pod_uid=OLD, num_devices=2)
    new = cluster.start_plugin(pod_uid=NEW, num_devices=2)
    assert cluster.kubelet is not None
    _gpu_claim(cluster, "late")
    ref = cluster.claim_ref("late")
    # Route this call to the old instance, as the kubelet may (no guarantee which).
    old_instance = next(i for i in cluster.kubelet.instances
                        if i.registration_socket == str(old.registration_socket))
    cluster.kubelet.deregister(str(new.registration_socket))
    assert cluster.kubelet.plugin(cluster.driver_name) is old_instance
    assert cluster.prepare("late")[ref.uid]["error"] == ""
    cluster.kubelet.sync()  # re-registers the new instance, which is preferred again
    assert cluster.kubelet.plugin(cluster.driver_name).registration_socket == str(
        new.registration_socket)

    assert cluster.unprepare(ref) == {ref.uid: {"error": ""}}

    assert list(cluster.cdi_root.glob(f"*{ref.uid}*")) == []


def _route_to(cluster: LocalCluster, plugin) -> None:
    """Make the kubelet emulator call `plugin`: deregister every other instance."""
    assert cluster.kubelet is not None
    cluster.kubelet.sync()
    for instance in list(cluster.kubelet.instances):
        if instance.registration_socket != str(plugin.registration_socket):
            cluster.kubelet.deregister(instance.registration_socket)


def test_each_instance_sees_what_the_other_did_on_disk(cluster: LocalCluster) -> None:
    old = cluster.start_plugin(pod_uid=OLD, num_devices=2)
    new = cluster.start_plugin(pod_uid=NEW, num_devices=2)
    _gpu_claim(cluster, "taken")
    taken = cluster.claim_ref("taken")
    _route_to(cluster, old)
    answer = cluster.prepare("taken")
    device = answer[taken.uid]["devices"][0]["device_name"]

    # A forged claim for the same exclusive device must be refused by the NEW instance,
    # although it started before the old one prepared "taken".
    stored = cluster.api.get_object("resourceclaims", "taken", "default")
    assert stored is not None
    forged = {"metadata": {"name": "forged", "namespace": "default"},
              "spec": stored["spec"], "status": stored["status"]}
    cluster.api.put_object("resourceclaims", forged)
    _route_to(cluster, new)
    refused = cluster.prepare("forged")
    assert device in refused[cluster.claim_ref("forged").uid]["error"]

    # The new instance unprepares "taken"; the old one must not answer from memory later.
    assert cluster.unprepare(taken) == {taken.uid: {"error": ""}}
    _route_to(cluster, old)
    again = cluster.prepare("taken")
    assert again == answer
    assert (cluster.data_dir / "claims" / f"{taken.uid}.json").is_file()
    assert len(list(cluster.cdi_root.glob(f"*{taken.uid}*"))) == 1
