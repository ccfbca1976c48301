"""Logging set-up: quiet by default, one JSON object per line on request, an access log when asked.

Library code logs with ``extra={...}`` fields; the JSON formatter writes
them as top-level keys, the plain formatter appends them as ``key=value``
(except those the message already says, named in the record's ``_said``).
Times are ISO 8601 with milliseconds and the UTC offset
(``2026-05-04T10:21:07.042+02:00``), in both formats.

The access log (:data:`ACCESS_LOGGER`, one line per request) has its own
switch, ``--access-log`` / ``--no-access-log``, as uvicorn's: its lines are
written whatever ``--log-level`` says, and by default only at ``debug``.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import datetime
from typing import Any

ACCESS_LOGGER = "audio_reward.access"
"""The logger of the one line per request (:mod:`.http.middleware`)."""

# Attributes every LogRecord has; anything else came from ``extra``.  uvicorn adds
# ``color_message``, a copy of the message with ANSI colour codes: never printed.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "color_message"}
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


def iso_time(record: logging.LogRecord) -> str:
    """The record's time in ISO 8601, local, with milliseconds and the UTC offset: unambiguous across machines."""
    return datetime.fromtimestamp(record.created).astimezone().isoformat(timespec="milliseconds")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and every extra field as a key."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"time": iso_time(record), "level": record.levelname.lower(), "logger": record.name,
                               "message": _ANSI.sub("", record.getMessage()), **_extras(record)}
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class KeyValueFormatter(logging.Formatter):
    """``time LEVEL logger: message [key=value ...]``; ANSI codes only when ``colour`` (a terminal)."""

    def __init__(self, *, colour: bool = False) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.colour = colour

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # logging calls it so
        return iso_time(record)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        if extras := {k: v for k, v in _extras(record).items() if k not in getattr(record, "_said", ())}:
            fields = " ".join(f"{k}={v}" for k, v in extras.items())
            head, sep, tail = line.partition("\n")
            line = f"{head} [{fields}]{sep}{tail}"
        return line if self.colour else _ANSI.sub("", line)


def configure_logging(level: str = "warning", *, json_lines: bool = False, access_log: bool = False) -> None:
    """Send ``audio_reward`` and uvicorn logs to stderr at ``level``; the access log's lines too when asked."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else KeyValueFormatter(colour=sys.stderr.isatty()))
    numeric = logging.getLevelName(level.upper())
    # uvicorn's own access log stays off (it has no latency and no request id): ours replaces it.
    levels = dict.fromkeys(("audio_reward", "uvicorn", "uvicorn.error"), numeric) | {"uvicorn.access": logging.WARNING}
    for name, name_level in levels.items():
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(name_level)
        logger.propagate = False
    # Its own level, so that --access-log writes its INFO lines under --log-level warning, and
    # --no-access-log silences them under debug; they reach the handler through "audio_reward".
    logging.getLogger(ACCESS_LOGGER).setLevel(logging.INFO if access_log else logging.WARNING)
