"""Which of simdra's files one NodePrepareResources call runs through, and how often it
moves between packages: the shape of the prepare path, measured by running it.

The plugin is wired in this process as `simdra run` wires it (`startup`: the kubelet's
sockets, then the plugin over a fake-device backend), against the API server stand-in;
one allocated claim is prepared over the real DRA socket while a profiler records every
Python function call. Counted are the calls in simdra's runtime (`simdra/_driver`, the
harness and the generated gRPC code left out) made by the threads that serve the call
or work for it (those that run anything under `claims/`; the publisher's and health's
threads are not):

- files: distinct files entered;
- packages: distinct packages (`claims`, `kubelet`, ...; `claims/plan` is its own);
- moves: calls whose file is in another package than the caller's;
- re-entries of the busiest file: how often the path comes back into it from another.

    python bench/prepare_path.py          # one call, one claim with one GPU

The flat claims/ of about 40 modules made this 44 files in 10 packages, 83 moves, 27
entries into core/textlimits.py; cut by concept, 22 files in 11 packages, 83 moves, 14
entries into atomicfile.py (docs/architecture.md, "How the code is cut").
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import grpc

from simdra._driver.builtins import BUILTIN
from simdra._driver.config import Config
from simdra._driver.kube import ApiClientLoader
from simdra._driver.kubelet.gen import dra_v1_pb2, dra_v1_pb2_grpc
from simdra._driver.kubelet.sockets import dra_socket_path
from simdra._driver.startup import _serve_kubelet, _start_plugin
from simdra._driver.testing.apiserver import APIServer

DRIVER, NODE = "gpu.example.com", "node-a"
WARM, TRACED = "3f1c9f5e-0000-4000-8000-000000000001", "3f1c9f5e-0000-4000-8000-000000000002"
RUNTIME = Path(__file__).resolve().parents[1] / "simdra" / "_driver"
LEFT_OUT = ("testing/", "kubelet/gen/")


class CallLog:
    """Per thread, the runtime files of its calls, in order (caller file, callee file)."""

    def __init__(self) -> None:
        self.moves: dict[int, list[tuple[str, str]]] = {}
        self.on = False

    def profile(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call" or not self.on:
            return
        callee = _runtime_file(frame.f_code.co_filename)
        if callee is None:
            return
        caller = _caller_file(frame.f_back)
        self.moves.setdefault(threading.get_ident(), []).append((caller or "", callee))

    def of_the_prepare(self) -> list[tuple[str, str]]:
        """The moves of the threads that touched the claims package."""
        return [m for moves in self.moves.values()
                if any(c.startswith("claims/") for _, c in moves) for m in moves]


def _runtime_file(path: str) -> str | None:
    try:
        relative = Path(path).resolve().relative_to(RUNTIME).as_posix()
    except ValueError:
        return None
    return None if relative.startswith(LEFT_OUT) else relative


def _caller_file(frame: FrameType | None) -> str | None:
    while frame is not None:
        found = _runtime_file(frame.f_code.co_filename)
        if found is not None:
            return found
        frame = frame.f_back
    return None


def package(path: str) -> str:
    """`claims/plan/cdi.py` -> `claims/plan`; `plugin.py` -> `plugin`."""
    parent = str(Path(path).parent)
    return Path(path).stem if parent == "." else parent


def claim(uid: str, device: str) -> dict[str, Any]:
    """A claim with one GPU, allocated as the scheduler would."""
    result = {"request": "gpu", "driver": DRIVER, "pool": NODE, "device": device}
    return {"metadata": {"name": device, "namespace": "default", "uid": uid},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": f"gpu.{DRIVER}"}}]}},
            "status": {"allocation": {"devices": {"results": [result]}}}}


def prepare_once(workdir: Path, api: APIServer, log: CallLog) -> str:
    # Before any thread starts: a profiler reaches only the threads started after it.
    threading.setprofile(log.profile)
    config = Config(node_name=NODE, driver_name=DRIVER,
                    kubeconfig=str(api.write_kubeconfig(workdir / "kubeconfig")),
                    registrar_dir=workdir / "registry",
                    plugins_dir=workdir / "plugins", cdi_root=workdir / "cdi",
                    device_profile="gpu", num_devices=2, reconcile_interval=0)
    loader = ApiClientLoader(config.kubeconfig, on_error=lambda: None)
    early = _serve_kubelet(config)
    plugin = _start_plugin(config, BUILTIN, loader, early)
    loader.start()
    try:
        api.put_object("resourceclaims", claim(WARM, "gpu-0"))
        api.put_object("resourceclaims", claim(TRACED, "gpu-1"))
        return _traced_call(dra_socket_path(str(config.data_dir)), log)
    finally:
        threading.setprofile(None)
        plugin.stop()
        loader.close()


def _request(uid: str, name: str) -> Any:
    return dra_v1_pb2.NodePrepareResourcesRequest(claims=[dra_v1_pb2.Claim(
        uid=uid, namespace="default", name=name)])


def _traced_call(socket: str, log: CallLog) -> str:
    with grpc.insecure_channel(f"unix:{socket}") as channel:
        stub = dra_v1_pb2_grpc.DRAPluginStub(channel)
        # Another claim first: imports and the client's first use are not the path.
        stub.NodePrepareResources(_request(WARM, "gpu-0"), timeout=30)
        log.on = True
        try:
            answer = stub.NodePrepareResources(_request(TRACED, "gpu-1"), timeout=30)
            time.sleep(0.5)  # the status writer's thread, which works for the call too
        finally:
            log.on = False
    return str(answer.claims[TRACED].error)


def report(moves: list[tuple[str, str]]) -> None:
    files = {callee for _, callee in moves}
    packages = {package(f) for f in files}
    between = [(a, b) for a, b in moves if a and package(a) != package(b)]
    entries = Counter(b for a, b in moves if a and a != b)
    busiest, count = entries.most_common(1)[0]
    print(f"files entered: {len(files)}; packages: {len(packages)} "
          f"({', '.join(sorted(packages))})")
    print(f"moves between packages: {len(between)}; entries into {busiest} from another "
          f"file: {count}")
    print("files:", ", ".join(sorted(files)))


def main() -> None:
    log = CallLog()
    with tempfile.TemporaryDirectory(prefix="pp-", dir="/tmp") as tmp, APIServer() as api:
        error = prepare_once(Path(tmp), api, log)
    if error:
        raise SystemExit(f"prepare_path: the prepare failed: {error}")
    report(log.of_the_prepare())


if __name__ == "__main__":
    main()
