"""Structured log lines: extra fields become keys (JSON) or key=value pairs."""

from __future__ import annotations

import json
import logging

from audio_reward.scorer_server.logs import JsonFormatter, KeyValueFormatter


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
