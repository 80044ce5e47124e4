"""Which prepared claims the kubelet will never unprepare (pure): the decision half of
reconciliation; `simdra._driver.claims.reconcile.reconciler` reads the API and acts on
the plan.

A record is leaked when its claim, as the API server has it now:

    claim_deleted       is gone (404);
    uid_changed         is another object under the same namespace/name;
    deallocated         has no allocation any more;
    allocation_changed  names other devices than the record, or a node selector that
                        excludes this node;
    not_reserved        is reserved for nobody (status.reservedFor empty).

The kubelet prepares a claim only for a pod in its reservedFor, and the allocation of a
node-local device pins every such pod to this node, so a claim that is still allocated
as recorded and reserved for anyone is left alone, whoever the consumer is.

Any of these is also what the API shows for a while around an ordinary unprepare (the
kubelet unprepares after the containers stop, before the pod's final status, and
retries failures every 60 s), so a leak is acted on only once it has lasted:

- the condition held on at least `policy.min_checks` consecutive checks
  (ceil(grace / interval) + 1; a check that did not see it, or could not read the claim,
  starts over), for at least `grace` seconds of the monotonic clock since the first;
- nothing prepared the claim (wrote its record or answered from it) since the first of
  those checks: the record's touch stamp is the one seen then (compared for equality,
  so a step of the wall clock neither shortens nor stretches anything).

A claim is gone only on the API server's word: a NotFound Status naming that claim
(`simdra._driver.claims.source`); any other answer is no evidence. And a plan never frees
many records at once: when more than `BRAKE_ALWAYS` records are in doubt in one check,
and more than `BRAKE_COUNT` or more than `BRAKE_SHARE` of all records, it frees none
(`braked`): that is what a wrong cluster, an empty etcd or a bad controller looks like,
not what leaks do. In doubt are the records that look leaked and those whose read was
due but got no answer (their read is still due): a failed read is no evidence that a
claim is in use, so a wrong cluster that answers some reads with 404 and the rest with
errors cannot slip under the brake one failed read at a time. What the plan says is due
is still only a candidate: the reconciler asks the kubelet before it frees anything,
and only its positive knowledge frees (`KubeletUsage`: what the kubelet says its pods
use, the PodResources answer (`simdra._driver.kubelet.pod_resources`) as the claims lane
sees it, so that the lane never imports the kubelet's wire types).

Reads are spread out (`due_reads`), since every record costs the API server a GET: a
suspect is read on every check; a record is first read one `interval` after it was
prepared (the prepare itself read the claim); a claim found in use is read again after
twice the wait before, up to `quiet_intervals` intervals (16 min at the default 60 s), that
wait shortened by up to a quarter by a fixed per-claim fraction, so claims prepared
together do not stay in step. 1,000 claims in use cost ~1 GET/s instead of ~17; a leak
on a claim long in use is noticed within that longest wait.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from simdra._driver.claims.plan.allocation import UnitKey, allocated_devices, path_value
from simdra._driver.claims.types import ClaimRef

CLAIM_DELETED = "claim_deleted"
UID_CHANGED = "uid_changed"
DEALLOCATED = "deallocated"
ALLOCATION_CHANGED = "allocation_changed"
NOT_RESERVED = "not_reserved"
REASONS = (CLAIM_DELETED, UID_CHANGED, DEALLOCATED, ALLOCATION_CHANGED, NOT_RESERVED)
# What one read of a record's claim gave: the claim, a 404, or no answer.
FOUND, GONE, FAILED = "found", "gone", "failed"
READ_RESULTS = (FOUND, GONE, FAILED)

DeviceKey = UnitKey  # (pool, device, shareID)
PodKey = tuple[str, str]  # (namespace, name): how PodResources names a pod (no UID in List)

# --reconcile-mode: report leaked records only, or free them when the kubelet agrees
# (`simdra._driver.claims.reconcile.reconciler`).
REPORT, FREE = "report", "free"
MODES = (REPORT, FREE)
# The shortest grace `--reconcile-grace` accepts: a kubelet unprepares a claim within
# seconds of its pod's containers stopping, so a leak shorter than this is an ordinary
# unprepare in flight.
MIN_GRACE_S = 30.0
# The brake (see the module docstring): up to BRAKE_ALWAYS leaks are always acted on;
# more are acted on only while they are at most BRAKE_COUNT and BRAKE_SHARE of all records.
BRAKE_ALWAYS = 2
BRAKE_COUNT = 10
BRAKE_SHARE = 0.25


@dataclass(frozen=True)
class RecordedClaim:
    """A prepared claim as the reconciler sees it: identity, devices, last prepare."""

    ref: ClaimRef
    devices: frozenset[DeviceKey]
    # Wall-clock seconds: record written, or a prepare answered from it. Compared for
    # equality (was it touched?) and used for the first read's delay only.
    touched_at: float


@dataclass(frozen=True)
class Suspect:
    """A record whose claim looked leaked on every check since `since`."""

    reason: str  # as of the latest check
    since: float  # when the first of these checks began (monotonic clock)
    checks: int
    touched_at: float  # the record's touch stamp at the first of these checks


@dataclass(frozen=True)
class InUse:
    """A record whose claim was last read in use: when, and the wait before the next
    read (doubled on every read that finds it in use)."""

    at: float
    wait: float


@dataclass(frozen=True)
class Reclaim:
    """Unprepare this claim, unless something prepared it since the record's touch
    stamp was `touched_at`."""

    ref: ClaimRef
    reason: str
    touched_at: float


@dataclass(frozen=True)
class ReconcilePolicy:
    """How long a leak must last before it is acted on (see the module docstring)."""

    grace: float = 300.0
    interval: float = 60.0  # between checks
    quiet_intervals: int = 16  # the longest wait between reads of a claim in use

    @property
    def min_checks(self) -> int:
        """Consecutive checks a leak must be seen on: as many as fit in the grace, plus
        the one that starts it."""
        return math.ceil(self.grace / self.interval) + 1

    @property
    def longest_wait(self) -> float:
        """Seconds at most between two reads of a claim found in use."""
        return self.interval * self.quiet_intervals


@dataclass(frozen=True)
class ReconcilePlan:
    """What one check decided: claims due to be unprepared now (none while `braked`),
    suspects (the due ones included) and claims in use for the next check."""

    reclaim: tuple[Reclaim, ...]
    suspects: Mapping[str, Suspect]
    in_use: Mapping[str, InUse]
    braked: bool = False  # too many records in doubt at once: none is due
    unread: int = 0  # records whose read was due in this check but got no answer

    @property
    def doubtful(self) -> int:
        """The records the brake counted: suspects, and reads still due."""
        return len(self.suspects) + self.unread


def due_reads(
    records: Mapping[str, RecordedClaim],
    suspects: Mapping[str, Suspect],
    in_use: Mapping[str, InUse],
    now: float,
    policy: ReconcilePolicy,
    wall: float,
) -> list[str]:
    """The records whose claims this check reads (see the module docstring): every
    suspect, and every other record whose wait since its last read in use, or since it
    was prepared, is over. `now`: the monotonic clock; `wall`: the wall clock, for the
    records' touch stamps (how long ago each was touched)."""
    due = []
    for uid, record in records.items():
        touched = now - max(0.0, wall - record.touched_at)
        last = in_use.get(uid)
        if last is None:
            start, wait = touched, policy.interval
        else:
            start, wait = max(last.at, touched), _spread(uid, last.wait)
        if uid in suspects or now >= start + wait:
            due.append(uid)
    return due


def _spread(uid: str, wait: float) -> float:
    """`wait` shortened by a fixed fraction of up to a quarter, drawn from the UID."""
    return wait * (1.0 - 0.25 * (zlib.crc32(uid.encode()) / 2**32))


def plan_reconcile(
    records: Mapping[str, RecordedClaim],
    seen: Mapping[str, Mapping[str, Any] | None],
    suspects: Mapping[str, Suspect],
    now: float,
    *,
    driver: str,
    node: str,
    policy: ReconcilePolicy,
    in_use: Mapping[str, InUse] | None = None,
    due: Iterable[str] = (),
) -> ReconcilePlan:
    """Decide one check. `seen`: claim UID -> the claim its record names as read in this
    check (None: the API server said it is gone); a UID missing from it was not due or
    could not be read. `suspects`, `in_use`: the previous check's plan's. `now`: when
    this check began (before its reads), on the monotonic clock. `due`: the records this
    check was to read (`due_reads`); those missing from `seen` count toward the brake."""
    reclaim: list[Reclaim] = []
    kept: dict[str, Suspect] = {}
    quiet: dict[str, InUse] = {}
    before_in_use = in_use or {}
    for uid, record in records.items():
        if uid not in seen:
            if uid in before_in_use:
                quiet[uid] = before_in_use[uid]
            continue  # not read now: no evidence either way, a suspect starts over
        reason = leak_reason(record, seen[uid], driver=driver, node=node)
        if reason is None:
            last = before_in_use.get(uid)
            wait = policy.interval if last is None else last.wait
            quiet[uid] = InUse(now, min(2 * wait, policy.longest_wait))
            continue
        suspect = _suspect(suspects.get(uid), reason, record, now)
        kept[uid] = suspect
        if _due(suspect, now, policy):
            reclaim.append(Reclaim(record.ref, reason, suspect.touched_at))
    unread = sum(1 for uid in set(due) if uid in records and uid not in seen)
    braked = brakes(len(kept) + unread, len(records))
    return ReconcilePlan(() if braked else tuple(reclaim), kept, quiet, braked, unread)


def brakes(doubtful: int, records: int) -> bool:
    """True when `doubtful` of `records` in doubt in one check (looking leaked, or their
    read still due) is too many to act on (see the module docstring)."""
    return doubtful > BRAKE_ALWAYS and (
        doubtful > BRAKE_COUNT or doubtful > BRAKE_SHARE * records)


def _suspect(before: Suspect | None, reason: str, record: RecordedClaim, now: float) -> Suspect:
    """The suspect after this check: continued, or started over when the record was
    touched (prepared again) since the last check."""
    if before is None or record.touched_at != before.touched_at:
        return Suspect(reason, now, 1, record.touched_at)
    return Suspect(reason, before.since, before.checks + 1, before.touched_at)


def _due(suspect: Suspect, now: float, policy: ReconcilePolicy) -> bool:
    return suspect.checks >= policy.min_checks and now - suspect.since >= policy.grace


def leak_reason(
    record: RecordedClaim, claim: Mapping[str, Any] | None, *, driver: str, node: str
) -> str | None:
    """Why the kubelet will never unprepare this record's claim, or None while it may.
    A claim reserved for anyone (pods, or a PodGroup whose pods share it) is in use."""
    if claim is None:
        return CLAIM_DELETED
    if path_value(claim, "metadata", "uid") != record.ref.uid:
        return UID_CHANGED
    allocation = path_value(claim, "status", "allocation")
    if not isinstance(allocation, Mapping):
        return DEALLOCATED
    if not record.devices <= allocated_devices(allocation, driver) or _excludes(
        allocation.get("nodeSelector"), node
    ):
        return ALLOCATION_CHANGED
    if not path_value(claim, "status", "reservedFor"):
        return NOT_RESERVED
    return None


def _excludes(selector: Any, node: str) -> bool:
    """True only when the selector surely does not select `node` by name: every term
    requires a `metadata.name` field the node's name fails. Label requirements cannot
    be judged without the Node object: such a selector may select this node."""
    terms = selector.get("nodeSelectorTerms") if isinstance(selector, Mapping) else None
    if not isinstance(terms, list) or not terms:
        return False
    return all(_term_excludes(term, node) for term in terms)


def _term_excludes(term: Any, node: str) -> bool:
    fields = term.get("matchFields") if isinstance(term, Mapping) else None
    return any(_field_excludes(req, node) for req in _items(fields))


def _field_excludes(requirement: Any, node: str) -> bool:
    if not isinstance(requirement, Mapping) or requirement.get("key") != "metadata.name":
        return False
    values = requirement.get("values")
    names = set(_items(values))
    operator = requirement.get("operator")
    return (operator == "In" and node not in names) or (operator == "NotIn" and node in names)


def _items(value: Any) -> Iterable[Any]:
    return value if isinstance(value, list) else ()


# --- what the kubelet says its pods use --------------------------------------------


class KubeletUnavailable(Exception):
    """The kubelet could not be asked (no socket, no answer, an error): its pods' use of
    every claim is unknown, so nothing may be freed."""


@dataclass(frozen=True)
class KubeletUsage:
    """One answer of the kubelet: the pods it lists, and the devices of this driver it
    lists for their containers' claims."""

    pods: frozenset[PodKey]
    devices: frozenset[DeviceKey]  # (pool, device, shareID) of this driver
    lists_dra: bool  # any container listed any DRA resource at all

    def unknown(self, own_pod: PodKey | None) -> str | None:
        """Why this answer cannot prove that a record is unused, or None when it can.

        Only positive knowledge frees. The kubelet lists this plugin's own pod once it
        has synced its pods after a (re)start, and only the node's own kubelet lists it,
        so without it the answer may be an empty early one or another node's. And an
        answer with no DRA resource for any container is what a kubelet with its
        KubeletPodResourcesDynamicResources gate off, or with its claim cache lost,
        gives too: it proves nothing while any record exists, and one does (the record
        being judged)."""
        if own_pod is None:
            return ("this plugin's pod is not known (--pod-namespace and --pod-name unset), "
                    "so the kubelet's answer cannot be checked")
        if own_pod not in self.pods:
            return (f"the kubelet does not list this plugin's pod {own_pod[0]}/{own_pod[1]} "
                    "(not synced since its restart, or another kubelet's socket)")
        if not self.lists_dra:
            return ("the kubelet lists no DRA resources for any container (its "
                    "KubeletPodResourcesDynamicResources gate off, its claim cache lost, "
                    "or not yet synced)")
        return None

    def uses(self, record: RecordedClaim) -> bool:
        """True when a container on the node uses any of the record's devices, under
        whatever claim name.

        Devices, not the claim's name, decide: the kubelet lists a claim's devices only
        once it is prepared (a claim it could not prepare yet is listed without devices:
        its claim cache entry starts with no devices per driver and takes them from the
        NodePrepareResources answer, pkg/kubelet/cm/dra/claiminfo.go),
        so a claim deleted and made again under the same name, pending on the record's
        device or running on another one, is another claim and does not keep the stale
        record; and a device the kubelet lists for any claim is in use, whatever the API
        says. A share ID is compared only where both sides have one (a kubelet may list
        none), which errs on the side of in use."""
        return any(_matches(device, self.devices) for device in record.devices)


def _matches(device: DeviceKey, listed: frozenset[DeviceKey]) -> bool:
    pool, name, share = device
    return any((p, n) == (pool, name) and (s is None or share is None or s == share)
               for p, n, s in listed)


class KubeletUsageSource(Protocol):
    """Asks the kubelet which claims its pods use now."""

    def usage(self) -> KubeletUsage:
        """The kubelet's current answer; KubeletUnavailable when it cannot be had."""
        ...
