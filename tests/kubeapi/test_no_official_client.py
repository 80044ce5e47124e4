"""The plugin's runtime never imports the official `kubernetes` client (about 47 MiB
of RSS): every module the plugin can load, and a client built from a kubeconfig and
used against the API stand-in, leave it out of sys.modules. Only a kubeconfig whose
credentials need the official loader (exec and the like) brings it in."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from simdra._driver.testing.apiserver import APIServer

from .test_config import exec_user, write_kubeconfig

# Not the plugin: the demo's harness, the loader for exec-style credentials and `kubectl
# dra` (its `why` runs the harness's allocator; a layer contract keeps the harness out of
# `devices` and `top`). (simdra.__main__ runs the command line when imported.)
NOT_RUNTIME = ("simdra._driver.testing", "simdra._driver.cli.demo",
               "simdra._driver.kubeapi.fallback", "simdra.__main__", "simdra._driver.dra_cli")

_PROBE = """
import importlib, json, pathlib, sys
import simdra._driver
from simdra._driver.kube import load_api_client
from simdra._driver.slices.api import SliceApi

root = pathlib.Path(simdra._driver.__file__).parent
for path in sorted(root.rglob("*.py")):  # not pkgutil: it imports every package it walks
    name = ".".join(("simdra", "_driver", *path.relative_to(root).with_suffix("").parts))
    name = name.removesuffix(".__init__")
    if not name.startswith(tuple(sys.argv[2].split(","))):
        importlib.import_module(name)
with load_api_client(sys.argv[1]) as client:
    version = SliceApi(client, "gpu.example.com", "node-1").server_version()
print(json.dumps({"version": version,
                  "kubernetes": sorted(m for m in sys.modules if m.startswith("kubernetes"))[:3]}))
"""


def _probe(kubeconfig: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", _PROBE, kubeconfig, ",".join(NOT_RUNTIME)],
                          capture_output=True, text=True, timeout=120, check=True)
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_the_plugins_modules_and_client_do_not_import_kubernetes(tmp_path: Path) -> None:
    with APIServer() as server:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", {"server": server.url},
                                      {"token": "t"})
        result = _probe(kubeconfig)

    assert result["version"], "the probe's client did not reach the stand-in"
    assert result["kubernetes"] == []


def test_exec_credentials_do_import_it(tmp_path: Path) -> None:
    with APIServer() as server:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", {"server": server.url},
                                      exec_user(tmp_path))
        result = _probe(kubeconfig)

    assert result["version"] and result["kubernetes"] != []
