"""Logging set-up: quiet by default, one JSON object per line on request.

Library code logs with ``extra={...}`` fields; the JSON formatter writes
them as top-level keys, the plain formatter appends them as ``key=value``.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import Any

# Attributes every LogRecord has; anything else came from ``extra``.  uvicorn adds
# ``color_message``, a copy of the message with ANSI colour codes: never printed.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "color_message"}
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": _ANSI.sub("", record.getMessage()),
            **_extras(record),
        }
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class KeyValueFormatter(logging.Formatter):
    """``time LEVEL logger: message [key=value ...]``; ANSI codes only when ``colour`` (a terminal)."""

    def __init__(self, *, colour: bool = False) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.colour = colour

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = _extras(record)
        if extras:
            fields = " ".join(f"{k}={v}" for k, v in extras.items())
            head, sep, tail = line.partition("\n")
            line = f"{head} [{fields}]{sep}{tail}"
        return line if self.colour else _ANSI.sub("", line)


def configure_logging(level: str = "warning", *, json_lines: bool = False) -> None:
    """Send ``audio_reward`` and uvicorn logs to stderr at ``level``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else KeyValueFormatter(colour=sys.stderr.isatty()))
    numeric = logging.getLevelName(level.upper())
    levels = dict.fromkeys(("audio_reward", "uvicorn", "uvicorn.error"), numeric)
    # Access logs only when asked for debug: a training run sends millions of requests.
    levels["uvicorn.access"] = numeric if numeric <= logging.DEBUG else logging.WARNING
    for name, name_level in levels.items():
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(name_level)
        logger.propagate = False
