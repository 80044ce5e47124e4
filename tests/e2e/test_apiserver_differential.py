"""Our API stand-in and the real kube-apiserver agree on a corpus of valid and invalid
ResourceSlices, ResourceClaims, ResourceClaimTemplates and DeviceClasses: the same
accept/reject, the same status for a rejection and, for a 422, the same field paths. The
real server gets every write as a dry run, the stand-in (a fresh one) for real; both with
strict field validation.

The corpus lives in `tests/testing/apiserver_corpus.py`, the real servers' verdicts in
`tests/testing/apiserver_verdicts/<minor>.json`, one file per release. The stand-in gives
the answers of one release (MODELLED_RELEASE, the e2e's default); the fast suite checks it
against that release's recording. Here the live server of whichever release the run
builds (K8S_VERSION) is asked again and must answer as its own recording says, so a
stale or missing recording fails; the stand-in is held to the modelled release's answers,
so where releases differ the files show it. Record a release with
`python -m tests.e2e.test_apiserver_differential --record` (SIMDRA_E2E_BIN as for e2e).
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from simdra._driver.testing.apiserver import APIServer
from tests.testing.apiserver_corpus import (
    CORPUS,
    MODELLED_RELEASE,
    PATHS,
    Verdict,
    body_of,
    disagreement,
    load_verdicts,
    save_verdicts,
    verdict_of,
    verdicts_file,
)

from .controlplane import ADMIN_TOKEN, ControlPlane

JSON = dict[str, Any]


@dataclass(frozen=True)
class Server:
    """Where to POST, and how to authenticate (plain HTTP for the stand-in)."""

    url: str
    token: str | None = None
    ca: str | None = None

    def verdict(self, obj: JSON, dry_run: bool) -> Verdict:
        """The answer to creating `obj` (with fieldValidation=Strict)."""
        query = "fieldValidation=Strict" + ("&dryRun=All" if dry_run else "")
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(f"{self.url}{PATHS[obj['kind']]}?{query}",
                                         data=json.dumps(obj).encode(), headers=headers,
                                         method="POST")
        context = ssl.create_default_context(cafile=self.ca) if self.ca else None
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as response:
                return verdict_of(int(response.status), {})
        except urllib.error.HTTPError as err:
            return verdict_of(int(err.code), json.loads(err.read() or b"{}"))


@pytest.fixture(scope="module")
def stand_in() -> Iterator[Server]:
    with APIServer(kubernetes_version=MODELLED_RELEASE) as server:
        yield Server(server.url)


@pytest.fixture(scope="module")
def real(control_plane: ControlPlane) -> Server:
    return Server(control_plane.server, ADMIN_TOKEN, str(control_plane.certs.ca_cert))


@pytest.fixture(scope="module")
def recorded(control_plane: ControlPlane) -> dict[str, Verdict]:
    """The running release's own recorded verdicts."""
    version = control_plane.version()
    if not verdicts_file(version).exists():
        pytest.fail(f"no verdicts recorded for Kubernetes {version}: run "
                    "python -m tests.e2e.test_apiserver_differential --record", pytrace=False)
    return load_verdicts(version)[1]


@pytest.fixture(scope="module")
def modelled() -> dict[str, Verdict]:
    """The verdicts of the release the stand-in models."""
    return load_verdicts()[1]


@pytest.mark.parametrize("name", list(CORPUS))
def test_stand_in_agrees_with_real_apiserver(name: str, real: Server, stand_in: Server,
                                             recorded: dict[str, Verdict],
                                             modelled: dict[str, Verdict]) -> None:
    case = CORPUS[name]
    obj = body_of(case)
    theirs = real.verdict(obj, dry_run=True)
    ours = stand_in.verdict(obj, dry_run=False)
    assert recorded.get(name) == theirs, (
        f"{name}: the real server now answers {theirs}, recorded {recorded.get(name)}; "
        "re-record this release's corpus verdicts")
    model = modelled[name]
    if case.stand_in is not None:
        assert ours == case.stand_in, f"{name}: stand-in {ours}, expected {case.stand_in}"
        assert ours != model, f"{name}: now agrees with the real server; drop its exception"
        return
    problem = disagreement(model, ours)
    assert problem is None, f"{name}: {problem}"


def record() -> None:
    """Ask a fresh real control plane for every case's verdict and save them."""
    with tempfile.TemporaryDirectory() as workdir, ControlPlane(
            os.environ["SIMDRA_E2E_BIN"], workdir) as plane:
        server = Server(plane.server, ADMIN_TOKEN, str(plane.certs.ca_cert))
        verdicts = {name: server.verdict(body_of(case), dry_run=True)
                    for name, case in CORPUS.items()}
        save_verdicts(plane.version(), verdicts)
    print(f"recorded {len(verdicts)} verdicts from kube-apiserver {plane.version()}")


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    record()
