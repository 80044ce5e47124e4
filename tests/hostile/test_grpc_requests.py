"""NodePrepareResources and NodeUnprepareResources requests on the DRA socket, as any
process that can reach the socket could send them: claim names, namespaces and UIDs of
any text, repeated, empty, huge. Over a real unix socket to the real plugin: every
claim gets an answer (devices, or an error on one bounded line), the server keeps
serving, and nothing is written outside the plugin's directories."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.claims.source import StaticClaimSource
from simdra._driver.kubelet.endpoints import start_kubelet_plugin
from simdra._driver.kubelet.gen import (
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
)
from simdra._driver.kubelet.sockets import dra_socket_path, registration_socket_path
from tests.claims.builders import DRIVER, RULES, claim, inventory, result

from .strategies import PATHS, assert_one_line, inside, tree_snapshot, utf8_text

GOOD = "aaaaaaaa-0000-4000-8000-000000000001"
VERSIONS = {"v1": (dra_v1_pb2, dra_v1_pb2_grpc), "v1beta1": (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc)}
# A per-claim error: the preparer keeps it within textlimits.ERROR_LIMIT (4000 bytes).
ERROR_BYTES = 4_000


class Node:
    """A plugin serving a real Preparer on a real DRA socket, in a short temp tree:
    `root/data` (data dir and socket), `root/cdi`, `root/registry`; `root/outside` is
    not the plugin's."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data, self.cdi, self.registry = root / "data", root / "cdi", root / "registry"
        self.outside = root / "outside"
        self.outside.mkdir()
        (self.outside / "keep").write_text("x")
        self.source = StaticClaimSource()
        self.good = claim(GOOD, [result("gpus", "gpu-0")])
        self.source.put(self.good)
        # Claims the hostile requests may name: present in the API, with hostile names.
        preparer = Preparer(DRIVER, self.source, lambda: inventory(), self.cdi, self.data,
                            rules=RULES)
        self.plugin = start_kubelet_plugin(
            DRIVER, dra_socket_path(str(self.data)),
            registration_socket_path(str(self.registry), DRIVER), preparer)
        self.channel = grpc.insecure_channel(f"unix:{dra_socket_path(str(self.data))}")

    def call(self, version: str, method: str, claims: list[dict[str, str]]) -> Any:
        pb, pb_grpc = VERSIONS[version]
        stub = pb_grpc.DRAPluginStub(self.channel)
        request = getattr(pb, f"{method}Request")(claims=[pb.Claim(**c) for c in claims])
        return getattr(stub, method)(request, timeout=30)

    def close(self) -> None:
        self.channel.close()
        self.plugin.stop(grace=0)


@pytest.fixture
def node() -> Iterator[Node]:
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="sdh-"))  # AF_UNIX paths are short
    node = Node(root)
    yield node
    node.close()
    shutil.rmtree(root, ignore_errors=True)


_text = st.one_of(st.sampled_from([*PATHS, "default", "", GOOD, GOOD.upper()]), utf8_text)
_claims = st.lists(st.fixed_dictionaries({"namespace": _text, "name": _text, "uid": _text}),
                   max_size=6)


def test_hostile_requests_get_an_answer_per_claim_and_the_server_keeps_serving(
        node: Node) -> None:
    """Each request: an answer for every UID it names (devices, or a one-line error of
    at most 4000 bytes), or an error status for the whole call; afterwards a valid
    prepare and unprepare still succeed, and no file appeared outside the plugin's
    data directory and CDI root (the registry dir holds only its socket)."""
    owned = inside(node.data, node.cdi, node.registry)
    before = tree_snapshot(node.root, owned)

    @settings(max_examples=60)
    @given(claims=_claims, version=st.sampled_from(["v1", "v1beta1"]),
           method=st.sampled_from(["NodePrepareResources", "NodeUnprepareResources"]),
           hostile_source=st.booleans())
    def check(claims: list[dict[str, str]], version: str, method: str,
              hostile_source: bool) -> None:
        if hostile_source:  # the API server has claims under these names (any content)
            for c in claims:
                raw = claim(GOOD, [result("gpus", "gpu-1")], name=c["name"],
                            namespace=c["namespace"])
                raw["metadata"]["uid"] = c["uid"]
                node.source.put(raw)
        try:
            response = node.call(version, method, claims)
        except grpc.RpcError as err:
            assert err.code() != grpc.StatusCode.UNAVAILABLE, "the server went away"
            return
        finally:
            node.source.claims = {(n, m): c for (n, m), c in node.source.claims.items()
                                  if c is node.good}
        assert set(response.claims) == {c["uid"] for c in claims}
        for uid, answer in response.claims.items():
            if answer.error:
                assert_one_line(answer.error, ERROR_BYTES)
            elif method == "NodePrepareResources":
                assert uid == GOOD or not claims  # only the good claim can be prepared
        assert tree_snapshot(node.root, owned) == before

    check()
    ref = {"namespace": "default", "name": node.good["metadata"]["name"], "uid": GOOD}
    prepared = node.call("v1", "NodePrepareResources", [ref]).claims[GOOD]
    assert prepared.error == "" and prepared.devices[0].device_name == "gpu-0"
    assert node.call("v1", "NodeUnprepareResources", [ref]).claims[GOOD].error == ""
    assert tree_snapshot(node.root, owned) == before
