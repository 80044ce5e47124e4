"""FileEvents: wakes up for the watched files' changes only, with real inotify."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from simdra._driver.devices.file_events import FileEvents


def test_changes_of_the_watched_file_wake_and_its_neighbours_do_not(tmp_path: Path) -> None:
    watched = tmp_path / "faults.json"
    events = FileEvents([watched])
    try:
        (tmp_path / "claims.generation").write_bytes(b"1")  # a prepare's write nearby
        assert not events.wait(0.2)
        watched.write_text("{}")  # created and written in place
        assert events.wait(5)
        temp = tmp_path / ".faults.json.abc.tmp"
        temp.write_text("{}")
        os.replace(temp, watched)  # replaced atomically
        assert events.wait(5)
        watched.unlink()
        assert events.wait(5)
        assert not events.wait(0.1)  # each change woke it once
    finally:
        events.close()


def test_interrupt_ends_a_wait_without_a_change(tmp_path: Path) -> None:
    events = FileEvents([tmp_path / "inventory.yaml"])
    try:
        threading.Timer(0.1, events.interrupt).start()
        assert not events.wait(30)
    finally:
        events.close()


def test_a_neighbour_change_does_not_end_the_wait_for_the_watched_file(tmp_path: Path) -> None:
    watched = tmp_path / "faults.json"
    events = FileEvents([watched])
    neighbour = threading.Timer(0.05, (tmp_path / "serialize.lock").write_bytes, [b""])
    change = threading.Timer(0.3, watched.write_text, ["{}"])
    try:
        neighbour.start()
        change.start()
        assert events.wait(10)  # slept through the neighbour's event, woke for the file
    finally:
        neighbour.join()
        change.join()
        events.close()
