"""The floor of a prepare and of an unprepare, none of it this project's code.

A prepare needs at least one unary gRPC call and two atomic writes (the claim's record,
then its CDI spec, each in its own directory); an unprepare one call and two durable
unlinks. `Floor` keeps a minimal Python gRPC server running in its own process on a
unix socket, so that samples can be taken between the plugin's calls, under the same
load on the machine and its disk.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import grpc

from simdra._driver.atomicfile import remove_durable, write_atomic

RECORD_BYTES = 3000  # about a one-share claim's record
SPEC_BYTES = 1200  # and its CDI spec
PART_SAMPLES = 200

_MINIMAL_SERVER = """
import sys
from concurrent.futures import ThreadPoolExecutor
import grpc
handler = grpc.method_handlers_generic_handler("bench.Empty", {
    "Call": grpc.unary_unary_rpc_method_handler(lambda request, context: b"",
        request_deserializer=None, response_serializer=None)})
server = grpc.server(ThreadPoolExecutor(8))
server.add_generic_rpc_handlers((handler,))
server.add_insecure_port("unix:" + sys.argv[1])
server.start()
print("ready", flush=True)
sys.stdin.read()
"""


class Floor:
    """A context manager: the minimal server, its channel, and two directories to
    write in. `prepare()` and `unprepare()` time one floor call each."""

    def __init__(self, workdir: Path) -> None:
        self._dirs = (workdir / "records", workdir / "specs")
        for directory in self._dirs:
            directory.mkdir(parents=True)
        self._socket = workdir / "floor.sock"
        self._server: subprocess.Popen[bytes] | None = None
        self._channel: grpc.Channel | None = None
        self._written: list[tuple[Path, Path]] = []  # pairs an unprepare sample removes
        self._names = iter(range(10**9))
        self._data = (os.urandom(RECORD_BYTES), os.urandom(SPEC_BYTES))

    def __enter__(self) -> Floor:
        self._server = subprocess.Popen(
            [sys.executable, "-c", _MINIMAL_SERVER, str(self._socket)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self._server.stdout is not None
        if self._server.stdout.readline().strip() != b"ready":
            raise RuntimeError("the floor's minimal gRPC server did not start")
        self._channel = grpc.insecure_channel(f"unix:{self._socket}")
        self._call = self._channel.unary_unary("/bench.Empty/Call")
        self._call(b"", timeout=10)  # connected
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._channel is not None:
            self._channel.close()
        if self._server is not None:
            self._server.kill()
            self._server.wait()

    @property
    def server_pid(self) -> int:
        """Process id of the minimal gRPC server (to count its CPU)."""
        assert self._server is not None
        return self._server.pid

    def call(self) -> None:
        """One empty unary call."""
        self._call(b"", timeout=10)

    def _write_pair(self) -> tuple[Path, Path]:
        name = f"f{next(self._names)}.json"
        pair = (self._dirs[0] / name, self._dirs[1] / name)
        for path, data in zip(pair, self._data, strict=True):
            write_atomic(path, data)
        return pair

    def prepare(self) -> float:
        """Seconds of one call and two atomic writes, in the order a prepare makes them."""
        start = time.perf_counter()
        self.call()
        pair = self._write_pair()
        elapsed = time.perf_counter() - start
        self._written.append(pair)
        return elapsed

    def unprepare(self) -> float:
        """Seconds of one call and two durable unlinks (of files an earlier sample wrote,
        or, when none is left, two written first, untimed)."""
        pair = self._written.pop() if self._written else self._write_pair()
        start = time.perf_counter()
        self.call()
        for path in reversed(pair):  # the spec first, as an unprepare does
            remove_durable(path)
        return time.perf_counter() - start

    def parts(self, samples: int = PART_SAMPLES) -> dict[str, float]:
        """p50 seconds of each part on its own: rpc, write, remove."""
        rpc, writes, removes = [], [], []
        for _ in range(samples):
            start = time.perf_counter()
            self.call()
            rpc.append(time.perf_counter() - start)
            start = time.perf_counter()
            path = self._dirs[0] / f"p{next(self._names)}.json"
            write_atomic(path, self._data[0])
            writes.append(time.perf_counter() - start)
            start = time.perf_counter()
            remove_durable(path)
            removes.append(time.perf_counter() - start)
        return {"rpc": statistics.median(rpc), "write": statistics.median(writes),
                "remove": statistics.median(removes)}
