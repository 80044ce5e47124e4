"""`simdra run` takes the plugin's own pod (what free-mode reconciliation needs the
kubelet to list) from flags or the downward API's environment variables, both or
neither: half an identity is one clear line, exit status 2."""

from __future__ import annotations

import pytest

import simdra._driver.startup
from simdra._driver.cli import main


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list:
    for name in ("NODE_NAME", "POD_NAMESPACE", "POD_NAME"):
        monkeypatch.delenv(name, raising=False)
    seen: list = []
    monkeypatch.setattr(simdra._driver.startup, "run_plugin",
                        lambda config, catalog: seen.append(config) or 0)
    return seen


def test_the_pods_name_and_namespace_come_from_the_environment(started, monkeypatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "simdra")
    monkeypatch.setenv("POD_NAME", "simdra-kubelet-plugin-x7k2p")

    assert main(["run", "--node-name", "n"]) == 0
    assert (started[0].pod_namespace, started[0].pod_name) == (
        "simdra", "simdra-kubelet-plugin-x7k2p")


def test_outside_a_pod_neither_is_set(started) -> None:
    assert main(["run", "--node-name", "n", "--reconcile-mode", "free"]) == 0
    assert (started[0].pod_namespace, started[0].pod_name) == (None, None)


def test_half_an_identity_is_refused_in_one_line(started, capsys) -> None:
    code = main(["run", "--node-name", "n", "--pod-name", "simdra-kubelet-plugin-x7k2p"])
    err = capsys.readouterr().err.strip()
    assert (code, started) == (2, []) and "\n" not in err
    assert "--pod-namespace" in err and "go together" in err
