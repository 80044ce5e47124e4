"""Structured logs: one line per record, as text or JSON, carrying context fields.

Context fields come from `simdra._driver.core.logcontext.log_context(claim=..., pool=...)`
blocks around the caller (re-exported here); fields passed as `extra={...}` to a single
log call are added the same way.

Text:  `2026-01-02T03:04:05.678Z INFO simdra._driver.claims.prepare: prepared ... claim=ns/a`
       (control characters escaped, traceback lines indented: a record is one line)
JSON:  `{"ts": "2026-01-02T03:04:05.678Z", "level": "INFO", "logger": "...", "msg": "...",
        "claim": "ns/a", ...}` (plus "exc" with the traceback when there is one).

Verbosity follows klog's `-v` loosely:

    0    INFO and above from everything (the default)
    1-3  DEBUG from simdra's own loggers (`driver.*`); libraries stay at INFO
    4+   DEBUG from everything, libraries included (gRPC, kubernetes client, urllib3)
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from simdra._driver.core.logcontext import current_context, log_context
from simdra._driver.core.textlimits import escape_controls

__all__ = ["configure_logging", "current_context", "log_context"]

LOG_FORMATS = ("text", "json")
OWN_LOGGER = "simdra"  # the package every simdra logger lives under
LIBRARY_DEBUG_VERBOSITY = 4

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD_ATTRS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
_CONTEXT_ATTR = "simdra_context"
_RESERVED = ("ts", "level", "logger", "msg", "exc")


class ContextFilter(logging.Filter):
    """Copies the current context and `extra=` fields onto the record at emit time.

    It runs in the emitting thread, so the fields are the ones of the code that logged,
    whichever thread later formats the record.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, _CONTEXT_ATTR):
            extra = {
                k: str(v)
                for k, v in vars(record).items()
                if k not in _STANDARD_ATTRS and not k.startswith("_")
            }
            setattr(record, _CONTEXT_ATTR, {**current_context(), **extra})
        return True


def record_fields(record: logging.LogRecord) -> dict[str, str]:
    """The context fields of a record (empty when no ContextFilter saw it)."""
    return dict(getattr(record, _CONTEXT_ATTR, {}))


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _text_value(value: str) -> str:
    """Quote values that would make `key=value` ambiguous to read or to split; control
    characters are escaped either way (`json.dumps` escapes them inside quotes)."""
    if not value or any(c.isspace() or c in '"=' for c in value):
        return json.dumps(value, ensure_ascii=False)
    return escape_controls(value)


class TextFormatter(logging.Formatter):
    """`<ts> <LEVEL> <logger>: <message> key=value ...`, traceback on following lines.

    One record is one line, whatever its values hold: control characters in the message
    and the fields (a newline in a claim name from the API, say) are escaped, and every
    line of a traceback is indented, so no value can forge a line that looks like a
    record of its own.
    """

    def format(self, record: logging.LogRecord) -> str:
        message = escape_controls(record.getMessage())
        line = f"{_timestamp(record)} {record.levelname} {record.name}: {message}"
        fields = record_fields(record)
        if fields:
            line += " " + " ".join(f"{escape_controls(k)}={_text_value(v)}"
                                   for k, v in fields.items())
        exc = self._exception_text(record)
        if not exc:
            return line
        return line + "".join(f"\n    {escape_controls(part)}" for part in exc.splitlines())

    def _exception_text(self, record: logging.LogRecord) -> str:
        parts = []
        if record.exc_info:
            parts.append(self.formatException(record.exc_info))
        if record.stack_info:
            parts.append(self.formatStack(record.stack_info))
        return "\n".join(parts)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, context fields, exc."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name, value in record_fields(record).items():
            # A context field never hides a reserved key; it is kept under another name.
            entry[f"ctx_{name}" if name in _RESERVED else name] = value
        exc = []
        if record.exc_info:
            exc.append(self.formatException(record.exc_info))
        if record.stack_info:
            exc.append(self.formatStack(record.stack_info))
        if exc:
            entry["exc"] = "\n".join(exc)
        return json.dumps(entry, ensure_ascii=False)


class _SimdraHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Marks the handler configure_logging installed, so a second call replaces it."""


def make_formatter(fmt: str) -> logging.Formatter:
    """The formatter for a `--log-format` value; ValueError for an unknown one."""
    if fmt == "text":
        return TextFormatter()
    if fmt == "json":
        return JsonFormatter()
    raise ValueError(f"log format {fmt!r}: must be one of {', '.join(LOG_FORMATS)}")


def levels_for(verbosity: int) -> tuple[int, int]:
    """(root level, level of simdra's own loggers) for a `-v` value (see module doc)."""
    if verbosity < 0:
        raise ValueError(f"verbosity {verbosity}: must be 0 or more")
    if verbosity >= LIBRARY_DEBUG_VERBOSITY:
        return logging.DEBUG, logging.DEBUG
    if verbosity >= 1:
        return logging.INFO, logging.DEBUG
    return logging.INFO, logging.INFO


def configure_logging(fmt: str = "text", verbosity: int = 0, stream: TextIO | None = None) -> None:
    """Send all logging to `stream` (default stderr) in `fmt` ("text" or "json") at the
    levels `verbosity` selects. Call once at start-up instead of logging.basicConfig;
    calling again replaces what the previous call installed."""
    formatter = make_formatter(fmt)
    root_level, own_level = levels_for(verbosity)
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _SimdraHandler)]:
        root.removeHandler(old)
        old.close()
    handler = _SimdraHandler(stream or sys.stderr)
    handler.setFormatter(formatter)
    handler.addFilter(ContextFilter())
    root.addHandler(handler)
    root.setLevel(root_level)
    logging.getLogger(OWN_LOGGER).setLevel(own_level)
