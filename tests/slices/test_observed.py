"""The observed-slice cache: stale events never undo what we know."""

from __future__ import annotations

from simdra._driver.slices.observed import SliceCache, rv_newer


def obj(name, rv, uid="u1", pool="p"):
    return {"metadata": {"name": name, "uid": uid, "resourceVersion": rv},
            "spec": {"pool": {"name": pool}}}


def test_resource_versions_compare_numerically():
    assert rv_newer("10", "9") and not rv_newer("9", "10") and not rv_newer("9", "9")


def test_an_event_older_than_our_write_is_ignored():
    cache = SliceCache()
    cache.put(obj("s", "10"))
    assert cache.apply_event("MODIFIED", obj("s", "9")) is None
    assert cache.apply_event("MODIFIED", obj("s", "10")) is None  # echo of our own write
    assert cache.apply_event("MODIFIED", obj("s", "11")) == "p"
    assert cache.pool_slices("p")[0]["metadata"]["resourceVersion"] == "11"


def test_a_deleted_slice_does_not_come_back_through_a_late_event():
    cache = SliceCache()
    cache.put(obj("s", "10"))
    cache.remove("s", "u1")
    assert cache.apply_event("MODIFIED", obj("s", "11")) is None
    assert cache.pool_slices("p") == []


def test_a_relist_keeps_our_newer_writes_and_drops_what_is_gone():
    cache = SliceCache()
    cache.put(obj("gone", "5", uid="g"))
    listing = cache.mark()  # the list request goes out; our write lands meanwhile
    cache.put(obj("mine", "20", uid="m"))
    changed = cache.replace([obj("other", "7", uid="o", pool="q")], list_rv="15", since=listing)
    assert sorted(o["metadata"]["name"] for o in cache.by_pool()["p"]) == ["mine"]
    assert changed == {"p", "q"}


def test_a_relist_drops_writes_made_before_it_even_with_newer_versions():
    """A server whose versions went back (etcd restored, a new API server) must not leave
    slices we wrote earlier in the cache: they would never be published again."""
    cache = SliceCache()
    cache.put(obj("mine", "500", uid="m"))
    listing = cache.mark()
    assert cache.replace([], list_rv="3", since=listing) == {"p"}
    assert cache.by_pool() == {}


def with_devices(name, rv, devices, pool="p"):
    slice_obj = obj(name, rv, pool=pool)
    slice_obj["spec"]["devices"] = devices
    return slice_obj


def test_clean_pools_hold_each_device_once_and_only_equal_ones_are_swapped():
    desired = {"d0": {"name": "d0", "attributes": {"a": {"int": 1}}},
               "d1": {"name": "d1", "attributes": {"a": {"int": 2}}}}
    cache = SliceCache()
    cache.put(with_devices("s", "10", [{"name": "d0", "attributes": {"a": {"int": 1}}},
                                       {"name": "d1", "attributes": {"a": {"bool": True}}}]))
    assert cache.share_devices("p", desired) == 1
    stored = cache.pool_slices("p")[0]["spec"]["devices"]
    assert stored[0] is desired["d0"]  # one object for both views
    assert stored[1] == {"name": "d1", "attributes": {"a": {"bool": True}}}  # the server's
    assert cache.share_devices("p", desired) == 0  # already shared: nothing to do


def test_a_relist_keeps_the_stored_object_of_an_unchanged_slice():
    cache = SliceCache()
    devices = [{"name": "d0"}]
    cache.put(with_devices("s", "10", devices))
    listing = cache.mark()
    changed = cache.replace([with_devices("s", "10", [{"name": "d0"}])], "10", listing)
    assert changed == set()
    assert cache.pool_slices("p")[0]["spec"]["devices"] is devices
