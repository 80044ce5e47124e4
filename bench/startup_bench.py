"""Start-up of the plugin process against a floor measured in the same run.

Floor (none of this project's code): a Python process that imports grpc, serves an empty
unary method on a unix socket and is called once: exec to the first answer.

Against it, `simdra run` with fake devices (API stand-in over HTTP): exec to the
registration socket answering GetInfo (when the kubelet can register the plugin; issue
23's target: at most twice the floor's), exec to the node's pool completely published,
and SIGTERM to exit once it is (with the floor server's SIGTERM to exit).

The plugin's modules are byte-compiled first, as installing the package does (the
image's pip); a shell with PYTHONDONTWRITEBYTECODE=1 would otherwise make every start
compile them from source, which the floor's (installed) grpc never pays.

    python bench/startup_bench.py [--runs 7] [--devices 8]
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import grpc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from targets import Row, table  # noqa: E402

from simdra._driver.kubelet.gen import pluginregistration_v1_pb2 as regpb  # noqa: E402
from simdra._driver.kubelet.gen import pluginregistration_v1_pb2_grpc as regpb_grpc  # noqa: E402
from simdra._driver.testing.apiserver import APIServer  # noqa: E402

FLOOR_SERVER = textwrap.dedent("""
    import sys, grpc
    from concurrent import futures
    def empty(request, context):
        return b""
    handler = grpc.method_handlers_generic_handler("floor.Floor", {
        "Empty": grpc.unary_unary_rpc_method_handler(empty)})
    server = grpc.server(futures.ThreadPoolExecutor(2))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port("unix:" + sys.argv[1])
    server.start()
    server.wait_for_termination()
""")


def _until(ready: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError("not ready in time")
        time.sleep(0.002)


def _answers(path: Path, call: Callable[[grpc.Channel], object]) -> bool:
    if not path.exists():
        return False
    channel = grpc.insecure_channel(f"unix:{path}")
    try:
        call(channel)
        return True
    except grpc.RpcError:
        return False
    finally:
        channel.close()


def _terminate(process: subprocess.Popen[bytes]) -> float:
    """SIGTERM, and the seconds until the process has exited."""
    start = time.monotonic()
    process.terminate()
    process.wait()
    return time.monotonic() - start


def floor_once(workdir: Path) -> tuple[float, float]:
    """Exec of a minimal gRPC server to its first answer on a unix socket, and its
    SIGTERM to exit."""
    socket = workdir / "floor.sock"
    socket.unlink(missing_ok=True)
    start = time.monotonic()
    process = subprocess.Popen([sys.executable, "-c", FLOOR_SERVER, str(socket)])
    try:
        def call(channel: grpc.Channel) -> object:
            method = channel.unary_unary("/floor.Floor/Empty")
            return method(b"", timeout=0.5)
        _until(lambda: _answers(socket, call))
        return time.monotonic() - start, _terminate(process)
    finally:
        process.kill()
        process.wait()


def plugin_once(api: APIServer, kubeconfig: Path, workdir: Path, devices: int,
                run: int) -> tuple[float, float, float]:
    """Exec of `simdra run` to GetInfo answered, and to its pool completely published;
    then SIGTERM to exit."""
    registry, plugins = workdir / f"registry-{run}", workdir / f"plugins-{run}"
    node = f"node-{run}"
    from kubernetes import client

    client.CoreV1Api(api.api_client()).create_node({"metadata": {"name": node}})
    start = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "simdra", "run", "--node-name", node,
         "--kubeconfig", str(kubeconfig), "--kubelet-registrar-directory-path", str(registry),
         "--kubelet-plugins-directory-path", str(plugins), "--cdi-root", str(workdir / "cdi"),
         "--num-devices", str(devices)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        socket = registry / "dra.example.com-reg.sock"

        def get_info(channel: grpc.Channel) -> object:
            return regpb_grpc.RegistrationStub(channel).GetInfo(regpb.InfoRequest(), timeout=0.5)
        _until(lambda: _answers(socket, get_info))
        registered = time.monotonic() - start

        def published() -> bool:
            mine = [s for s in api.objects("resourceslices")
                    if s["spec"].get("nodeName") == node]
            return bool(mine) and len(mine) == mine[0]["spec"]["pool"]["resourceSliceCount"]
        _until(published)
        done = time.monotonic() - start
        time.sleep(0.5)  # settled: the first rescan and the API client's threads
        return registered, done, _terminate(process)
    finally:
        process.terminate()
        process.wait()


REGISTRATION_TARGET = 2.0  # exec to GetInfo answered / the floor's exec to an answer, at most


def measure(runs: int = 7, devices: int = 8) -> list[Row]:
    """Medians of `runs` starts, the floor's taken before and after the plugin's; the
    targets table's rows."""
    compileall.compile_dir(ROOT / "driver", quiet=1)
    with tempfile.TemporaryDirectory() as tmp, APIServer() as api:
        workdir = Path(tmp)
        kubeconfig = api.write_kubeconfig(workdir / "kubeconfig")
        floors = [floor_once(workdir) for _ in range(runs)]
        starts = [plugin_once(api, kubeconfig, workdir, devices, i) for i in range(runs)]
        floors += [floor_once(workdir) for _ in range(runs)]
    floor = statistics.median(f for f, _ in floors)
    floor_exit = statistics.median(e for _, e in floors)
    registered = statistics.median(r for r, _, _ in starts)
    published = statistics.median(p for _, p, _ in starts)
    exited = statistics.median(e for _, _, e in starts)
    ms = 1000.0
    return [
        Row("floor: exec -> minimal gRPC server answers", floor * ms, "ms"),
        Row("exec -> registration socket answers GetInfo", registered * ms, "ms"),
        Row("exec -> registration / floor", registered / floor, "x",
            f"<= {REGISTRATION_TARGET:.1f}x", registered / floor <= REGISTRATION_TARGET),
        Row(f"exec -> pool published ({devices} fake GPUs)", published * ms, "ms"),
        Row("exec -> pool published / floor", published / floor, "x"),
        Row("floor: SIGTERM -> minimal gRPC server exited", floor_exit * ms, "ms"),
        Row("SIGTERM -> plugin exited (pool published)", exited * ms, "ms"),
    ]


def main() -> None:
    """Print the floor, the plugin's start-up figures and their ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--devices", type=int, default=8)
    args = parser.parse_args()
    print(table(f"start-up (medians of {args.runs} runs)", measure(args.runs, args.devices)))


if __name__ == "__main__":
    main()
