"""Reconciliation: find prepared claims the kubelet will never unprepare, report them,
and free them only when the kubelet agrees (the side-effect half; the decision is
`simdra._driver.claims.reconcile.plan`).

The kubelet unprepares only the claims its own checkpoint (`dra_manager_state`) lists.
When it loses that state, or a node keeps the plugin's data directory over a reimage,
a record outlives its claim and keeps the device held. So at start-up, and every
`interval` seconds, the claims of the records due are read from the API server (one
GET each; a claim found in use is read less and less often, see `due_reads`), and a
record that has looked leaked long enough is a candidate. What happens to it depends on
the mode:

    report  (the default) never unprepares: the record is kept and reported (a metric,
            one log line, an Event on the claim when it still exists). A freed device
            that a container still uses is two workloads on one GPU; a kept one is a
            device idle until someone looks, which the report says.
    free    unprepares it (`Preparer.reclaim`, the path NodeUnprepareResources takes)
            only on the kubelet's positive knowledge: its PodResources answer lists
            this plugin's own pod (it has synced, and it is this node's kubelet), lists
            DRA resources for some container (its gate is on, its claim cache filled),
            and lists none of the record's devices (`KubeletUsage`). When the kubelet
            cannot be asked, or its answer falls short, nothing is freed.

A record kept is reported once per claim and cause, not on every check, and with an
Event on its claim (events.k8s.io/v1, `ApiClaimEvents`), so that what the plugin decided
about a claim shows in `kubectl describe resourceclaim` and `kubectl get events`, next
to the scheduler's and the kubelet's.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import quote

from simdra._driver.claims.reconcile.plan import (
    FAILED,
    FOUND,
    FREE,
    GONE,
    MODES,
    REPORT,
    InUse,
    KubeletUnavailable,
    KubeletUsageSource,
    PodKey,
    Reclaim,
    ReconcilePlan,
    ReconcilePolicy,
    RecordedClaim,
    Suspect,
    due_reads,
    plan_reconcile,
)
from simdra._driver.claims.source import ClaimSource
from simdra._driver.claims.types import ClaimNotFound, ClaimRef, UnprepareResult, claim_label
from simdra._driver.core.textlimits import clip, clip_error, escape_controls, one_line
from simdra._driver.kubeapi import RestClient

log = logging.getLogger(__name__)

# Why a record due to be freed was kept (the `why` of simdra_reconcile_kept_claims_total).
IN_USE = "in_use"  # the kubelet lists a pod that uses the claim or its devices
KUBELET_UNKNOWN = "kubelet_unknown"  # the kubelet could not tell
REPORT_ONLY = "report_only"  # --reconcile-mode=report
KEPT_WHY = (IN_USE, KUBELET_UNKNOWN, REPORT_ONLY)
# The Event a kept record puts on its claim.
KEPT_EVENT_REASON = "PreparedClaimKept"
EVENTS_PATH = "/apis/events.k8s.io/v1/namespaces/{namespace}/events"
# The API server refuses an Event whose note is longer (bytes).
NOTE_LIMIT = 1024
# Posting an Event is a report, not part of any decision: never wait long for it.
EVENT_TIMEOUT_S = 5.0


class Reclaimer(Protocol):
    """The preparer as reconciliation uses it."""

    def recorded(self) -> dict[str, RecordedClaim]:
        """The prepared claims and when each was last prepared."""
        ...

    def reclaim(self, claims: list[Reclaim]) -> dict[str, UnprepareResult]:
        """Unprepare these claims unless prepared since their touch stamp."""
        ...


class ClaimEvents(Protocol):
    """Posts an Event about a claim (best effort: must not raise for API failures)."""

    def warn(self, claim: Mapping[str, Any], reason: str, message: str) -> None:
        """A Warning Event regarding `claim` (its JSON as read from the API server)."""
        ...


@dataclass(frozen=True)
class ReconcileReports:
    """Where the reconciler reports (each optional): claims freed (`freed(ref, reason)`),
    claims read (`read(result)`: FOUND, GONE or FAILED), records kept when due
    (`kept(ref, reason, why)`), checks the brake stopped (`braked(leaked)`), records
    that look leaked after each check (`leaked(count)`), and Events on claims."""

    freed: Callable[[ClaimRef, str], None] | None = None
    read: Callable[[str], None] | None = None
    kept: Callable[[ClaimRef, str, str], None] | None = None
    braked: Callable[[int], None] | None = None
    leaked: Callable[[int], None] | None = None
    events: ClaimEvents | None = None


class ClaimReconciler:
    """Checks the records against the API server (and the kubelet, before freeing);
    `check()` is one pass, `start()` runs one now and then one every `policy.interval`
    seconds on a thread until `stop()`.

    `mode`: REPORT or FREE (see the module docstring); `kubelet`: the kubelet's answer
    to which devices its pods use, and `own_pod` this plugin's pod (namespace, name),
    which that answer must list (FREE mode frees nothing without either). `clock` is
    the wall clock the records' touch stamps are in, `monotonic` the one grace is timed
    on.
    """

    def __init__(
        self,
        preparer: Reclaimer,
        source: ClaimSource,
        *,
        driver: str,
        node: str,
        policy: ReconcilePolicy,
        mode: str = REPORT,
        kubelet: KubeletUsageSource | None = None,
        own_pod: PodKey | None = None,
        reports: ReconcileReports | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"reconcile mode {mode!r}: one of {', '.join(MODES)}")
        self._preparer = preparer
        self._source = source
        self._driver = driver
        self._node = node
        self._policy = policy
        self._mode = mode
        self._kubelet = kubelet
        self._own_pod = own_pod
        self._reports = reports or ReconcileReports()
        self._clock = clock
        self._monotonic = monotonic
        self._suspects: Mapping[str, Suspect] = {}
        self._in_use: Mapping[str, InUse] = {}
        self._reported: dict[str, str] = {}  # claim UID -> why it was last reported kept
        self._braked = False
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def check(self) -> list[Reclaim]:
        """One pass: read the claims of the records due, plan, free what is due and the
        kubelet agrees to (FREE mode), report the rest; returns the claims unprepared."""
        now, wall = self._monotonic(), self._clock()
        records = self._preparer.recorded()
        due = due_reads(records, self._suspects, self._in_use, now, self._policy, wall)
        seen = self._read({uid: records[uid] for uid in due})
        plan = plan_reconcile(records, seen, self._suspects, now, driver=self._driver,
                              node=self._node, policy=self._policy, in_use=self._in_use,
                              due=due)
        self._suspects, self._in_use = plan.suspects, plan.in_use
        self._reported = {u: w for u, w in self._reported.items() if u in plan.suspects}
        self._report_brake(plan, len(records))
        if self._reports.leaked is not None:
            self._reports.leaked(len(plan.suspects))
        free = self._kubelet_agrees(plan, records, seen)
        return self._free(free) if free else []

    def _report_brake(self, plan: ReconcilePlan, records: int) -> None:
        if plan.braked and not self._braked:
            log.warning("reconcile: %d of %d prepared claims are in doubt at once (%d look "
                        "leaked, %d could not be read); freeing none of them (that many at "
                        "once is a wrong cluster or a broken controller more likely than "
                        "leaks): check the node's pods and claims by hand",
                        plan.doubtful, records, len(plan.suspects), plan.unread)
        if plan.braked and self._reports.braked is not None:
            self._reports.braked(plan.doubtful)
        self._braked = plan.braked

    def _kubelet_agrees(
        self, plan: ReconcilePlan, records: Mapping[str, RecordedClaim],
        seen: Mapping[str, Mapping[str, Any] | None],
    ) -> list[Reclaim]:
        """The due claims that may be freed now; every other due claim is reported."""
        if not plan.reclaim:
            return []
        if self._mode == REPORT:
            return self._keep_all(plan.reclaim, REPORT_ONLY,
                                  "reconcile mode is report (--reconcile-mode=free frees "
                                  "it when the kubelet agrees)", seen)
        if self._kubelet is None:
            return self._keep_all(plan.reclaim, KUBELET_UNKNOWN, "no kubelet to ask", seen)
        try:
            usage = self._kubelet.usage()
        except KubeletUnavailable as err:
            return self._keep_all(plan.reclaim, KUBELET_UNKNOWN, str(err), seen)
        if (unknown := usage.unknown(self._own_pod)) is not None:
            return self._keep_all(plan.reclaim, KUBELET_UNKNOWN, unknown, seen)
        free = []
        for item in plan.reclaim:
            if usage.uses(records[item.ref.uid]):
                self._keep(item, IN_USE, "a pod on this node still uses its devices "
                           "(kubelet PodResources)", seen.get(item.ref.uid))
            else:
                free.append(item)
        return free

    def _keep_all(self, items: tuple[Reclaim, ...], why: str, detail: str,
                  seen: Mapping[str, Mapping[str, Any] | None]) -> list[Reclaim]:
        for item in items:
            self._keep(item, why, detail, seen.get(item.ref.uid))
        return []

    def _keep(self, item: Reclaim, why: str, detail: str,
              claim: Mapping[str, Any] | None) -> None:
        """Report a kept record once per claim and cause."""
        if self._reported.get(item.ref.uid) == why:
            return
        self._reported[item.ref.uid] = why
        message = one_line(f"looks leaked ({item.reason}) but is kept: {detail}", 900)
        log.warning("reconcile: kept %s: %s", _label(item.ref), message)
        if self._reports.kept is not None:
            self._reports.kept(item.ref, item.reason, why)
        if claim is not None and self._reports.events is not None:
            self._reports.events.warn(claim, KEPT_EVENT_REASON,
                                      f"{self._driver} on node {self._node}: {message}")

    def _free(self, items: list[Reclaim]) -> list[Reclaim]:
        answers = self._preparer.reclaim(items)
        done = []
        for item in items:
            answer = answers.get(item.ref.uid)
            if answer is None:
                continue  # prepared again, or unprepared by the kubelet, in the meantime
            if answer.error:
                log.warning("reconcile: unprepare of leaked %s (%s) failed: %s",
                            _label(item.ref), item.reason, answer.error)
                continue
            log.info("reconcile: unprepared %s: %s; its devices are free",
                     _label(item.ref), item.reason)
            done.append(item)
            if self._reports.freed is not None:
                self._reports.freed(item.ref, item.reason)
        return done

    def _read(self, records: Mapping[str, RecordedClaim]) -> dict[str, Mapping[str, Any] | None]:
        seen: dict[str, Mapping[str, Any] | None] = {}
        for uid, record in records.items():
            if self._stopped.is_set():
                break
            ref = record.ref
            try:
                seen[uid] = self._source.get(ref.namespace, ref.name)
                result = FOUND
            except ClaimNotFound:
                seen[uid] = None
                result = GONE
            except Exception as exc:  # unknown now: the plan starts this claim over
                log.warning("reconcile: cannot read %s: %s", _label(ref), one_line(exc))
                result = FAILED
            if self._reports.read is not None:
                self._reports.read(result)
        return seen

    def start(self) -> None:
        """Check now and then every `policy.interval` seconds, on a daemon thread."""
        if self._mode == FREE:  # what free mode will need, or that it frees nothing
            level = logging.WARNING if self._own_pod is None else logging.INFO
            log.log(level, "reconcile: %s", self._free_mode_line())
        self._thread = threading.Thread(target=self._run, name="claim-reconciler", daemon=True)
        self._thread.start()

    def _free_mode_line(self) -> str:
        if self._own_pod is None:
            return ("free mode frees nothing here: this plugin's pod is not known "
                    "(--pod-namespace and --pod-name, from the downward API in a pod), so "
                    "a leaked claim is kept and reported (kubelet_unknown)")
        namespace, name = self._own_pod
        return (f"free mode: a leaked claim is freed only when the kubelet's PodResources "
                f"answer lists this plugin's pod {namespace}/{name}, lists DRA resources, "
                "and lists none of the claim's devices")

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread (a check in progress finishes its current step first)."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self.check()
            except Exception:  # one failed pass must not end reconciliation
                log.exception("reconcile: check of the prepared claims failed")
            self._stopped.wait(self._policy.interval)


def _label(ref: ClaimRef) -> str:
    return claim_label(ref.namespace, ref.name, ref.uid)


# --- Events on claims ---------------------------------------------------------------


def claim_event(claim: Mapping[str, Any], *, reason: str, note: str, controller: str,
                instance: str, now: datetime | None = None) -> dict[str, Any]:
    """The Warning Event regarding `claim`, reported by `controller` from `instance`
    (the node), as events.k8s.io/v1 wants it."""
    meta = claim.get("metadata") or {}
    name = str(meta.get("name", ""))
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        # A unique name, as client-go's recorder makes: <object>.<unique suffix>.
        "metadata": {"name": f"{name[:200]}.{uuid.uuid4().hex[:16]}",
                     "namespace": meta.get("namespace", "")},
        "eventTime": stamp,
        "type": "Warning",
        "reason": reason,
        "action": "Reconcile",
        "note": clip_error(escape_controls(note), NOTE_LIMIT),
        "reportingController": controller,
        "reportingInstance": instance[:128],
        "regarding": {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "namespace": meta.get("namespace", ""),
            "name": name,
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
    }


class ApiClaimEvents:
    """Posts claim Events through the plugin's API client (a `ClaimEvents`); a failure
    is one log line, never an exception."""

    def __init__(self, client_of: Callable[[], RestClient], controller: str,
                 instance: str) -> None:
        self._client_of = client_of
        self._controller = controller
        self._instance = instance

    def warn(self, claim: Mapping[str, Any], reason: str, message: str) -> None:
        """Post a Warning Event regarding `claim`."""
        event = claim_event(claim, reason=reason, note=message,
                            controller=self._controller, instance=self._instance)
        path = EVENTS_PATH.format(namespace=quote(event["metadata"]["namespace"], safe=""))
        try:
            self._client_of().request("POST", path, body=event, timeout=EVENT_TIMEOUT_S)
        except Exception as err:  # a report that could not be posted; the log has it
            log.warning("cannot post Event %s on claim %s/%s: %s", reason,
                        clip(event["regarding"]["namespace"]), clip(event["regarding"]["name"]),
                        one_line(err))
