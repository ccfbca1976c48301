"""The access log of a real ``audio-reward serve`` (issue 40, finding 7).

Below debug level the server wrote no line per request, and its times had one-second resolution and no
zone.  ``--access-log`` / ``--no-access-log`` switch one line per request on and off, as uvicorn's flags do:
method, path, status, latency and request id, with ISO 8601 times to the millisecond with the UTC offset.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import httpx
import pytest

from tests.testkit.server import ServerHandle, running_server

ISO_MS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d"
PLAIN = re.compile(rf'^({ISO_MS}) INFO audio_reward\.access: 127\.0\.0\.1:\d+ - "(\w+) (\S+) HTTP/1\.1" (\d+) '
                   r"(\d+\.\d) ms \[request_id=([\w.:-]+)\]$")


def _traffic(url: str) -> list[tuple[str, str, int, str]]:
    """Three requests, each with its own id: (method, path, status, request id) as the client saw them."""
    seen = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for method, path, body in (("GET", "/healthz", None), ("POST", "/v1/score", b"{}"),
                                   ("GET", "/no/such/path?x=1", None)):
            answer = client.request(method, path, content=body, headers={"X-Request-ID": f"id-{len(seen)}"})
            seen.append((method, path, answer.status_code, answer.headers["x-request-id"]))
    return seen


def _access_lines(server: ServerHandle, *, ids: int = 3, wait_s: float = 5.0) -> list[str]:
    """The access lines so far, once ``ids`` of the test's requests have theirs (a line is written after its
    answer is sent, so the client can read the answer first); with ``ids=0``, after ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        lines = [line for line in server.log_tail(100_000).splitlines() if "audio_reward.access" in line]
        if (ids and sum('id-' in line for line in lines) >= ids) or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def test_access_log_on_writes_one_line_per_request_under_the_default_log_level() -> None:
    with running_server(instant=True, access_log=True) as server:
        seen = _traffic(server.url)
        lines = _access_lines(server)
    ours = [m.groups() for m in map(PLAIN.match, lines) if m and m[6].startswith("id-")]
    assert [(m[1], m[2], int(m[3]), m[5]) for m in ours] == seen, lines
    assert [status for _, _, status, _ in seen] == [200, 400, 404]
    assert all(float(m[4]) >= 0 for m in ours)


def test_access_log_as_json_lines_keys_every_field() -> None:
    with running_server(instant=True, access_log=True, log_json=True) as server:
        seen = _traffic(server.url)
        lines = _access_lines(server)
    records: list[dict[str, Any]] = [json.loads(line) for line in lines]
    ours = [r for r in records if r["request_id"].startswith("id-")]
    assert [(r["method"], r["path"], r["status"], r["request_id"]) for r in ours] == seen
    assert all(re.fullmatch(ISO_MS, r["time"]) and r["latency_ms"] >= 0 and r["level"] == "info" for r in ours)


@pytest.mark.parametrize("settings", [{}, {"log_level": "debug", "access_log": False}],
                         ids=["default", "debug-but-off"])
def test_access_log_off_writes_none(settings: dict[str, Any]) -> None:
    with running_server(instant=True, **settings) as server:
        _traffic(server.url)
        assert _access_lines(server, ids=0, wait_s=1.0) == []


def test_debug_level_turns_it_on_unless_told_otherwise() -> None:
    with running_server(instant=True, log_level="debug") as server:
        seen = _traffic(server.url)
        lines = _access_lines(server)
    assert {request_id for *_, request_id in seen} <= {m[6] for m in map(PLAIN.match, lines) if m}
