"""The API stand-in in a child process, for benches whose figures (RSS, CPU, threads)
must be those of the code measured, not of the server answering it.

The parent drives the child over a pipe by command name; each bench names its own
commands as module-level functions of the server (picklable, so the spawned child can
run them)."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Command = Callable[[Any], Any]  # the child's APIServer -> what the parent receives


def _serve(conn: Any, commands: Mapping[str, Command], nodes: Sequence[str]) -> None:
    from simdra._driver.testing.apiserver import APIServer

    with APIServer() as server:
        for node in nodes:
            server.put_object("nodes", {"metadata": {"name": node}})
        conn.send(server.url)
        while (name := conn.recv()) != "stop":
            conn.send(commands[name](server))


class StandIn:
    """The parent's handle on the child-process API stand-in: its `url`, and `ask` to
    run one of the bench's commands there."""

    def __init__(self, commands: Mapping[str, Command], nodes: Sequence[str] = ()) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(child, dict(commands), tuple(nodes)),
                                    daemon=True)
        self._process.start()
        self.url: str = self._conn.recv()

    def ask(self, command: str) -> Any:
        """Run the named command in the child; its result."""
        self._conn.send(command)
        return self._conn.recv()

    def stop(self) -> None:
        """Stop the stand-in and wait for its process."""
        self._conn.send("stop")
        self._process.join(10)
