"""`simdra usage`: what is prepared on this node, per device, read from the plugin's
checkpoint records (`<data dir>/claims/*.json`) and nothing else: no API server, no lock
(records are replaced by atomic renames, so every file read is a whole record), no
writes. It therefore works next to a running plugin and for a stopped one. Records that
cannot be read are listed as problems, one line each, and the devices the claim's CDI
spec names (read from `--cdi-root`) are shown as "reserved by an unreadable record", as
the plugin keeps them. The report itself is `simdra._driver.claims.store.usage` (pure).

Exit status: 0 (also with problems, which the output shows), 1 when the data directory
cannot be read, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from simdra._driver.claims.store.checkpoint import CorruptRecord, read_records, records_directory
from simdra._driver.claims.store.reserved import Reservation, reservation
from simdra._driver.claims.store.usage import (
    UNREADABLE_NOTE,
    CounterUsage,
    DeviceUsage,
    UsageReport,
    usage_report,
)
from simdra._driver.cli.parser import OneLineParser, SubParsers
from simdra._driver.core.quantity import quantity_text
from simdra._driver.core.textlimits import escape_controls

DEFAULT_PLUGINS_DIR = "/var/lib/kubelet/plugins"
DEFAULT_DRIVER_NAME = "dra.example.com"
DEFAULT_CDI_ROOT = "/var/run/cdi"


def report_json(report: UsageReport) -> dict[str, Any]:
    """The report as JSON for scripts (quantities as Kubernetes quantity strings)."""
    return {
        "dataDir": report.data_dir,
        "devices": [_device_json(d) for d in report.devices],
        "counterSets": [_counter_json(c) for c in report.counters],
        "problems": [_problem_json(report, p) for p in report.problems],
    }


def _device_json(d: DeviceUsage) -> dict[str, Any]:
    return {
        "pool": d.pool,
        "device": d.device,
        "type": d.device_type,
        "mode": _mode(d),
        "capacity": _quantities(d.capacity),
        "used": _quantities(d.used),
        "free": _quantities(d.free),
        "holders": [
            {
                "claim": {"namespace": h.namespace, "name": h.name, "uid": h.uid},
                "shareID": h.share_id,
                "consumed": _quantities(h.consumed),
                "adminAccess": h.admin_access,
                "requests": list(h.requests),
            }
            for h in d.holders
        ],
        "reservedByUnreadableRecords": list(d.reserved_by),
    }


def _counter_json(c: CounterUsage) -> dict[str, Any]:
    return {
        "pool": c.pool,
        "name": c.counter_set,
        "total": _quantities(c.total),
        "used": _quantities(c.used),
        "free": _quantities(c.free),
        "devices": list(c.devices),
    }


def _problem_json(report: UsageReport, p: CorruptRecord) -> dict[str, Any]:
    held = _held(report, p)
    return {
        "claimUID": p.uid,
        "path": str(p.path),
        "reason": p.reason,
        "reserves": [f"{pool}/{device}" for pool, device in held.devices],
        "reservation": held.describe(),
    }


def _held(report: UsageReport, problem: CorruptRecord) -> Reservation:
    for held in report.reservations:
        if held.claim_uid == problem.uid:
            return held
    return Reservation(problem.uid, (), "CDI spec not read")


def _mode(device: DeviceUsage) -> str:
    if device.reserved_by and not device.holders:
        return "reserved"
    return "exclusive" if device.exclusive else "shared"


def render_table(report: UsageReport) -> str:
    """The report as aligned text tables."""
    if not report.devices and not report.problems:
        return f"no prepared claims in {report.data_dir}\n"
    sections = []
    if report.devices:
        sections.append(("DEVICES", _device_rows(report.devices)))
        sections.append(("HOLDERS", _holder_rows(report.devices)))
    if report.counters:
        sections.append(("COUNTER SETS", _counter_rows(report.counters)))
    if report.problems:
        rows = [["CLAIM UID", "RECORD", "PROBLEM"]]
        rows += [[escape_controls(p.uid), escape_controls(str(p.path)),
                  f"{p.reason}; {_held(report, p).describe()}"] for p in report.problems]
        sections.append(("PROBLEMS", rows))
    return "\n".join(f"{title}\n{_table(rows)}" for title, rows in sections)


def _device_rows(devices: Sequence[DeviceUsage]) -> list[list[str]]:
    rows = [["POOL/DEVICE", "TYPE", "MODE", "RESOURCE", "USED", "HARD", "FREE", "HOLDERS"]]
    for d in devices:
        head = [f"{d.pool}/{d.device}", d.device_type, _mode(d)]
        count = str(len(d.holders) + len(d.reserved_by))
        if not d.capacity:
            rows.append([*head, "-", "-", "-", "-", count])
        free = d.free
        for i, name in enumerate(sorted(d.capacity)):
            prefix = head if i == 0 else ["", "", ""]
            amounts = [quantity_text(d.used[name]), quantity_text(d.capacity[name]),
                       quantity_text(free[name])]
            rows.append([*prefix, name, *amounts, count if i == 0 else ""])
    return rows


def _holder_rows(devices: Sequence[DeviceUsage]) -> list[list[str]]:
    rows = [["POOL/DEVICE", "CLAIM", "CLAIM UID", "SHARE ID", "CONSUMED", "NOTE"]]
    for d in devices:
        for h in d.holders:
            consumed = ",".join(f"{n}={quantity_text(a)}"
                                for n, a in sorted(h.consumed.items())) or "-"
            note = "admin access" if h.admin_access else ("exclusive" if d.exclusive else "")
            rows.append(
                [
                    f"{d.pool}/{d.device}",
                    f"{h.namespace}/{h.name}",
                    h.uid,
                    h.share_id or "-",
                    consumed,
                    note,
                ]
            )
        for uid in d.reserved_by:
            rows.append([f"{d.pool}/{d.device}", "?", uid, "-", "-", UNREADABLE_NOTE])
    return rows


def _counter_rows(counters: Sequence[CounterUsage]) -> list[list[str]]:
    rows = [["POOL", "COUNTER SET", "COUNTER", "USED", "HARD", "FREE", "DEVICES"]]
    for c in counters:
        free = c.free
        for i, name in enumerate(sorted(c.total)):
            head = [c.pool, c.counter_set] if i == 0 else ["", ""]
            used = c.used.get(name, Fraction(0))
            devices = ",".join(c.devices) or "-" if i == 0 else ""
            rows.append([*head, name, quantity_text(used), quantity_text(c.total[name]),
                         quantity_text(free[name]), devices])
    return rows


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    return "\n".join(lines) + "\n"


def _quantities(amounts: Mapping[str, Fraction]) -> dict[str, str]:
    return {name: quantity_text(amount) for name, amount in sorted(amounts.items())}




# --- command line -------------------------------------------------------------------


DESCRIPTION = ("Show devices, shares and counters prepared by a simdra plugin on this node, "
               "read from its checkpoint (read-only, works while the plugin runs).")


def add_parser(commands: SubParsers) -> None:
    """Register `usage` with `simdra`'s sub-commands."""
    parser = commands.add_parser("usage", description=DESCRIPTION,
                                 help="show consumed device capacity from the plugin's state")
    _add_arguments(parser)
    parser.set_defaults(handler=handle, command_parser=parser)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--plugin-dir",
        help="the plugin's data directory (default: <plugins dir>/<driver name>)",
    )
    plugins = os.environ.get("KUBELET_PLUGINS_DIRECTORY_PATH", DEFAULT_PLUGINS_DIR)
    driver = os.environ.get("DRIVER_NAME", DEFAULT_DRIVER_NAME)
    parser.add_argument(
        "--kubelet-plugins-directory-path",
        default=plugins,
        help=f"as for `simdra run` [env KUBELET_PLUGINS_DIRECTORY_PATH; default {plugins}]",
    )
    parser.add_argument(
        "--driver-name",
        help=f"as for `simdra run` [env DRIVER_NAME; default {driver}; with --plugin-dir, "
        "that directory's name]",
    )
    cdi_root = os.environ.get("CDI_ROOT", DEFAULT_CDI_ROOT)
    parser.add_argument(
        "--cdi-root",
        default=cdi_root,
        help="as for `simdra run`: where the CDI specs of unreadable records are read "
        f"[env CDI_ROOT; default {cdi_root}]",
    )
    parser.add_argument("--output", "-o", choices=("table", "json"), default="table",
                        help="table for people (default), json for scripts")


def _driver_name(args: argparse.Namespace, data_dir: Path) -> str:
    """--driver-name (or DRIVER_NAME) when set; with only --plugin-dir, that directory's
    name, which is the driver name in the layout `simdra run` uses."""
    if args.driver_name:
        return str(args.driver_name)
    if "DRIVER_NAME" in os.environ or not args.plugin_dir:
        return os.environ.get("DRIVER_NAME", DEFAULT_DRIVER_NAME)
    return data_dir.name


def usage_main(argv: Sequence[str]) -> int:
    """`simdra usage [--plugin-dir DIR | --kubelet-plugins-directory-path P --driver-name D]
    [--output table|json]`; returns the exit status."""
    parser = OneLineParser(prog="simdra usage", description=DESCRIPTION)
    _add_arguments(parser)
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exc:  # --help (0) or bad arguments (2)
        return int(exc.code or 0)
    return handle(args)


def handle(args: argparse.Namespace) -> int:
    """Print the report for parsed `simdra usage` arguments; returns the exit status."""
    driver = args.driver_name or os.environ.get("DRIVER_NAME", DEFAULT_DRIVER_NAME)
    data_dir = Path(args.plugin_dir or Path(args.kubelet_plugins_directory_path) / driver)
    directory = records_directory(data_dir)
    if not data_dir.is_dir():
        print(f"simdra usage: {data_dir}: no such plugin data directory", file=sys.stderr)
        return 1
    try:
        # lexists: a link there is refused by read_records, never followed
        records, problems = (read_records(directory) if os.path.lexists(directory)
                             else ({}, []))
    except OSError as exc:
        print(f"simdra usage: cannot read {directory}: {exc}", file=sys.stderr)
        return 1
    driver = _driver_name(args, data_dir)
    held = [reservation(args.cdi_root, driver, p.uid) for p in problems]
    report = usage_report(str(data_dir), records, problems, held)
    if args.output == "json":
        print(json.dumps(report_json(report), indent=2))
    else:
        print(render_table(report), end="")
    return 0
