"""Where claims are read from: the API server (over our client's connection pool and
credentials, `simdra._driver.kubeapi`), or a map in memory; and `fetch_claims`, the
first step of a prepare, which reads a call's claims at once within a deadline.

Only `fetch_claims` talks to the API server on a prepare's behalf, and the preparer
calls it outside its serialized section: no prepare or unprepare ever waits for the API
server on another call's behalf.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, Protocol
from urllib.parse import quote

from simdra._driver.claims.types import ClaimError, ClaimNotFound, ClaimRef
from simdra._driver.core.textlimits import clip
from simdra._driver.kubeapi import ApiStatusError, RestClient, status_text

# Well inside the kubelet's 45 s NodePrepareResources deadline, so a hung API server
# turns into a per-claim error instead of a cancelled call. The claims of one call are
# read in parallel, all within FETCH_DEADLINE_S (25 s).
DEFAULT_TIMEOUT_S = 20.0
CLAIM_PATH = "/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"
# The claims of one call are read at once, so that a pod's N claims cost one read's time,
# not N (each read may take the API source's 20 s timeout): at most this many at once...
MAX_PARALLEL_FETCHES = 16
# ...and whatever is not read by then is its claim's error, so that even a call of more
# claims than that answers well inside the kubelet's 45 s deadline (facts: the kubelet
# cancels NodePrepareResources after 45 s), leaving the rest of it to the writes. A call
# that reads some claims again (`simdra._driver.claims.prepare.transaction`) shares this
# time among its rounds.
FETCH_DEADLINE_S = 25.0

# A claim as read from the API server, or the exception reading it raised.
Fetched = dict[str, Any] | Exception


class ClaimSource(Protocol):
    """Reads one ResourceClaim as raw resource.k8s.io/v1 JSON."""

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        """The claim `namespace/name`; raises ClaimNotFound when it does not exist, and
        any other exception when it cannot be read right now."""
        ...


def fetch_claims(
    source: ClaimSource, claims: list[ClaimRef], deadline_s: float = FETCH_DEADLINE_S
) -> dict[str, Fetched]:
    """Each claim's JSON, or the exception reading it raised (reported later, as that
    claim's error). Read in parallel (MAX_PARALLEL_FETCHES at once); a claim not read
    within `deadline_s` gets a ClaimError saying so, and with no time left none is
    read. Call it outside the serialized section."""
    if not claims:
        return {}
    if deadline_s <= 0:
        return {ref.uid: _no_time_left(ref) for ref in claims}
    if len(claims) <= 1 and deadline_s >= FETCH_DEADLINE_S:
        # The source's own timeout is within the deadline: no thread needed. A later
        # round with less time left reads in a thread it need not wait for.
        return {ref.uid: _fetch_one(source, ref) for ref in claims}
    pool = ThreadPoolExecutor(
        min(len(claims), MAX_PARALLEL_FETCHES), thread_name_prefix="fetch-claim"
    )
    try:
        futures = {ref.uid: (ref, pool.submit(_fetch_one, source, ref)) for ref in claims}
        done, _ = wait([f for _, f in futures.values()], timeout=deadline_s)
        return {
            uid: future.result() if future in done else _late(ref, deadline_s)
            for uid, (ref, future) in futures.items()
        }
    finally:
        # a read still running ends by its own timeout; nobody waits for it
        pool.shutdown(wait=False, cancel_futures=True)


def _fetch_one(source: ClaimSource, ref: ClaimRef) -> Fetched:
    try:
        return source.get(ref.namespace, ref.name)
    except Exception as exc:  # becomes this claim's error, at step "fetch claim"
        return exc


def _no_time_left(ref: ClaimRef) -> ClaimError:
    return ClaimError(
        f"claim {clip(ref.namespace)}/{clip(ref.name)}: not read again from the API server: "
        f"the call's {FETCH_DEADLINE_S:g} s for reads are spent; the kubelet retries"
    )


def _late(ref: ClaimRef, deadline_s: float) -> ClaimError:
    return ClaimError(
        f"claim {clip(ref.namespace)}/{clip(ref.name)}: not read from the API server within "
        f"{deadline_s:g} s (with the call's other claims); the kubelet retries"
    )


class StaticClaimSource:
    """A ClaimSource over an in-memory map `(namespace, name) -> claim JSON`."""

    def __init__(self, claims: Mapping[tuple[str, str], dict[str, Any]] | None = None) -> None:
        self.claims: dict[tuple[str, str], dict[str, Any]] = dict(claims or {})

    def put(self, claim: dict[str, Any]) -> None:
        """Add or replace a claim, keyed by its metadata namespace and name."""
        meta = claim["metadata"]
        self.claims[(meta["namespace"], meta["name"])] = claim

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        """A deep copy of the stored claim, so callers cannot change the store."""
        try:
            return copy.deepcopy(self.claims[(namespace, name)])
        except KeyError:
            raise ClaimNotFound(f"claim {namespace}/{name}: not found") from None


class ApiClaimSource:
    """Reads ResourceClaims (resource.k8s.io/v1) as raw JSON dicts.

    Raw JSON rather than model objects: the parser ignores unknown fields, while model
    deserialization would drop or reject fields newer than the client.
    """

    def __init__(self, api_client: RestClient, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._client = api_client
        self._timeout = timeout_s

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        """The claim `namespace/name`; ClaimNotFound only when the API server says that
        this claim does not exist (`names_missing_claim`), ClaimReadError (one line:
        status, reason, message) for any other error answer, a 404 of another kind
        included."""
        path = CLAIM_PATH.format(namespace=quote(namespace, safe=""), name=quote(name, safe=""))
        where = f"claim {clip(namespace)}/{clip(name)}"
        try:
            claim = self._client.request("GET", path, timeout=self._timeout)
        except ApiStatusError as err:
            if names_missing_claim(err.status, err.body, name):
                raise ClaimNotFound(f"{where}: not found in the API server (deleted?)") from None
            raise ClaimReadError(f"{where}: read from the API server: "
                                 f"{status_text(*err.parts())}", err.status) from None
        if not isinstance(claim, dict):
            raise ValueError(f"{where}: the API server sent a non-object")
        return claim


def names_missing_claim(status: int, body: bytes, name: str) -> bool:
    """True only for the API server's word that claim `name` does not exist: a 404
    whose Status has reason NotFound and details naming this claim (group
    resource.k8s.io, kind resourceclaims). A 404 for a group/version not served, a
    proxy's page or a Status about something else is no evidence that the claim is gone:
    reconciliation would free a device in use on it."""
    if status != 404:
        return False
    try:
        decoded = json.loads(body or b"{}")
    except (ValueError, RecursionError):  # not JSON, or nested deeper than it parses
        return False
    details = decoded.get("details") if isinstance(decoded, dict) else None
    return (
        isinstance(details, dict)
        and decoded.get("reason") == "NotFound"
        and details.get("name") == name
        and details.get("kind") == "resourceclaims"
        and details.get("group") == "resource.k8s.io"
    )


class DeferredClaimSource:
    """An ApiClaimSource over a client that is still being built (`ApiClientLoader`):
    the first read waits for it, later reads go straight through."""

    def __init__(self, client_of: Callable[[], RestClient]) -> None:
        self._client_of = client_of
        self._source: ApiClaimSource | None = None

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        """As ApiClaimSource.get, once the client exists."""
        if self._source is None:
            self._source = ApiClaimSource(self._client_of())
        return self._source.get(namespace, name)


class ClaimReadError(ClaimError):
    """The API server answered a claim read with an error other than "this claim does
    not exist"."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status
