"""Events on ResourceClaims (events.k8s.io/v1), so that what the plugin decided about a
claim shows in `kubectl describe resourceclaim` and `kubectl get events`, next to the
scheduler's and the kubelet's."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from simdra._driver.core.textlimits import clip, clip_error, escape_controls, one_line
from simdra._driver.kubeapi import RestClient

log = logging.getLogger(__name__)

EVENTS_PATH = "/apis/events.k8s.io/v1/namespaces/{namespace}/events"
# The API server refuses an Event whose note is longer (bytes).
NOTE_LIMIT = 1024
# Posting an Event is a report, not part of any decision: never wait long for it.
TIMEOUT_S = 5.0


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
            self._client_of().request("POST", path, body=event, timeout=TIMEOUT_S)
        except Exception as err:  # a report that could not be posted; the log has it
            log.warning("cannot post Event %s on claim %s/%s: %s", reason,
                        clip(event["regarding"]["namespace"]), clip(event["regarding"]["name"]),
                        one_line(err))
