"""Structured log lines: extra fields become keys (JSON) or key=value pairs."""

from __future__ import annotations

import json
import logging
import re
from datetime import datetime, timezone

from audio_reward.scorer_server.logs import ACCESS_LOGGER, JsonFormatter, KeyValueFormatter


def record(**extra: object) -> logging.LogRecord:
    rec = logging.LogRecord("audio_reward.test", logging.ERROR, __file__, 1, "engine call failed", None, None)
    for key, value in extra.items():
        setattr(rec, key, value)
    return rec


def test_json_lines_carry_extra_fields() -> None:
    line = json.loads(JsonFormatter().format(record(request_id="abc", batch_size=4)))
    assert line["message"] == "engine call failed" and line["level"] == "error"
    assert line["request_id"] == "abc" and line["batch_size"] == 4
    assert "args" not in line and "msg" not in line


def test_plain_lines_append_extra_fields() -> None:
    line = KeyValueFormatter().format(record(request_id="abc"))
    assert line.endswith("engine call failed [request_id=abc]")


ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d")


def test_times_are_iso_8601_with_milliseconds_and_the_utc_offset() -> None:
    """Issue 40, finding 7: the times had one-second resolution and no zone (``2026-05-04 10:21:07,042``)."""
    rec = record()
    rec.created = 1_767_225_600.25  # 2026-01-01T00:00:00.250Z
    plain = KeyValueFormatter().format(rec)
    stamp = json.loads(JsonFormatter().format(rec))["time"]
    assert ISO_MS.match(plain) and ISO_MS.match(stamp), (plain, stamp)
    assert plain.startswith(stamp + " ERROR audio_reward.test: ")
    assert datetime.fromisoformat(stamp) == datetime(2026, 1, 1, 0, 0, 0, 250_000, tzinfo=timezone.utc)


def test_an_access_line_says_each_field_once_in_plain_text_and_keys_them_all_in_json() -> None:
    rec = logging.LogRecord(ACCESS_LOGGER, logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %s %.1f ms',
                            ("127.0.0.1:5000", "POST", "/v1/score", "1.1", 200, 12.3), None)
    for key, value in {"request_id": "r1", "client": "127.0.0.1:5000", "method": "POST", "path": "/v1/score",
                       "status": 200, "latency_ms": 12.3, "_said": ("client", "method", "path", "status",
                                                                    "latency_ms")}.items():
        setattr(rec, key, value)
    assert KeyValueFormatter().format(rec).endswith(
        'INFO audio_reward.access: 127.0.0.1:5000 - "POST /v1/score HTTP/1.1" 200 12.3 ms [request_id=r1]')
    line = json.loads(JsonFormatter().format(rec))
    assert {k: line[k] for k in ("method", "path", "status", "latency_ms", "request_id")} == {
        "method": "POST", "path": "/v1/score", "status": 200, "latency_ms": 12.3, "request_id": "r1"}
    assert "_said" not in line
