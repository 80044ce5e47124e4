"""`kubectl dra devices` and `kubectl dra top`: read the snapshot, compute, print."""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable, Sequence
from typing import TextIO

from simdra._driver.dra_cli import inventory, render, top, view
from simdra._driver.dra_cli.gather import gather
from simdra._driver.kubeapi.client import RestClient

CLEAR = "\033[H\033[2J"


def run_devices(args: argparse.Namespace, client: RestClient, out: TextIO) -> int:
    """One row per device (filtered by node, driver, class), as a table or document."""
    kinds = ["slices", "claims", "pods", "taint_rules"]
    snapshot = gather(client, kinds + (["classes"] if args.device_class else []))
    index = inventory.build(snapshot)
    keep = None
    if args.device_class:
        from simdra._driver.dra_cli.classes import class_matcher

        keep = class_matcher(snapshot.classes, args.device_class)
    rows = view.device_rows(index, node=args.node, driver=args.driver, keep=keep)
    if args.output == "json":  # row by row: 8,000 rows are 7 MB of text
        render.write_json(out, {"kind": "DeviceList",
                                "devices": (view.row_json(r) for r in rows)})
    elif args.output == "yaml":
        data = {"kind": "DeviceList", "devices": [view.row_json(r) for r in rows]}
        out.write(render.document(data, args.output))
    elif not rows:
        out.write("no devices found\n")
    else:
        out.write(render.table(view.HEADERS, [view.row_cells(r, args.output == "wide")
                                              for r in rows], render.use_colour(out)))
    return 0


def run_top(args: argparse.Namespace, client: RestClient, out: TextIO,
            sleep: Callable[[float], None] | None = None) -> int:
    """Totals per group; with --watch, again every --interval seconds (--iterations
    times, 0: until interrupted)."""
    shown = 0
    while True:
        text = _top_once(args, client, out)
        if args.watch and render.use_colour(out):
            text = CLEAR + text
        out.write(text)
        out.flush()
        shown += 1
        if not args.watch or (args.iterations and shown >= args.iterations):
            return 0
        gc.collect()  # what a refresh left in cycles (the collector is off: main.py)
        (sleep or time.sleep)(args.interval)


def _top_once(args: argparse.Namespace, client: RestClient, out: TextIO) -> str:
    kinds = ["slices", "claims", "pods"] + (["classes"] if args.by == "class" else [])
    snapshot = gather(client, kinds)
    index = inventory.build(snapshot)
    rows = view.device_rows(index)
    totals = top.group_totals(rows, _grouping(args.by, snapshot.classes, index))
    if args.output in ("json", "yaml"):
        data = {"kind": "DeviceTotals", "by": args.by,
                "groups": [top.total_json(t) for t in totals]}
        return render.document(data, args.output)
    return render.table(top.headers(args.by), [top.cells(t) for t in totals],
                        render.use_colour(out))


def _grouping(by: str, classes: Sequence[inventory.JSON],
              index: inventory.Inventory) -> Callable[[view.DeviceRow], Sequence[str]]:
    if by == "node":
        return lambda row: [row.node]
    if by == "driver":
        return lambda row: [row.driver]
    from simdra._driver.dra_cli.classes import class_matchers

    matchers = class_matchers(classes)
    devices = {d.key: d for d in index.devices}

    def of_class(row: view.DeviceRow) -> list[str]:
        device = devices[(row.driver, row.pool, row.device)]
        return [name for name, matches in matchers.items() if matches(device)] \
            or ["(no class)"]

    return of_class
