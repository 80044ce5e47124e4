"""The kubelet's sockets served before the plugin is built: the kubelet can register at
once, and calls that come first wait for the preparer (or fail with why it never came)."""

from __future__ import annotations

import threading
from pathlib import Path

from simdra._driver.claims.types import ClaimRef
from simdra._driver.kubelet.early import serve_kubelet_early
from simdra._driver.testing.kubelet import KubeletEmulator

from .fakes import DRIVER, Dirs, FakePreparer

CLAIM = ClaimRef("default", "c1", "uid-1")


def _call_in_background(kubelet: KubeletEmulator) -> tuple[threading.Thread, list[object]]:
    answers: list[object] = []

    def call() -> None:
        answers.append(kubelet.unprepare([CLAIM], driver_name=DRIVER))

    thread = threading.Thread(target=call)
    thread.start()
    return thread, answers


def test_registers_at_once_and_a_call_waits_for_the_preparer(
    dirs: Dirs, preparer: FakePreparer, kubelet: KubeletEmulator
) -> None:
    early = serve_kubelet_early(DRIVER, Path(dirs.data), dirs.dra_socket,
                                dirs.registration_socket)
    try:
        assert kubelet.wait_for_plugin(DRIVER, timeout=5).health_version is not None
        thread, answers = _call_in_background(kubelet)
        thread.join(timeout=0.5)
        assert thread.is_alive() and not answers  # no preparer yet: the call waits
        early.preparer.set(preparer)
        thread.join(timeout=10)
        assert answers == [{CLAIM.uid: {"error": ""}}]
        assert preparer.calls == [("unprepare", [CLAIM])]
    finally:
        early.kubelet.stop(grace=0)


def test_a_plugin_that_fails_to_start_fails_the_waiting_calls_with_the_reason(
    dirs: Dirs, kubelet: KubeletEmulator
) -> None:
    early = serve_kubelet_early(DRIVER, Path(dirs.data), dirs.dra_socket,
                                dirs.registration_socket)
    try:
        kubelet.wait_for_plugin(DRIVER, timeout=5)
        thread, answers = _call_in_background(kubelet)
        thread.join(timeout=0.3)
        early.preparer.fail("device discovery failed: no such profile")
        thread.join(timeout=10)
        (answer,) = answers
        assert "device discovery failed: no such profile" in answer[CLAIM.uid]["error"]
    finally:
        early.kubelet.stop(grace=0)
