"""Events on claims: the body is a valid events.k8s.io/v1 Event (the 1.37 schema), it is
POSTed to the claim's namespace through the plugin's client, and a failure to post is
one log line, never an exception into reconciliation."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler

import kubernetes_validate
import pytest

from simdra._driver.claims.reconcile.reconciler import ApiClaimEvents, claim_event
from simdra._driver.kubeapi import ClusterAccess, RestClient

from .builders import claim
from .http_stub import send_json, serving

UID = "aaaaaaaa-0000-4000-8000-000000000001"


class _Events(BaseHTTPRequestHandler):
    posted: list[tuple[str, dict]] = []
    status = 201

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.posted.append((self.path, body))
        send_json(self, self.status, body if self.status == 201 else {
            "kind": "Status", "code": self.status, "reason": "Forbidden",
            "message": "events.events.k8s.io is forbidden"})

    def log_message(self, *args):
        pass


@pytest.fixture
def client():
    _Events.posted, _Events.status = [], 201
    with serving(_Events) as url, RestClient(ClusterAccess(server=url)) as rest:
        yield rest


def test_the_event_is_valid_for_the_api_server_and_names_the_claim() -> None:
    raw = claim(UID, [])
    event = claim_event(raw, reason="PreparedClaimKept", note="x" * 5000,
                        controller="gpu.example.com", instance="node-a",
                        now=datetime(2026, 12, 5, 8, 0, tzinfo=UTC))
    kubernetes_validate.validate(event, "1.37", strict=True)
    assert event["regarding"]["uid"] == UID and event["regarding"]["kind"] == "ResourceClaim"
    assert event["eventTime"] == "2026-12-05T08:00:00.000000Z"
    assert len(event["note"]) <= 1024 and event["type"] == "Warning"


def test_posted_to_the_claims_namespace(client) -> None:
    events = ApiClaimEvents(lambda: client, "gpu.example.com", "node-a")
    events.warn(claim(UID, []), "PreparedClaimKept", "kept: a pod uses it")
    [(path, body)] = _Events.posted
    assert path == "/apis/events.k8s.io/v1/namespaces/default/events"
    assert body["note"] == "kept: a pod uses it" and body["reportingInstance"] == "node-a"


def test_a_refused_event_is_one_log_line(client, caplog) -> None:
    _Events.status = 403
    events = ApiClaimEvents(lambda: client, "gpu.example.com", "node-a")
    with caplog.at_level(logging.WARNING, logger="simdra._driver.claims.reconcile.reconciler"):
        events.warn(claim(UID, []), "PreparedClaimKept", "kept")
    [line] = [r.getMessage() for r in caplog.records]
    assert "PreparedClaimKept" in line and "403" in line and "\n" not in line
