"""ApiClaimSource against a real HTTP server speaking the resource.k8s.io/v1 paths."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

import pytest

from simdra._driver.claims.source import ApiClaimSource
from simdra._driver.claims.types import ClaimError, ClaimNotFound
from simdra._driver.kubeapi import ClusterAccess, RestClient
from simdra._driver.kubeapi.access import TokenFile

from .builders import fixture_claim
from .http_stub import send_json, serving

PATH = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}"


class _Handler(BaseHTTPRequestHandler):
    claims: dict[str, dict] = {}
    not_found: dict[str, object] = {}  # path -> the body of a 404 of another kind
    token: str | None = None  # when set, a request without this bearer token gets 401

    def do_GET(self):
        if self.token and self.headers.get("Authorization") != f"Bearer {self.token}":
            self._send(401, {"kind": "Status", "code": 401, "reason": "Unauthorized"})
        elif self.path.endswith("/broken"):
            self._send(500, {"kind": "Status", "code": 500, "message": "etcd down"})
        elif self.path in self.claims:
            self._send(200, self.claims[self.path])
        elif self.path in self.not_found:
            self._send(404, self.not_found[self.path])
        else:  # as the API server says a claim does not exist
            name = self.path.rsplit("/", 1)[1]
            self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound",
                             "message": f'resourceclaims.resource.k8s.io "{name}" not found',
                             "details": {"name": name, "group": "resource.k8s.io",
                                         "kind": "resourceclaims"}})

    def _send(self, code, body):
        send_json(self, code, body, {"X-Secret-Header": "must not reach an error"})

    def log_message(self, *args):
        pass


@pytest.fixture
def source(api_client):
    yield ApiClaimSource(api_client, timeout_s=5)


@pytest.fixture
def url():
    _Handler.token = None
    with serving(_Handler) as base:
        yield base


@pytest.fixture
def api_client(url):
    with RestClient(ClusterAccess(server=url)) as api_client:
        yield api_client


def test_reads_the_raw_claim_json_including_fields_the_client_does_not_know(source):
    raw = fixture_claim()
    raw["status"]["allocation"]["devices"]["results"][0]["futureField"] = {"x": 1}
    _Handler.claims = {PATH.format(ns="team-a", name="c1"): raw}
    assert source.get("team-a", "c1") == raw


def test_missing_claim_raises_claim_not_found(source):
    _Handler.claims = {}
    with pytest.raises(ClaimNotFound, match="claim team-a/gone: not found"):
        source.get("team-a", "gone")


# A 404 that does not name the claim is no evidence that the claim is gone:
# reconciliation would free every record on the node on such answers.
OTHER_404S = {
    "group/version not served": {"kind": "Status", "code": 404, "reason": "NotFound",
                                 "message": "the server could not find the requested resource",
                                 "details": {}},
    "a proxy's page": "404 page not found",
    "another object": {"kind": "Status", "code": 404, "reason": "NotFound",
                       "details": {"name": "team-a", "kind": "namespaces"}},
    "another claim": {"kind": "Status", "code": 404, "reason": "NotFound",
                      "details": {"name": "other", "group": "resource.k8s.io",
                                  "kind": "resourceclaims"}},
}


@pytest.mark.parametrize("what", sorted(OTHER_404S))
def test_a_404_that_does_not_name_the_claim_is_a_read_error(source, what):
    _Handler.not_found = {PATH.format(ns="team-a", name="c1"): OTHER_404S[what]}
    try:
        with pytest.raises(ClaimError) as info:
            source.get("team-a", "c1")
    finally:
        _Handler.not_found = {}
    assert not isinstance(info.value, ClaimNotFound)
    assert info.value.status == 404 and "\n" not in str(info.value)


def test_other_api_errors_are_one_line_with_status_and_reason_and_no_headers(source):
    with pytest.raises(ClaimError) as info:
        source.get("team-a", "broken")
    message = str(info.value)
    assert message == "claim team-a/broken: read from the API server: 500 Internal Server " \
        "Error: etcd down"
    assert info.value.status == 500
    assert "X-Secret-Header" not in message and "\n" not in message


def test_sends_the_token_file_as_rotated_for_each_read(url, tmp_path):
    raw = fixture_claim()
    _Handler.claims = {PATH.format(ns="team-a", name="c1"): raw}
    token = tmp_path / "token"
    token.write_text("first\n")
    api_client = RestClient(ClusterAccess(server=url, credentials=TokenFile(token)))
    source = ApiClaimSource(api_client, timeout_s=5)
    _Handler.token = "first"
    assert source.get("team-a", "c1") == raw
    # As the kubelet rotates a projected token: a new file swapped in.
    (tmp_path / "new").write_text("second")
    (tmp_path / "new").replace(token)
    _Handler.token = "second"
    assert source.get("team-a", "c1") == raw
    _Handler.token = "third"
    with pytest.raises(ClaimError, match="401 Unauthorized"):
        source.get("team-a", "c1")
    api_client.close()
