"""`simdra fault`: inject device faults into a running fake-mode plugin (see
`simdra._driver.devices.faults` for the control file and how the plugin obeys it).

    simdra fault [--plugin-dir DIR] DEVICE ACTION [--message TEXT] [--count N] [--seconds S]
    simdra fault [--plugin-dir DIR] list [--json]
    simdra fault [--plugin-dir DIR] reset

DEVICE is a device name (every pool) or POOL/DEVICE. Names are not checked against the
plugin's inventory: the CLI only writes the control file, so it works before the plugin
starts and while it restarts. Exit status: 0 done, 2 bad input or unusable control file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from simdra._driver.cli.parser import OneLineParser, SubParsers
from simdra._driver.core.validation import driver_name_errors
from simdra._driver.devices.faults import (
    DEFAULT_FAIL_MESSAGE,
    DEFAULT_UNHEALTHY_MESSAGE,
    FaultError,
    FaultFile,
    FaultLockTimeout,
    FaultState,
    check_count,
    check_message,
    check_seconds,
    clear_mark,
    fault_file_path,
    parse_target,
    set_faults,
    show,
)
from simdra._driver.kubelet.sockets import plugin_data_dir

PROG = "simdra fault"
DESCRIPTION = (
    "Inject device faults into a running fake-mode plugin by editing <plugin dir>/faults.json. "
    "DEVICE is a device name (every pool) or POOL/DEVICE; names are not checked against the "
    "plugin's inventory, so faults can be set before the plugin starts. "
    "Exit status: 0 done, 2 bad input or unusable control file."
)
USAGE = (
    "simdra fault [dir options] DEVICE ACTION [--message TEXT] [--count N] [--seconds S]\n"
    "       simdra fault [dir options] list [--json]\n"
    "       simdra fault [dir options] reset"
)
ACTION_HELP = """actions on DEVICE (a device name, or POOL/DEVICE for one pool only):
  unhealthy [--message TEXT]         report the device unhealthy to the kubelet
  healthy                            undo `unhealthy`
  remove                             stop publishing the device
  add                                undo `remove`
  fail-prepare [--count N] [--message TEXT]
                                     the next N prepares of the device fail (default 1)
  slow-prepare [--count N] --seconds S
                                     the next N prepares of the device take S seconds longer
  clear                              undo every fault of the device
other commands:
  list [--json]                      print the faults in force
  reset                              remove every fault (also repairs a corrupt file)
"""

# Which options each action takes (everything else is refused, not silently ignored).
_OPTIONS: dict[str, set[str]] = {
    "unhealthy": {"message"},
    "healthy": set(),
    "remove": set(),
    "add": set(),
    "fail-prepare": {"count", "message"},
    "slow-prepare": {"count", "seconds"},
    "clear": set(),
    "list": {"json"},
    "reset": set(),
}
_COMMANDS = ("list", "reset")


class _Usage(Exception):
    """Bad input; the message is the one line the user sees."""


def add_parser(commands: SubParsers) -> None:
    """Register `fault` with `simdra`'s sub-commands."""
    parser = commands.add_parser(
        "fault", help="inject device faults into a running fake-mode plugin", usage=USAGE,
        description=DESCRIPTION, epilog=ACTION_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(parser)
    parser.set_defaults(handler=handle, command_parser=parser)


def fault_main(argv: Sequence[str] | None = None) -> int:
    """Run `simdra fault` with `argv` (the words after `fault`); returns the exit status."""
    parser = OneLineParser(
        prog=PROG, usage=USAGE, description=DESCRIPTION, epilog=ACTION_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help (0) or an argparse error (2), already printed
        return int(exit_.code or 0)
    return handle(args)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_argument_group("dir options")
    where.add_argument("--plugin-dir", default=None,
                       help="the plugin's data directory [default: "
                       "<kubelet plugins directory>/<driver name>]")
    where.add_argument("--kubelet-plugins-directory-path",
                       default=os.environ.get("KUBELET_PLUGINS_DIRECTORY_PATH",
                                              "/var/lib/kubelet/plugins"),
                       help="[env KUBELET_PLUGINS_DIRECTORY_PATH; default "
                       "/var/lib/kubelet/plugins]")
    where.add_argument("--driver-name", default=os.environ.get("DRIVER_NAME", "dra.example.com"),
                       help="[env DRIVER_NAME; default dra.example.com]")
    parser.add_argument("words", nargs="+", metavar="DEVICE ACTION | list | reset")
    parser.add_argument("--message", default=None, help="unhealthy / fail-prepare message")
    parser.add_argument("--count", type=int, default=None,
                        help="how many prepares (default 1; 0 ends the fault)")
    parser.add_argument("--seconds", type=float, default=None, help="slow-prepare delay")
    parser.add_argument("--json", action="store_true", help="list: print the control file")


def handle(args: argparse.Namespace) -> int:
    """Carry out parsed `simdra fault` arguments; prints one error line on failure."""
    try:
        return _run(args)
    except (_Usage, FaultError, FaultLockTimeout, OSError) as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    key, action = _split_words(args.words)
    _check_options(args, action)
    faults = FaultFile(fault_file_path(_data_dir(args)))
    if action == "list":
        _print_list(faults.load(), as_json=args.json)
    elif action == "reset":
        faults.reset()
        print("all faults removed")
    else:
        assert key is not None
        change = _edit(action, key, args)
        state = faults.update(lambda s: _both(change(s)))
        print(f"{key}: {state.get(key).describe()}")
    return 0


def _split_words(words: list[str]) -> tuple[str | None, str]:
    if len(words) == 1 and words[0] in _COMMANDS:
        return None, words[0]
    if len(words) != 2:
        raise _Usage(f"expected DEVICE ACTION, `list` or `reset`, got {len(words)} words "
                     f"({' '.join(map(show, words))}); see `{PROG} --help`")
    key, action = words
    if action not in _OPTIONS or action in _COMMANDS:
        choices = ", ".join(a for a in _OPTIONS if a not in _COMMANDS)
        raise _Usage(f"unknown action {show(action)}: choose one of {choices}")
    parse_target(key)  # FaultError names the bad part
    return key, action


def _check_options(args: argparse.Namespace, action: str) -> None:
    given = {name for name in ("message", "count", "seconds") if getattr(args, name) is not None}
    if args.json:
        given.add("json")
    extra = given - _OPTIONS[action]
    if extra:
        raise _Usage(f"{action} does not take " + ", ".join(f"--{o}" for o in sorted(extra)))
    if action == "slow-prepare" and args.seconds is None:
        raise _Usage("slow-prepare needs --seconds S")
    if args.message is not None:
        check_message(args.message)
    if args.count is not None:
        check_count(args.count)
    if args.seconds is not None:
        check_seconds(args.seconds)


def _data_dir(args: argparse.Namespace) -> Path:
    if args.plugin_dir:
        directory = Path(args.plugin_dir)
    else:
        if driver_name_errors(args.driver_name, "driver"):
            raise _Usage(f"--driver-name={show(args.driver_name)}: must be a DNS subdomain "
                         "of at most 63 characters")
        directory = Path(plugin_data_dir(args.driver_name, args.kubelet_plugins_directory_path))
    if not directory.is_dir():
        raise _Usage(f"plugin directory {directory} does not exist (wrong --plugin-dir, or "
                     "--driver-name / --kubelet-plugins-directory-path?)")
    return directory


def _edit(action: str, key: str, args: argparse.Namespace) -> Callable[[FaultState], FaultState]:
    count = 1 if args.count is None else args.count
    edits: dict[str, Callable[[FaultState], FaultState]] = {
        "unhealthy": lambda s: set_faults(s, key, unhealthy=True,
                                          message=args.message or DEFAULT_UNHEALTHY_MESSAGE),
        "healthy": lambda s: clear_mark(s, key, "unhealthy"),
        "remove": lambda s: set_faults(s, key, removed=True),
        "add": lambda s: clear_mark(s, key, "removed"),
        "fail-prepare": lambda s: set_faults(s, key, fail_prepares=count,
                                             fail_message=args.message or DEFAULT_FAIL_MESSAGE),
        "slow-prepare": lambda s: set_faults(s, key, slow_prepares=count,
                                             slow_seconds=args.seconds or 0.0),
        "clear": lambda s: clear_mark(s, key, None),
    }
    return edits[action]


def _both(state: FaultState) -> tuple[FaultState, FaultState]:
    return state, state


def _print_list(state: FaultState, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(json.loads(state.to_bytes()), indent=2, sort_keys=True))
        return
    if not state.entries:
        print("no faults")
        return
    width = max(len(key) for key in state.entries)
    for key, faults in state.entries.items():
        print(f"{key:<{width}}  {faults.describe()}")
