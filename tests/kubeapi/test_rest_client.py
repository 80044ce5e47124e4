"""simdra._driver.kubeapi.RestClient against the API stand-in over real HTTP: JSON requests of
every verb and patch type, error answers in one line with Retry-After, and watches that
close() ends from another thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from simdra._driver.kubeapi import ApiStatusError, RestClient
from simdra._driver.kubeapi.client import APPLY_PATCH, JSON_PATCH, MERGE_PATCH
from simdra._driver.testing.apiserver import APIServer

NODES = "/api/v1/nodes"


@pytest.fixture
def server() -> Iterator[APIServer]:
    with APIServer() as srv:
        yield srv


@pytest.fixture
def api(server: APIServer) -> Iterator[RestClient]:
    with server.rest_client() as client:
        yield client


def test_create_get_replace_delete_round_trip(server: APIServer, api: RestClient) -> None:
    created = api.request("POST", NODES, body={"metadata": {"name": "n1"}})
    assert created["metadata"]["uid"] == server.get_object("nodes", "n1")["metadata"]["uid"]

    node = api.request("GET", f"{NODES}/n1")
    node["metadata"]["labels"] = {"a": "1"}
    replaced = api.request("PUT", f"{NODES}/n1", body=node)
    assert replaced["metadata"]["labels"] == {"a": "1"}

    api.request("DELETE", f"{NODES}/n1")
    assert server.get_object("nodes", "n1") is None


def test_the_three_patch_types_reach_the_server_as_such(server: APIServer,
                                                        api: RestClient) -> None:
    server.put_object("nodes", {"metadata": {"name": "n1", "labels": {"a": "1"}}})

    api.request("PATCH", f"{NODES}/n1", body={"metadata": {"labels": {"b": "2"}}},
                content_type=MERGE_PATCH)
    api.request("PATCH", f"{NODES}/n1", content_type=JSON_PATCH,
                body=[{"op": "remove", "path": "/metadata/labels/a"}])
    applied = api.request(
        "PATCH", f"{NODES}/n1", query={"fieldManager": "simdra-test", "force": True},
        content_type=APPLY_PATCH,
        body={"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
              "spec": {"unschedulable": True}})

    assert applied["metadata"]["labels"] == {"b": "2"}
    assert applied["spec"]["unschedulable"] is True
    managers = [m["manager"] for m in applied["metadata"]["managedFields"]]
    assert "simdra-test" in managers


def test_an_error_answer_is_one_line_of_status_reason_and_message(api: RestClient) -> None:
    with pytest.raises(ApiStatusError) as caught:
        api.request("GET", f"{NODES}/missing")

    assert caught.value.status == 404
    status, reason, message = caught.value.parts()
    assert (status, reason) == (404, "NotFound") and "missing" in message
    assert str(caught.value) == f"404 NotFound: {message}"


def test_retry_after_of_a_throttled_answer_is_kept(server: APIServer, api: RestClient) -> None:
    server.inject_failure("get", "nodes", 429, retry_after=7)

    with pytest.raises(ApiStatusError) as caught:
        api.request("GET", f"{NODES}/any")

    assert (caught.value.status, caught.value.retry_after) == (429, 7.0)


def test_object_hook_sees_every_decoded_object(server: APIServer, api: RestClient) -> None:
    server.put_object("nodes", {"metadata": {"name": "n1"}})
    seen: list[dict] = []

    api.request("GET", f"{NODES}/n1", object_hook=lambda d: seen.append(d) or d)

    assert any(d.get("name") == "n1" for d in seen)


def test_a_watch_streams_events_and_close_ends_it_from_another_thread(
        server: APIServer, api: RestClient) -> None:
    listed = api.request("GET", NODES)
    watch = api.watch(NODES, {"resourceVersion": listed["metadata"]["resourceVersion"],
                              "timeoutSeconds": 60}, (5.0, 90.0))
    server.put_object("nodes", {"metadata": {"name": "n1"}})
    events = iter(watch)
    first = next(events)
    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "n1")

    closer = threading.Timer(0.2, watch.close)
    closer.start()
    started = time.monotonic()
    assert list(events) == []  # ends quietly, well before the server's 60 s
    assert time.monotonic() - started < 30
    closer.join()


def test_a_refused_watch_raises_the_status(server: APIServer, api: RestClient) -> None:
    server.inject_failure("watch", "nodes", 503)

    with pytest.raises(ApiStatusError) as caught:
        api.watch(NODES, {"resourceVersion": "0"}, 5.0)

    assert caught.value.status == 503
