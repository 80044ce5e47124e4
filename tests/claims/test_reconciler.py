"""Reconciliation over real directories and a real kubelet socket: a leaked record is
freed (free mode) only on the kubelet's positive knowledge (its PodResources answer
lists this plugin's pod and DRA resources, and none of the record's devices), is kept
and reported otherwise, and a claim in use is never touched."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.claims.reconcile.plan import (
    CLAIM_DELETED,
    FREE,
    NOT_RESERVED,
    REPORT,
    UID_CHANGED,
    KubeletUsageSource,
    Reclaim,
    ReconcilePolicy,
)
from simdra._driver.claims.reconcile.reconciler import (
    IN_USE,
    KEPT_EVENT_REASON,
    KUBELET_UNKNOWN,
    REPORT_ONLY,
    ClaimReconciler,
    ReconcileReports,
)
from simdra._driver.claims.source import StaticClaimSource
from simdra._driver.claims.types import ClaimRef
from simdra._driver.kubelet.pod_resources import PodResourcesUsage
from simdra._driver.testing.pod_resources import PLUGIN_POD, ClaimUse, PodClaims, PodResourcesServer
from tests.claims.builders import RULES

from .builders import DRIVER, GPU_POOL, OTHER_DRIVER, claim, inventory, result

A = "aaaaaaaa-0000-4000-8000-000000000001"
B = "bbbbbbbb-0000-4000-8000-000000000002"
C = "cccccccc-0000-4000-8000-000000000003"
POD = {"resource": "pods", "name": "p", "uid": "pod-uid-1"}
INTERVAL = 1.0
GRACE = 1.0  # two checks: ceil(1 / 1) + 1


class Recorder:
    """Collects what the reconciler reports (the metrics' and Events' seam)."""

    def __init__(self) -> None:
        self.freed: list[tuple[str, str]] = []
        self.kept: list[tuple[str, str, str]] = []
        self.brakes: list[int] = []
        self.leaked: list[int] = []
        self.events: list[tuple[str, str, str]] = []

    def reports(self) -> ReconcileReports:
        return ReconcileReports(
            freed=lambda ref, reason: self.freed.append((ref.uid, reason)),
            kept=lambda ref, reason, why: self.kept.append((ref.uid, reason, why)),
            braked=self.brakes.append, leaked=self.leaked.append, events=self)

    def warn(self, claim: Any, reason: str, message: str) -> None:
        self.events.append((claim["metadata"]["uid"], reason, message))


class Node:
    """A node's directories, the API's claims, one preparer and its reconciler; the
    monotonic clock moves one interval per check."""

    def __init__(self, tmp_path, kubelet: KubeletUsageSource | None, *, mode: str = FREE,
                 gpus: int = 1, interval: float = INTERVAL, clock=None,
                 own_pod: tuple[str, str] | None = PLUGIN_POD) -> None:
        self.source = StaticClaimSource()
        self.cdi = tmp_path / "cdi"
        self.data = tmp_path / "data"
        self.preparer = Preparer(DRIVER, self.source, lambda: inventory(gpus=gpus, nics=0),
                                 self.cdi, self.data, rules=RULES)
        self.seen = Recorder()
        self.mono = 1000.0
        self.reconciler = ClaimReconciler(
            self.preparer, self.source, driver=DRIVER, node=GPU_POOL,
            policy=ReconcilePolicy(grace=GRACE, interval=interval), mode=mode,
            kubelet=kubelet, own_pod=own_pod, reports=self.seen.reports(),
            clock=clock or (lambda: time.time() + self.mono - 1000.0),  # moves with mono
            monotonic=lambda: self.mono)

    def check(self) -> list[Reclaim]:
        self.mono += INTERVAL
        return self.reconciler.check()

    def add(self, uid: str, reserved: bool = True, device: str = "gpu-0",
            name: str | None = None) -> ClaimRef:
        raw = claim(uid, [result("gpus", device)], name=name)
        raw["status"]["reservedFor"] = [POD] if reserved else []
        self.source.put(raw)
        return ClaimRef("default", raw["metadata"]["name"], uid)

    def prepare(self, ref: ClaimRef) -> str:
        return self.preparer.prepare([ref])[ref.uid].error

    def delete(self, ref: ClaimRef) -> None:
        del self.source.claims[(ref.namespace, ref.name)]

    def files(self) -> tuple[list[str], list[str]]:
        return (sorted(p.name for p in self.cdi.iterdir()),
                sorted(p.name for p in (self.data / "claims").iterdir()))


@pytest.fixture
def kubelet(tmp_path) -> Iterator[PodResourcesServer]:
    with PodResourcesServer(tmp_path / "pr.sock") as server:
        yield server


def _usage(server: PodResourcesServer) -> PodResourcesUsage:
    return PodResourcesUsage(server.socket_path, DRIVER, timeout_s=5)


def _running(ref: ClaimRef, device: str = "gpu-0") -> PodClaims:
    """A pod on the node whose container uses `ref` on `device`."""
    return PodClaims("default", "pod-1", [ClaimUse(ref.namespace, ref.name,
                                                   [(DRIVER, GPU_POOL, device, None)])])


# A pod using another driver's device: the kubelet lists DRA resources, so its answer
# shows its gate on and its claim cache filled.
BYSTANDER = PodClaims("default", "bystander", [ClaimUse("default", "nic", [
    (OTHER_DRIVER, "other-pool", "nic-0", None)])])


def test_a_leaked_record_the_kubelet_no_longer_uses_is_freed(tmp_path, kubelet, caplog):
    node = Node(tmp_path, _usage(kubelet))
    kubelet.set_pods([BYSTANDER])
    leaked = node.add(A)
    assert not node.prepare(leaked)
    node.delete(leaked)  # the kubelet lost its state: it will never unprepare A
    new = node.add(B)
    assert "exclusive and already prepared" in node.prepare(new)
    node.mono += 10 * INTERVAL  # the record is old: read on the next check

    assert node.check() == []  # one check is never enough
    assert kubelet.calls == 0  # nothing due yet: the kubelet is not asked
    with caplog.at_level(logging.INFO, logger="simdra._driver.claims.reconcile.reconciler"):
        [done] = node.check()

    assert (done.ref, done.reason) == (leaked, CLAIM_DELETED)
    assert node.seen.freed == [(A, CLAIM_DELETED)] and kubelet.calls == 1
    assert node.files() == ([], [])
    assert node.preparer.ledger.devices_in_use() == frozenset()
    [line] = [r.getMessage() for r in caplog.records
              if r.name == "simdra._driver.claims.reconcile.reconciler"]
    assert f"default/{leaked.name}" in line and CLAIM_DELETED in line
    assert not node.prepare(new)
    assert node.preparer.unprepare([leaked])[A].error == ""  # the kubelet's late call


def test_a_claim_a_running_pod_still_uses_is_kept_and_its_device_stays_held(
        tmp_path, kubelet, caplog):
    # The pod was force-deleted from the API and its claim with it, yet its container
    # still runs on the node (a kubelet cut off from the API server).
    node = Node(tmp_path, _usage(kubelet))
    ref = node.add(A)
    assert not node.prepare(ref)
    kubelet.set_pods([_running(ref)])
    node.delete(ref)
    with caplog.at_level(logging.WARNING, logger="simdra._driver.claims.reconcile.reconciler"):
        for _ in range(6):
            assert node.check() == []
    assert set(node.preparer.prepared()) == {A} and len(node.files()[0]) == 1
    assert node.seen.kept == [(A, CLAIM_DELETED, IN_USE)]  # reported once, not per check
    [line] = [r.getMessage() for r in caplog.records if "kept" in r.getMessage()]
    assert A in line and "still uses it" in line
    assert node.seen.events == []  # the claim is gone: nothing to put an Event on
    assert "exclusive and already prepared" in node.prepare(node.add(B))


def test_a_device_the_kubelet_lists_for_another_claim_counts_as_in_use(tmp_path, kubelet):
    node = Node(tmp_path, _usage(kubelet))
    ref = node.add(A)
    assert not node.prepare(ref)
    node.delete(ref)
    kubelet.set_pods([_running(ClaimRef("default", "made-again", C))])  # same gpu-0
    for _ in range(3):
        assert node.check() == []
    assert node.seen.kept == [(A, CLAIM_DELETED, IN_USE)]


@pytest.mark.parametrize("broken", ["no socket", "unavailable"])
def test_nothing_is_freed_when_the_kubelet_cannot_be_asked(tmp_path, kubelet, broken):
    usage = (PodResourcesUsage(str(tmp_path / "missing.sock"), DRIVER, timeout_s=1)
             if broken == "no socket" else _usage(kubelet))
    kubelet.fail_with(grpc.StatusCode.UNAVAILABLE)
    node = Node(tmp_path, usage)
    ref = node.add(A)
    assert not node.prepare(ref)
    node.delete(ref)
    for _ in range(3):
        assert node.check() == []
    assert set(node.preparer.prepared()) == {A}
    assert node.seen.kept == [(A, CLAIM_DELETED, KUBELET_UNKNOWN)]
    kubelet.set_pods([BYSTANDER])
    kubelet.fail_with(None)  # the kubelet answers again, no pod using A's device: freed
    if broken == "unavailable":
        assert [d.ref.uid for d in node.check()] == [A]


def test_a_kubelet_that_lists_no_dra_resources_at_all_cannot_tell(tmp_path, kubelet):
    # Its KubeletPodResourcesDynamicResources gate off: every pod lists no claims, also
    # the one the API server shows using B. Freeing A on that word could free a device
    # in use.
    node = Node(tmp_path, _usage(kubelet), gpus=2)
    leaked, used = node.add(A), node.add(B, device="gpu-1")
    assert not node.prepare(leaked) and not node.prepare(used)
    kubelet.set_pods([PodClaims("default", "pod-1")])
    node.delete(leaked)
    node.mono += 10 * INTERVAL  # B is read once and found in use
    for _ in range(3):
        assert node.check() == []
    assert node.seen.kept == [(A, CLAIM_DELETED, KUBELET_UNKNOWN)]


def test_report_mode_never_frees_and_reports_once_with_an_event(tmp_path, kubelet):
    node = Node(tmp_path, _usage(kubelet), mode=REPORT)
    ref = node.add(A, reserved=False)  # still exists, reserved for nobody
    assert not node.prepare(ref)
    for _ in range(10):
        assert node.check() == []
    assert set(node.preparer.prepared()) == {A}
    assert node.seen.kept == [(A, NOT_RESERVED, REPORT_ONLY)]
    [(uid, reason, message)] = node.seen.events
    assert (uid, reason) == (A, KEPT_EVENT_REASON)
    assert NOT_RESERVED in message and "--reconcile-mode=free" in message
    assert kubelet.calls == 0
    assert node.seen.leaked[-1] == 1


def test_the_brake_frees_nothing_when_every_record_looks_leaked(tmp_path, kubelet, caplog):
    # A kubeconfig pointing at another cluster: every claim "gone" at once.
    node = Node(tmp_path, _usage(kubelet), gpus=3)
    refs = [node.add(uid, device=f"gpu-{n}") for n, uid in enumerate((A, B, C))]
    for ref in refs:
        assert not node.prepare(ref)
        node.delete(ref)
    with caplog.at_level(logging.WARNING, logger="simdra._driver.claims.reconcile.reconciler"):
        for _ in range(5):
            assert node.check() == []
    assert len(node.preparer.prepared()) == 3
    assert node.seen.brakes == [3] * 5 and node.seen.kept == [] and kubelet.calls == 0
    [line] = [r.getMessage() for r in caplog.records if "at once" in r.getMessage()]
    assert "3 of 3" in line and "freeing none" in line


def test_a_claim_in_use_is_never_reconciled(tmp_path, kubelet):
    node = Node(tmp_path, _usage(kubelet))
    ref = node.add(A)
    assert not node.prepare(ref)
    for _ in range(5):
        node.mono += 100 * INTERVAL
        assert node.check() == []
    assert set(node.preparer.prepared()) == {A}
    assert node.seen.freed == [] and node.seen.kept == []


def test_a_prepare_between_checks_keeps_the_claim(tmp_path, kubelet):
    node = Node(tmp_path, _usage(kubelet))
    kubelet.set_pods([BYSTANDER])
    ref = node.add(A, reserved=False)
    assert not node.prepare(ref)
    node.mono += 10 * INTERVAL  # due for its first read
    assert node.check() == []  # suspected: not reserved
    time.sleep(0.01)  # a later touch stamp
    assert not node.prepare(ref)  # a pod uses it after all
    assert node.check() == []  # starts over
    assert set(node.preparer.prepared()) == {A}
    [done] = node.check()  # still unreserved on two checks since
    assert done.reason == NOT_RESERVED


def test_reclaim_skips_a_claim_prepared_after_it_was_judged(tmp_path):
    # The guard the serialized section applies, whatever the plan said: a prepare that
    # answers from the record after the plan saw its touch stamp wins.
    node = Node(tmp_path, None)
    ref = node.add(A)
    assert not node.prepare(ref)
    [seen] = [r.touched_at for r in node.preparer.recorded().values()]
    time.sleep(0.01)
    assert not node.prepare(ref)
    assert node.preparer.reclaim([Reclaim(ref, CLAIM_DELETED, seen)]) == {}
    assert set(node.preparer.prepared()) == {A}
    [now] = [r.touched_at for r in node.preparer.recorded().values()]
    assert node.preparer.reclaim([Reclaim(ref, CLAIM_DELETED, now)])[A].error == ""
    assert node.files() == ([], [])


def test_an_unreadable_claim_is_left_alone(tmp_path, kubelet):
    node = Node(tmp_path, _usage(kubelet))
    ref = node.add(A)
    assert not node.prepare(ref)

    def broken(namespace, name):
        raise RuntimeError("API down")

    node.source.get = broken  # type: ignore[method-assign]
    for _ in range(3):
        node.mono += 100 * INTERVAL
        assert node.check() == []
    assert set(node.preparer.prepared()) == {A}


def test_claims_are_read_when_due_not_on_every_check(tmp_path, kubelet):
    # The API server's load: a claim just prepared was read by its prepare; one found in
    # use is read again after twice the wait before, up to the longest wait.
    wall = [time.time()]
    node = Node(tmp_path, _usage(kubelet), interval=60, clock=lambda: wall[0])
    reads: list[str] = []
    get = node.source.get

    def counting(namespace, name):
        reads.append(name)
        return get(namespace, name)

    node.source.get = counting  # type: ignore[method-assign]
    kubelet.set_pods([BYSTANDER])
    ref = node.add(A)
    assert not node.prepare(ref)
    prepared = len(reads)
    start = node.mono

    def reads_at(offset: float, reclaimed: int = 0) -> int:
        wall[0] = time.time() + offset
        node.mono = start + offset - INTERVAL  # check() adds one interval
        before = len(reads)
        assert len(node.check()) == reclaimed
        return len(reads) - before

    assert reads_at(0) == 0  # its prepare has just read it
    assert reads_at(61) == 1  # one interval later
    assert reads_at(61 + 60) == 0  # next wait: two intervals, at most a quarter less
    assert reads_at(61 + 120) == 1
    assert prepared in (1, 2)  # a prepare reads the claim once (twice if re-read)
    node.delete(ref)  # leaked while quiet: read within the wait, then on every check
    assert reads_at(61 + 120 + 240) == 1
    assert reads_at(61 + 120 + 240 + 60, reclaimed=1) == 1  # ceil(1 / 60) + 1 checks
    assert node.seen.freed == [(A, CLAIM_DELETED)]


GROUP = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "trainers",
         "uid": "group-uid-1"}


def _group_pod(ref: ClaimRef, pod: str) -> PodClaims:
    """A pod of the PodGroup on the node whose container uses the group's claim `ref`."""
    return PodClaims("default", pod, [ClaimUse(ref.namespace, ref.name,
                                               [(DRIVER, GPU_POOL, "gpu-0", None)])])


def test_a_claim_reserved_for_a_pod_group_is_kept_while_any_member_runs(tmp_path, kubelet):
    # DRAWorkloadResourceClaims: reservedFor names the PodGroup, never its pods, so it
    # stays the same while the group's pods come and go on the node.
    node = Node(tmp_path, _usage(kubelet))
    ref = node.add(A)
    node.source.claims[(ref.namespace, ref.name)]["status"]["reservedFor"] = [GROUP]
    assert not node.prepare(ref) and not node.prepare(ref)  # once per member: one record
    kubelet.set_pods([_group_pod(ref, "member-1"), _group_pod(ref, "member-2")])
    for _ in range(4):
        assert node.check() == []
    kubelet.set_pods([_group_pod(ref, "member-2")])  # the first member went
    for _ in range(8):
        assert node.check() == []
    kubelet.set_pods([])  # the last member went, the kubelet not yet called unprepare
    for _ in range(8):
        assert node.check() == []
    assert set(node.preparer.prepared()) == {A}
    assert (node.seen.kept, node.seen.freed, set(node.seen.leaked)) == ([], [], {0})
    assert kubelet.calls == 0  # never a suspect: the kubelet was never even asked

    assert node.preparer.unprepare([ref])[A].error == ""  # the kubelet's unprepare
    assert node.files() == ([], [])
    assert node.check() == [] and node.seen.kept == []


def test_a_pod_group_claim_is_freed_once_the_group_is_gone_and_the_kubelet_forgot_it(
        tmp_path, kubelet):
    # The kubelet lost its state; then the PodGroup was deleted and the resourceclaim
    # controller dropped its reservation: nothing will unprepare the record but us.
    node = Node(tmp_path, _usage(kubelet))
    ref = node.add(A)
    node.source.claims[(ref.namespace, ref.name)]["status"]["reservedFor"] = [GROUP]
    assert not node.prepare(ref)
    kubelet.set_pods([BYSTANDER])
    node.mono += 10 * INTERVAL  # the record is old: read on the next check
    assert node.check() == []
    node.source.claims[(ref.namespace, ref.name)]["status"]["reservedFor"] = []
    node.mono += 10 * INTERVAL  # past the wait before a claim in use is read again
    assert node.check() == []  # one check is never enough
    [done] = node.check()
    assert (done.ref, done.reason) == (ref, NOT_RESERVED)
    assert node.files() == ([], [])


# --- free only on the kubelet's positive knowledge ------------------------------------


def _leak(node: Node, *uids: str) -> list[ClaimRef]:
    """Prepare a claim per UID (gpu-0, gpu-1, ...), then lose them from the API server
    (the kubelet lost its state: nothing will unprepare them); the records are old."""
    refs = [node.add(uid, device=f"gpu-{n}") for n, uid in enumerate(uids)]
    for ref in refs:
        assert not node.prepare(ref)
        node.delete(ref)
    node.mono += 10 * INTERVAL
    return refs


def test_nothing_is_freed_until_the_kubelet_lists_the_plugins_own_pod(tmp_path, caplog):
    # A kubelet just restarted answers before it has synced its pods (or the socket is
    # another node's kubelet): its answer lists DRA resources but not this plugin's pod,
    # so "no pod uses A's device" proves nothing.
    with PodResourcesServer(tmp_path / "pr.sock", plugin_pod=None) as kubelet:
        kubelet.set_pods([BYSTANDER])
        node = Node(tmp_path, _usage(kubelet))
        _leak(node, A)
        with caplog.at_level(logging.WARNING, logger="simdra._driver.claims.reconcile.reconciler"):
            for _ in range(4):
                assert node.check() == []
        assert set(node.preparer.prepared()) == {A}
        assert node.seen.kept == [(A, CLAIM_DELETED, KUBELET_UNKNOWN)]
        [line] = [r.getMessage() for r in caplog.records if "kept" in r.getMessage()]
        assert f"does not list this plugin's pod {PLUGIN_POD[0]}/{PLUGIN_POD[1]}" in line

        kubelet.set_pods([PodClaims(*PLUGIN_POD), BYSTANDER])  # synced: lists it now
        assert [d.ref.uid for d in node.check()] == [A]
        assert node.files() == ([], [])


def test_free_mode_without_the_plugins_pod_frees_nothing_and_says_so_at_start(
        tmp_path, kubelet, caplog):
    # Outside a pod (no --pod-namespace/--pod-name) the answer cannot be checked.
    kubelet.set_pods([BYSTANDER])
    node = Node(tmp_path, _usage(kubelet), own_pod=None)
    _leak(node, A)
    for _ in range(4):
        assert node.check() == []
    assert set(node.preparer.prepared()) == {A}
    assert node.seen.kept == [(A, CLAIM_DELETED, KUBELET_UNKNOWN)]
    with caplog.at_level(logging.INFO, logger="simdra._driver.claims.reconcile.reconciler"):
        node.reconciler.start()
        node.reconciler.stop()
    [start] = [r.getMessage() for r in caplog.records if "free mode" in r.getMessage()]
    assert "frees nothing" in start and "--pod-name" in start


def test_an_answer_with_no_dra_resources_frees_nothing_even_with_no_claim_in_use(
        tmp_path, kubelet):
    # The kubelet's claim cache lost (or its gate off), and every record looks leaked:
    # two claims whose pods still run, which the brake (above 2) lets through. The
    # kubelet lists its pods, the plugin's among them, but no DRA resource at all.
    kubelet.set_pods([PodClaims("default", "pod-1"), PodClaims("default", "pod-2")])
    node = Node(tmp_path, _usage(kubelet), gpus=2)
    _leak(node, A, B)
    for _ in range(4):
        assert node.check() == []
    assert set(node.preparer.prepared()) == {A, B}
    assert sorted(node.seen.kept) == [(A, CLAIM_DELETED, KUBELET_UNKNOWN),
                                      (B, CLAIM_DELETED, KUBELET_UNKNOWN)]
    kubelet.set_pods([BYSTANDER])  # it lists DRA resources again, neither device
    assert sorted(d.ref.uid for d in node.check()) == [A, B]


@pytest.mark.parametrize("device", ["gpu-1", "gpu-0"])
def test_a_claim_made_again_under_the_same_name_does_not_keep_the_stale_record(
        tmp_path, kubelet, device):
    # The kubelet lost its state, the claim was deleted and made again under the same
    # name (a StatefulSet's pod, a script). On another device its pod runs; on the
    # stale record's device its prepare is refused, and the kubelet lists the claim
    # without devices (it lists a claim's devices once prepared). Either way the name
    # is another claim's: the record is freed and the new pod gets its device.
    node = Node(tmp_path, _usage(kubelet), gpus=2)
    [stale] = _leak(node, A)
    again = node.add(C, device=device, name=stale.name)
    error = node.prepare(again)
    assert ("exclusive and already prepared" in error) == (device == "gpu-0")
    listed = [] if error else [(DRIVER, GPU_POOL, device, None)]
    kubelet.set_pods([PodClaims("default", "pod-1", [
        ClaimUse(stale.namespace, stale.name, listed)])])
    assert node.check() == []  # one check is never enough
    [done] = node.check()
    assert (done.ref, done.reason) == (stale, UID_CHANGED)
    assert node.seen.kept == []
    assert not node.prepare(again)
    assert set(node.preparer.prepared()) == {C}


def test_reads_still_due_count_toward_the_brake(tmp_path, kubelet):
    # A kubeconfig pointing at another cluster: two claims answer 404, the third's read
    # fails every time. Two leaks alone pass the brake; with the read still due, three
    # records are in doubt and none is freed.
    kubelet.set_pods([BYSTANDER])
    node = Node(tmp_path, _usage(kubelet), gpus=3)
    refs = _leak(node, A, B, C)
    get = node.source.get

    def third_fails(namespace, name):
        if name == refs[2].name:
            raise RuntimeError("403 Forbidden")
        return get(namespace, name)

    node.source.get = third_fails  # type: ignore[method-assign]
    for _ in range(5):
        assert node.check() == []
    assert set(node.preparer.prepared()) == {A, B, C}
    assert node.seen.brakes == [3] * 5 and node.seen.kept == []
