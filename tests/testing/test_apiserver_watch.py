"""Watches through `kubernetes.watch.Watch` over real HTTP: order, resume, expiry, shutdown."""

from __future__ import annotations

import http.client
import json
import threading

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from simdra._driver.testing.apiserver import APIServer

NODE = "node-1"


def _collect(stream, count: int) -> list[tuple[str, dict]]:
    """The first `count` events of a watch stream, then stop it."""
    events = []
    for event in stream:
        events.append(
            (event["type"], event["raw_object"] if "raw_object" in event else event["object"])
        )
        if len(events) == count:
            break
    stream.close()
    return events


def test_watch_from_list_version_sees_changes_in_order(resource_api, make_slice):
    rv = resource_api.list_resource_slice(
        field_selector=f"spec.nodeName={NODE}"
    ).metadata.resource_version
    created = resource_api.create_resource_slice(make_slice())
    resource_api.create_resource_slice(make_slice(node="node-2", pool="node-2"))  # filtered out
    created.spec.pool.generation = 1
    updated = resource_api.replace_resource_slice(created.metadata.name, created)
    resource_api.delete_resource_slice(created.metadata.name)

    w = watch.Watch()
    events = _collect(
        w.stream(
            resource_api.list_resource_slice,
            field_selector=f"spec.nodeName={NODE}",
            resource_version=rv,
            timeout_seconds=5,
            deserialize=False,
        ),
        3,
    )
    w.stop()

    assert [t for t, _ in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert {o["metadata"]["name"] for _, o in events} == {created.metadata.name}
    assert events[1][1]["metadata"]["resourceVersion"] == updated.metadata.resource_version
    versions = [int(o["metadata"]["resourceVersion"]) for _, o in events]
    assert versions == sorted(versions) and len(set(versions)) == 3
    assert events[2][1]["spec"]["pool"]["generation"] == 1  # the last state is delivered


def test_watch_receives_changes_made_after_it_started(resource_api, make_slice):
    rv = resource_api.list_resource_slice().metadata.resource_version
    w = watch.Watch()
    stream = w.stream(
        resource_api.list_resource_slice, resource_version=rv, timeout_seconds=10, deserialize=False
    )
    result: list = []
    reader = threading.Thread(target=lambda: result.extend(_collect(stream, 1)))
    reader.start()
    created = resource_api.create_resource_slice(make_slice())
    reader.join(timeout=10)
    w.stop()
    assert not reader.is_alive()
    assert result[0][0] == "ADDED"
    assert result[0][1]["metadata"]["uid"] == created.metadata.uid


def test_watch_without_version_starts_with_the_current_objects(resource_api, make_slice):
    first = resource_api.create_resource_slice(make_slice())
    w = watch.Watch()
    events = _collect(w.stream(resource_api.list_resource_slice, timeout_seconds=5), 1)
    w.stop()
    assert events[0][0] == "ADDED"
    assert events[0][1]["metadata"]["name"] == first.metadata.name


def test_too_old_resource_version_is_410(server, resource_api, make_slice):
    old = resource_api.list_resource_slice().metadata.resource_version
    resource_api.create_resource_slice(make_slice())
    server.compact()

    with pytest.raises(ApiException) as err:
        list(
            watch.Watch().stream(
                resource_api.list_resource_slice, resource_version=old, timeout_seconds=5
            )
        )
    assert err.value.status == 410


def test_expired_watch_event_on_the_wire(server, resource_api, make_slice):
    """A 200 stream carrying one ERROR event with an Expired Status, as the real server."""
    old = resource_api.list_resource_slice().metadata.resource_version
    resource_api.create_resource_slice(make_slice())
    server.compact()
    response = resource_api.list_resource_slice(
        watch=True, resource_version=old, timeout_seconds=5, _preload_content=False
    )
    lines = [line for line in watch.watch.iter_resp_lines(response) if line]
    response.release_conn()
    assert response.status == 200
    events = [json.loads(line) for line in lines]
    assert [e["type"] for e in events] == ["ERROR"]
    status = events[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert status["message"].startswith(f"too old resource version: {old}")


def test_watch_from_current_version_after_compaction_still_works(server, resource_api, make_slice):
    resource_api.create_resource_slice(make_slice())
    server.compact()
    rv = resource_api.list_resource_slice().metadata.resource_version
    created = resource_api.create_resource_slice(make_slice())
    w = watch.Watch()
    events = _collect(
        w.stream(
            resource_api.list_resource_slice,
            resource_version=rv,
            timeout_seconds=5,
            deserialize=False,
        ),
        1,
    )
    w.stop()
    assert events[0][1]["metadata"]["name"] == created.metadata.name


def test_label_selector_turns_leaving_changes_into_deleted(resource_api, make_slice):
    body = make_slice(name="s")
    body["metadata"]["labels"] = {"pick": "yes"}
    created = resource_api.create_resource_slice(body)
    rv = created.metadata.resource_version
    created.metadata.labels = {"pick": "no"}
    resource_api.replace_resource_slice("s", created)

    w = watch.Watch()
    events = _collect(
        w.stream(
            resource_api.list_resource_slice,
            label_selector="pick=yes",
            resource_version=rv,
            timeout_seconds=5,
            deserialize=False,
        ),
        1,
    )
    w.stop()
    assert [t for t, _ in events] == ["DELETED"]


def test_bookmarks_carry_progress(make_slice, tmp_path):
    with APIServer(bookmark_interval=0.05) as server:
        api_client = server.api_client()
        api = client.ResourceV1Api(api_client)
        api.create_resource_slice(make_slice(node="other", pool="other"))
        latest = api.list_resource_slice().metadata.resource_version
        response = api.list_resource_slice(
            watch=True,
            allow_watch_bookmarks=True,
            field_selector=f"spec.nodeName={NODE}",
            resource_version=latest,
            timeout_seconds=10,
            _preload_content=False,
        )
        first = json.loads(next(watch.watch.iter_resp_lines(response)))
        response.close()
        api_client.close()
    assert first["type"] == "BOOKMARK"
    assert first["object"]["kind"] == "ResourceSlice"
    assert first["object"]["metadata"]["resourceVersion"] == latest


def test_send_initial_events_ends_with_marked_bookmark(resource_api, make_slice):
    resource_api.create_resource_slice(make_slice())
    response = resource_api.list_resource_slice(
        watch=True,
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
        timeout_seconds=5,
        _preload_content=False,
    )
    lines = watch.watch.iter_resp_lines(response)
    events = [json.loads(next(lines)), json.loads(next(lines))]
    response.close()
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    annotations = events[1]["object"]["metadata"]["annotations"]
    assert annotations == {"k8s.io/initial-events-end": "true"}


def test_several_watchers_see_the_same_events(resource_api, make_slice):
    rv = resource_api.list_resource_slice().metadata.resource_version
    for _ in range(3):
        resource_api.create_resource_slice(make_slice())
    seen = []
    for _ in range(3):
        w = watch.Watch()
        seen.append(
            [
                o["metadata"]["name"]
                for _, o in _collect(
                    w.stream(
                        resource_api.list_resource_slice,
                        resource_version=rv,
                        timeout_seconds=5,
                        deserialize=False,
                    ),
                    3,
                )
            ]
        )
        w.stop()
    assert seen[0] == seen[1] == seen[2]
    assert len(set(seen[0])) == 3


def test_watch_times_out_cleanly(resource_api):
    events = list(
        watch.Watch().stream(resource_api.list_resource_slice, timeout_seconds=1, deserialize=False)
    )
    assert events == []


def test_stopping_the_server_ends_open_watches(make_slice):
    server = APIServer().start()
    api_client = server.api_client()
    api = client.ResourceV1Api(api_client)
    rv = api.list_resource_slice().metadata.resource_version
    ended = threading.Event()
    failure: list[BaseException] = []

    def consume() -> None:
        try:
            for _ in watch.Watch().stream(
                api.list_resource_slice, resource_version=rv, timeout_seconds=600
            ):
                pass
        except Exception as exc:  # the connection may also just drop
            failure.append(exc)
        ended.set()

    reader = threading.Thread(target=consume)
    reader.start()
    api.create_resource_slice(make_slice())  # proves the watch is being served...
    while server.request_log.count("watch") == 0:  # ...and that it is registered
        ended.wait(0.01)
    server.stop()
    reader.join(timeout=10)
    api_client.close()
    assert ended.is_set(), "an open watch outlived the server"
    assert not [t for t in threading.enumerate() if "process_request" in t.name]


def test_namespaced_watch_sees_only_its_namespace(resource_api, make_claim):
    rv = resource_api.list_resource_claim_for_all_namespaces().metadata.resource_version
    resource_api.create_namespaced_resource_claim("team-b", make_claim("other", "team-b"))
    mine = resource_api.create_namespaced_resource_claim("team-a", make_claim("mine", "team-a"))
    # The client's model for resource.k8s.io claims is ResourceV1ResourceClaim; Watch cannot
    # derive it from V1ResourceClaimList by itself.
    w = watch.Watch(return_type="ResourceV1ResourceClaim")
    events = _collect(
        w.stream(
            resource_api.list_namespaced_resource_claim,
            "team-a",
            resource_version=rv,
            timeout_seconds=5,
            deserialize=False,
        ),
        1,
    )
    w.stop()
    assert events[0][1]["metadata"]["uid"] == mine.metadata.uid


def test_a_watch_whose_client_left_ends_on_the_server(server):
    def serving() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if "process_request" in t.name]

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("GET", "/apis/resource.k8s.io/v1/resourceslices?watch=true&timeoutSeconds=600")
    assert conn.getresponse().status == 200
    assert len(serving()) == 1
    conn.close()
    for thread in serving():
        thread.join(timeout=10)
    assert serving() == []


def test_a_restarted_server_keeps_its_port_and_objects_and_serves_watches(make_slice):
    """stop() then start() is an API server restart: same URL, same etcd, live watches."""
    server = APIServer().start()
    url = server.url
    api_client = server.api_client()
    api = client.ResourceV1Api(api_client)
    try:
        api.create_resource_slice(make_slice(name="before"))
        rv = api.list_resource_slice().metadata.resource_version
        server.stop()
        server.start()
        assert server.url == url
        assert [s.metadata.name for s in api.list_resource_slice().items] == ["before"]
        api.create_resource_slice(make_slice(name="after"))
        w = watch.Watch()
        events = _collect(
            w.stream(
                api.list_resource_slice, resource_version=rv, timeout_seconds=5, deserialize=False
            ),
            1,
        )
        w.stop()
        assert [(t, o["metadata"]["name"]) for t, o in events] == [("ADDED", "after")]
    finally:
        server.stop()
        api_client.close()


def test_watch_from_a_future_resource_version_ends_with_too_large_error(make_slice):
    """As the watch cache: wait briefly for the version, then one ERROR event (504 Timeout,
    cause ResourceVersionTooLarge), so a client that kept a version from an older server
    lists again instead of waiting forever."""
    with APIServer(too_large_resource_version_wait=0.05) as server:
        api_client = server.api_client()
        api = client.ResourceV1Api(api_client)
        future = server.resource_version + 100
        response = api.list_resource_slice(
            watch=True, resource_version=str(future), timeout_seconds=5, _preload_content=False
        )
        events = [json.loads(line) for line in watch.watch.iter_resp_lines(response) if line]
        response.release_conn()
        api_client.close()
    assert [e["type"] for e in events] == ["ERROR"]
    status = events[0]["object"]
    assert (status["code"], status["reason"]) == (504, "Timeout")
    assert status["message"] == (
        f"Too large resource version: {future}, current: {future - 100}"
    )
    assert status["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


def test_watch_from_a_version_reached_while_waiting_streams_normally(server, make_slice):
    api_client = server.api_client()
    api = client.ResourceV1Api(api_client)
    server.config.too_large_resource_version_wait = 10.0
    start = server.resource_version + 1  # the next write's version
    result: list = []
    stream = watch.Watch().stream(
        api.list_resource_slice, resource_version=str(start), timeout_seconds=5,
        deserialize=False,
    )
    reader = threading.Thread(target=lambda: result.extend(_collect(stream, 1)))
    reader.start()
    api.create_resource_slice(make_slice(name="first"))  # reaches `start`: not reported
    api.create_resource_slice(make_slice(name="second"))
    reader.join(timeout=10)
    api_client.close()
    assert [(t, o["metadata"]["name"]) for t, o in result] == [("ADDED", "second")]


def test_list_then_watch_under_concurrent_writers_replays_to_the_final_state(server, make_slice):
    """Several writers create, update and delete while a client lists and then watches
    from the list's version: every event comes once, in order, after that version, and
    list + events give exactly what the server ends up holding."""
    api_client = server.api_client()
    api = client.ResourceV1Api(api_client)
    selector = f"spec.nodeName={NODE}"

    def writer(k: int) -> None:
        own = server.api_client()
        own_api = client.ResourceV1Api(own)
        for i in range(40):
            name, node = f"w{k}-{i % 4}", NODE if i % 3 else "node-2"
            try:
                current = own_api.read_resource_slice(name)
                if i % 5 == 0:
                    own_api.delete_resource_slice(name)
                else:
                    current.spec.pool.generation += 1
                    own_api.replace_resource_slice(name, current)
            except ApiException as err:
                if err.status == 404:
                    own_api.create_resource_slice(make_slice(name=name, node=node, pool=name))
                elif err.status != 409:
                    raise
        own.close()

    writers = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for thread in writers[:2]:
        thread.start()
    listed = api.list_resource_slice(field_selector=selector, _preload_content=False)
    initial = json.loads(listed.data)
    for thread in writers[2:]:
        thread.start()
    events: list[tuple[str, dict]] = []

    def read() -> None:
        stream = watch.Watch().stream(
            api.list_resource_slice, field_selector=selector,
            resource_version=initial["metadata"]["resourceVersion"], timeout_seconds=30,
            deserialize=False)
        for event in stream:
            if event["object"]["metadata"]["name"] == "zz-last":
                break
            events.append((event["type"], event["object"]))
        stream.close()

    reader = threading.Thread(target=read)
    reader.start()
    for thread in writers:
        thread.join()
    held = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
            for o in server.objects("resourceslices") if o["spec"]["nodeName"] == NODE}
    server.put_object("resourceslices", make_slice(name="zz-last"))  # marks the end
    reader.join(timeout=30)
    api_client.close()
    assert not reader.is_alive()

    versions = [int(o["metadata"]["resourceVersion"]) for _, o in events]
    assert versions == sorted(set(versions))  # in order, no duplicates
    assert versions[0] > int(initial["metadata"]["resourceVersion"])
    state = {o["metadata"]["name"]: o for o in initial["items"]}
    for kind, obj in events:
        if kind == "DELETED":
            del state[obj["metadata"]["name"]]  # a DELETED for an object we know
        else:
            assert (kind == "ADDED") == (obj["metadata"]["name"] not in state)
            state[obj["metadata"]["name"]] = obj
    assert {n: o["metadata"]["resourceVersion"] for n, o in state.items()} == held
